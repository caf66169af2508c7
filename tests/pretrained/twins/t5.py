"""Twin of a T5 folder (original T5 and v1.1 / Flan-T5):
T5ForConditionalGeneration and T5Tokenizer.

Written from huggingface/transformers (read, not copied):
  src/transformers/models/t5/modeling_t5.py      6b8b757dfcb582379a64f013cdce46c43629f2b0
      RMS norm without bias or mean (T5LayerNorm), pre-norm blocks with
      final_layer_norm, attention without 1/sqrt(d) scaling and without
      biases, the bucketed relative position bias of each stack's first
      block shared by all its blocks (bidirectional in the encoder),
      "relu" DenseReluDense (wi, wo) or gated (wi_0, wi_1, wo) for
      "gated-gelu", no embedding scale; lm_head tied to shared with the
      output times d_model**-0.5, or a separate lm_head.weight
  src/transformers/models/t5/tokenization_t5.py  8d4b5b87c739a89b0862adbbba932135857278aa
      spiece.model ids as they are, X </s>, <extra_id_N> at
      piece count + extra_ids - 1 - N
"""
import math
import os
import re

import torch

from common import (ACTIVATIONS, Twin, causal_mask, load_sentencepiece, load_weights, merge_heads,
                    padding_mask, read_json, split_heads)


def settings(config):
    """config.json with T5Config's defaults for the fields older folders
    (t5-small) leave out."""
    full = {"feed_forward_proj": "relu", "tie_word_embeddings": True, "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32, "layer_norm_epsilon": 1e-6,
            "num_decoder_layers": config["num_layers"]}
    full.update(config)
    return full


def parameter_shapes(config):
    config = settings(config)
    d, inner, ff = config["d_model"], config["num_heads"] * config["d_kv"], config["d_ff"]
    shapes = [("shared.weight", [config["vocab_size"], d])]
    if not config["tie_word_embeddings"]:
        shapes.append(("lm_head.weight", [config["vocab_size"], d]))
    gated = config["feed_forward_proj"].startswith("gated-")
    for side, layers in [("encoder", config["num_layers"]), ("decoder", config["num_decoder_layers"])]:
        shapes.append(("%s.final_layer_norm.weight" % side, [d]))
        shapes.append(("%s.block.0.layer.0.SelfAttention.relative_attention_bias.weight" % side,
                       [config["relative_attention_num_buckets"], config["num_heads"]]))
        attentions = ["SelfAttention"] + (["EncDecAttention"] if side == "decoder" else [])
        for i in range(layers):
            for j, attention in enumerate(attentions):
                prefix = "%s.block.%d.layer.%d." % (side, i, j)
                shapes += [(prefix + attention + "." + p + ".weight", [inner, d]) for p in "qkv"]
                shapes += [(prefix + attention + ".o.weight", [d, inner]), (prefix + "layer_norm.weight", [d])]
            prefix = "%s.block.%d.layer.%d." % (side, i, len(attentions))
            inputs = ["wi_0", "wi_1"] if gated else ["wi"]
            shapes += [(prefix + "DenseReluDense.%s.weight" % w, [ff, d]) for w in inputs]
            shapes += [(prefix + "DenseReluDense.wo.weight", [d, ff]), (prefix + "layer_norm.weight", [d])]
    return shapes


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5Attention._relative_position_bucket: exact buckets for small
    distances, logarithmic ones up to max_distance, the sign its own half
    when bidirectional."""
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, relative_position, large)


class T5Model:
    def __init__(self, config, weights):
        self.config, self.weights = settings(config), weights
        config = self.config
        missing = [name for name, _ in parameter_shapes(config) if name not in weights]
        if missing:
            raise KeyError("model.safetensors lacks %s" % missing)
        projection = config["feed_forward_proj"]
        self.gated = projection.startswith("gated-")
        # T5Config: "gated-gelu" means the tanh GELU ("gelu_new")
        name = projection.split("-")[-1]
        self.activation = ACTIVATIONS["gelu_new" if projection == "gated-gelu" else name]
        self.eps = config["layer_norm_epsilon"]
        self.heads = config["num_heads"]
        self.pad = config["pad_token_id"]

    def norm(self, name, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weights[name + ".weight"] * (x * torch.rsqrt(variance + self.eps))

    def position_bias(self, side, queries, keys):
        relative = torch.arange(keys)[None, :] - torch.arange(queries)[:, None]
        buckets = relative_position_bucket(relative, side == "encoder", self.config["relative_attention_num_buckets"],
                                           self.config["relative_attention_max_distance"])
        table = self.weights["%s.block.0.layer.0.SelfAttention.relative_attention_bias.weight" % side]
        return table[buckets].permute(2, 0, 1).unsqueeze(0)

    def attention(self, name, x, memory, bias):
        w = self.weights
        q = split_heads(torch.matmul(x, w[name + ".q.weight"].t()), self.heads)
        k = split_heads(torch.matmul(memory, w[name + ".k.weight"].t()), self.heads)
        v = split_heads(torch.matmul(memory, w[name + ".v.weight"].t()), self.heads)
        scores = torch.matmul(q, k.transpose(2, 3)) + bias
        return torch.matmul(merge_heads(torch.matmul(scores.softmax(dim=-1), v)), w[name + ".o.weight"].t())

    def feed_forward(self, name, x):
        w = self.weights
        if self.gated:
            hidden = self.activation(torch.matmul(x, w[name + ".wi_0.weight"].t())) * \
                torch.matmul(x, w[name + ".wi_1.weight"].t())
        else:
            hidden = self.activation(torch.matmul(x, w[name + ".wi.weight"].t()))
        return torch.matmul(hidden, w[name + ".wo.weight"].t())

    def stack(self, side, ids, self_bias, memory=None, memory_bias=None):
        x = torch.nn.functional.embedding(ids, self.weights["shared.weight"])
        layers = self.config["num_layers" if side == "encoder" else "num_decoder_layers"]
        for i in range(layers):
            block = "%s.block.%d.layer." % (side, i)
            normed = self.norm(block + "0.layer_norm", x)
            x = x + self.attention(block + "0.SelfAttention", normed, normed, self_bias)
            last = 1
            if memory is not None:
                x = x + self.attention(block + "1.EncDecAttention", self.norm(block + "1.layer_norm", x), memory,
                                       memory_bias)
                last = 2
            normed = self.norm("%s%d.layer_norm" % (block, last), x)
            x = x + self.feed_forward("%s%d.DenseReluDense" % (block, last), normed)
        return self.norm(side + ".final_layer_norm", x)

    def encode(self, input_ids):
        length = input_ids.shape[1]
        bias = self.position_bias("encoder", length, length) + padding_mask(input_ids.ne(self.pad), length)
        return self.stack("encoder", input_ids, bias)

    def decode(self, decoder_ids, encoder_out, input_ids):
        length = decoder_ids.shape[1]
        self_bias = self.position_bias("decoder", length, length) + causal_mask(length)
        memory_bias = padding_mask(input_ids.ne(self.pad), length)
        x = self.stack("decoder", decoder_ids, self_bias, encoder_out, memory_bias)
        if self.config["tie_word_embeddings"]:
            return torch.matmul(x * self.config["d_model"] ** -0.5, self.weights["shared.weight"].t())
        return torch.matmul(x, self.weights["lm_head.weight"].t())

    def logits(self, input_ids, decoder_ids):
        return self.decode(decoder_ids, self.encode(input_ids), input_ids)

    def adjust_logits_during_generation(self, logits):
        return logits


class T5Tokenizer:
    def __init__(self, folder):
        settings = read_json(folder, "tokenizer_config.json")
        self.sp = load_sentencepiece(folder, "spiece.model")
        self.extra_ids = settings.get("extra_ids", 100)
        self.size = self.sp.get_piece_size()

    def token_id(self, piece):
        match = re.fullmatch(r"<extra_id_(\d+)>", piece)
        if match:
            return self.size + self.extra_ids - 1 - int(match.group(1))
        return self.sp.piece_to_id(piece)

    def encode(self, text, language=None, target=False):
        return [self.token_id(p) for p in self.sp.encode(text, out_type=str)] + [self.sp.eos_id()]

    def decode(self, ids):
        """Pad, eos, unk and the sentinels are special and skipped. Ids past
        the sentinels (config.json's vocab_size is padded beyond the
        tokenizer's) become "<extra_id_-1>" … pieces, which SentencePiece
        decodes as its unknown surface."""
        special = {self.sp.pad_id(), self.sp.eos_id(), self.sp.unk_id()}
        pieces = []
        for i in ids:
            if i < self.size:
                if i not in special:
                    pieces.append(self.sp.id_to_piece(i))
            elif i >= self.size + self.extra_ids:
                pieces.append("<extra_id_%d>" % (self.size + self.extra_ids - 1 - i))
        return self.sp.decode(pieces).strip()


def load(folder):
    config = read_json(folder, "config.json")
    model = T5Model(config, load_weights(folder))
    return Twin(folder, model, T5Tokenizer(folder))
