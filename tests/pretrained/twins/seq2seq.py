"""The BART-shaped encoder-decoder that Marian, BART, mBART and M2M100 are
variants of, as their modeling files build it; each family's module picks
its Layout and tokenizer.

Written from huggingface/transformers (read, not copied):
  src/transformers/models/bart/modeling_bart.py        57228229d2ee2729f6ee597b4973aefdb39c2b37
  src/transformers/models/marian/modeling_marian.py    00b676f8f0489b88652a31d70751cc540dd06305
  src/transformers/models/mbart/modeling_mbart.py      (MBartEncoder/Decoder: pre-norm, final layer_norm)
  src/transformers/models/m2m_100/modeling_m2m_100.py  001400f58fab2511856b86500380fd51aaa6150f
"""
import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from common import (ACTIVATIONS, causal_mask, layer_norm, linear, load_weights, merge_heads, padding_mask,
                    read_json, split_heads)


@dataclass
class Layout:
    pre_norm: bool               # mBART, M2M100: norm before each sublayer (normalize_before)
    layernorm_embedding: bool    # BART, mBART: layer norm right after the embeddings
    final_layer_norm: bool       # mBART, M2M100: encoder.layer_norm and decoder.layer_norm
    positions: str               # "learned" (offset 2), "marian" (sinusoid halves) or "fairseq"
    final_logits_bias: bool      # BART, mBART, Marian: a [1, vocab] buffer added to the logits


def marian_sinusoids(rows, dim):
    """MarianSinusoidalPositionalEmbedding._init_weight: angle pos / 10000^(2(j//2)/dim)
    in float64, sines of the even columns in the first half, cosines of the
    odd ones in the second (not interleaved)."""
    angles = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)]
                       for pos in range(rows)])
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    table = torch.empty(rows, dim)
    table[:, :half] = torch.FloatTensor(np.sin(angles[:, 0::2]))
    table[:, half:] = torch.FloatTensor(np.cos(angles[:, 1::2]))
    return table


def fairseq_sinusoids(rows, dim, padding_idx):
    """M2M100SinusoidalPositionalEmbedding.get_embedding (float32): frequencies
    exp(-i log(10000) / (dim/2 - 1)), sines then cosines, the padding row zero."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    frequencies = torch.exp(torch.arange(half, dtype=torch.float) * -step)
    angles = torch.arange(rows, dtype=torch.float).unsqueeze(1) * frequencies.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).view(rows, -1)
    if dim % 2 == 1:
        table = torch.cat([table, torch.zeros(rows, 1)], dim=1)
    table[padding_idx, :] = 0
    return table


def parameter_shapes(config, layout):
    """(name, shape) of every tensor model.safetensors holds, by the
    published names."""
    d, vocab = config["d_model"], config["vocab_size"]
    shapes = [("model.shared.weight", [vocab, d])]
    if layout.final_logits_bias:
        shapes.append(("final_logits_bias", [1, vocab]))

    def norm(name):
        return [(name + ".weight", [d]), (name + ".bias", [d])]

    def lin(name, rows, cols):
        return [(name + ".weight", [rows, cols]), (name + ".bias", [rows])]

    for side in ["encoder", "decoder"]:
        stack = "model." + side
        if layout.positions == "learned":
            shapes.append((stack + ".embed_positions.weight", [config["max_position_embeddings"] + 2, d]))
        if layout.layernorm_embedding:
            shapes += norm(stack + ".layernorm_embedding")
        if layout.final_layer_norm:
            shapes += norm(stack + ".layer_norm")
        ffn = config[side + "_ffn_dim"]
        attentions = ["self_attn"] + (["encoder_attn"] if side == "decoder" else [])
        for i in range(config[side + "_layers"]):
            layer = "%s.layers.%d." % (stack, i)
            for attention in attentions:
                for projection in ["k_proj", "v_proj", "q_proj", "out_proj"]:
                    shapes += lin(layer + attention + "." + projection, d, d)
                shapes += norm(layer + attention + "_layer_norm")
            shapes += lin(layer + "fc1", ffn, d) + lin(layer + "fc2", d, ffn) + norm(layer + "final_layer_norm")
    return shapes


class EncoderDecoder:
    def __init__(self, config, weights, layout):
        self.config, self.weights, self.layout = config, weights, layout
        missing = [name for name, _ in parameter_shapes(config, layout) if name not in weights]
        if missing:
            raise KeyError("model.safetensors lacks %s" % missing)
        self.scale = math.sqrt(config["d_model"]) if config.get("scale_embedding") else 1.0
        self.activation = ACTIVATIONS[config["activation_function"]]
        self.pad = config["pad_token_id"]
        rows = config["max_position_embeddings"]
        if layout.positions == "marian":
            self.sinusoids = marian_sinusoids(rows, config["d_model"])
        elif layout.positions == "fairseq":
            self.sinusoids = fairseq_sinusoids(rows + 2 + 2, config["d_model"], self.pad)


    def positions(self, side, ids):
        length = ids.shape[1]
        if self.layout.positions == "learned":  # BartLearnedPositionalEmbedding: offset 2
            return self.weights["model.%s.embed_positions.weight" % side][torch.arange(length) + 2]
        if self.layout.positions == "marian":
            return self.sinusoids[torch.arange(length)]
        # create_position_ids_from_input_ids: tokens count from padding_idx + 1, pads stay at padding_idx
        keep = ids.ne(self.pad).int()
        return self.sinusoids[torch.cumsum(keep, dim=1) * keep + self.pad]

    def attention(self, name, x, memory, mask, heads):
        w = self.weights
        head_dim = x.shape[-1] // heads
        q = split_heads(linear(w, name + ".q_proj", x), heads)
        k = split_heads(linear(w, name + ".k_proj", memory), heads)
        v = split_heads(linear(w, name + ".v_proj", memory), heads)
        scores = torch.matmul(q, k.transpose(2, 3)) * head_dim ** -0.5 + mask
        return linear(w, name + ".out_proj", merge_heads(torch.matmul(scores.softmax(dim=-1), v)))

    def sublayer(self, norm_name, x, inner):
        """Residual around inner, the norm before it (pre-norm) or after the sum."""
        if self.layout.pre_norm:
            return x + inner(layer_norm(self.weights, norm_name, x))
        return layer_norm(self.weights, norm_name, x + inner(x))

    def feed_forward(self, layer, x):
        return linear(self.weights, layer + "fc2", self.activation(linear(self.weights, layer + "fc1", x)))

    def embed(self, side, ids):
        x = torch.nn.functional.embedding(ids, self.weights["model.shared.weight"]) * self.scale + self.positions(side, ids)
        if self.layout.layernorm_embedding:
            x = layer_norm(self.weights, "model.%s.layernorm_embedding" % side, x)
        return x

    def finish(self, side, x):
        if self.layout.final_layer_norm:
            x = layer_norm(self.weights, "model.%s.layer_norm" % side, x)
        return x

    def encode(self, input_ids):
        heads = self.config["encoder_attention_heads"]
        mask = padding_mask(input_ids.ne(self.pad), input_ids.shape[1])
        x = self.embed("encoder", input_ids)
        for i in range(self.config["encoder_layers"]):
            layer = "model.encoder.layers.%d." % i
            x = self.sublayer(layer + "self_attn_layer_norm", x,
                              lambda h: self.attention(layer + "self_attn", h, h, mask, heads))
            x = self.sublayer(layer + "final_layer_norm", x, lambda h: self.feed_forward(layer, h))
        return self.finish("encoder", x)

    def decode(self, decoder_ids, encoder_out, input_ids):
        """Logits [B, T, vocab] for every decoder position (no cache)."""
        heads = self.config["decoder_attention_heads"]
        length = decoder_ids.shape[1]
        self_mask = causal_mask(length)
        memory_mask = padding_mask(input_ids.ne(self.pad), length)
        x = self.embed("decoder", decoder_ids)
        for i in range(self.config["decoder_layers"]):
            layer = "model.decoder.layers.%d." % i
            x = self.sublayer(layer + "self_attn_layer_norm", x,
                              lambda h: self.attention(layer + "self_attn", h, h, self_mask, heads))
            x = self.sublayer(layer + "encoder_attn_layer_norm", x,
                              lambda h: self.attention(layer + "encoder_attn", h, encoder_out, memory_mask, heads))
            x = self.sublayer(layer + "final_layer_norm", x, lambda h: self.feed_forward(layer, h))
        x = self.finish("decoder", x)
        # tie_word_embeddings (true in all four families): lm_head is model.shared
        # whatever lm_head.weight a file also holds
        logits = torch.matmul(x, self.weights["model.shared.weight"].t())
        if self.layout.final_logits_bias:
            logits = logits + self.weights["final_logits_bias"]
        return logits

    def logits(self, input_ids, decoder_ids):
        return self.decode(decoder_ids, self.encode(input_ids), input_ids)

    def adjust_logits_during_generation(self, logits):
        return logits


def load_model(folder, layout, model_class=EncoderDecoder):
    """The folder's config.json and model.safetensors as a family's model."""
    config = read_json(folder, "config.json")
    return model_class(config, load_weights(folder), layout)
