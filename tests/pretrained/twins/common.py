"""What the five twins share: the folder's files, the layers Hugging Face
transformers builds them from, and `generate`'s greedy and beam search.

Written from huggingface/transformers (read, not copied):
  src/transformers/generation/utils.py        010654337d6b9f7fb2a812ec470d9c547e0794f9
      (_get_logits_processor's order, greedy_search, beam_search)
  src/transformers/generation/beam_search.py  010654337d6b9f7fb2a812ec470d9c547e0794f9
      (BeamSearchScorer.process / finalize, BeamHypotheses.add / is_done)
  src/transformers/activations.py (ACT2FN: "gelu" is erf GELU, "gelu_new" the
      tanh form, "swish" SiLU)
Never from libtfm's code. Needs torch (Debian's python3-torch 1.13); no
transformers package.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F


# ---- folder files ----

def read_json(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


def write_json(folder, name, value):
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


SAFETENSORS_DTYPES = {"F32": (np.float32, torch.float32), "I32": (np.int32, torch.int32),
                      "I64": (np.int64, torch.int64)}


def load_weights(folder):
    """A folder's tensors as transformers finds them: model.safetensors, or
    the shards model.safetensors.index.json's weight_map names."""
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return load_safetensors(single)
    weights = {}
    for shard in sorted(set(read_json(folder, "model.safetensors.index.json")["weight_map"].values())):
        weights.update(load_safetensors(os.path.join(folder, shard)))
    return weights


def load_safetensors(path):
    """{name: tensor} of a safetensors file: 8-byte little-endian header size,
    a JSON header (name -> dtype, shape, data_offsets), then the data."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        np_type, _ = SAFETENSORS_DTYPES[entry["dtype"]]
        start, end = entry["data_offsets"]
        array = np.frombuffer(data[base + start:base + end], dtype=np.dtype(np_type).newbyteorder("<"))
        tensors[name] = torch.from_numpy(array.astype(np_type).reshape(entry["shape"]))
    return tensors


def save_safetensors(path, tensors, metadata=None):
    """The same format, entries in name order, the header padded with spaces
    to 8 bytes as the safetensors package does; `metadata` becomes the
    `__metadata__` entry published files carry ({"format": "pt"})."""
    header = {"__metadata__": metadata} if metadata else {}
    blobs, offset = [], 0
    for name in sorted(tensors):
        array = tensors[name].detach().cpu().numpy() if torch.is_tensor(tensors[name]) else tensors[name]
        dtype = next(key for key, (np_type, _) in SAFETENSORS_DTYPES.items() if array.dtype == np_type)
        raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---- layers ----

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # erf form
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3)))),
    "swish": F.silu,
    "silu": F.silu,
}


def linear(weights, name, x, bias=True):
    return F.linear(x, weights[name + ".weight"], weights[name + ".bias"] if bias else None)


def layer_norm(weights, name, x, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weights[name + ".weight"], weights[name + ".bias"], eps)


def padding_mask(keep, query_length):
    """[B, S] 1 = token, 0 = padding -> additive [B, 1, T, S] (finfo.min where
    padded), as modeling_bart's _expand_mask."""
    inverted = 1.0 - keep[:, None, None, :].float().expand(-1, 1, query_length, -1)
    return inverted.masked_fill(inverted.bool(), torch.finfo(torch.float32).min)


def causal_mask(length):
    """Additive [1, 1, T, T]: finfo.min above the diagonal."""
    mask = torch.full((length, length), torch.finfo(torch.float32).min).triu(1)
    return mask[None, None]


def split_heads(x, heads):
    batch, length, width = x.shape
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def merge_heads(x):
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


# ---- generate() ----

class GenerationConfig:
    """generation_config.json's fields the twins use, with transformers'
    defaults for the absent ones; keyword overrides as generate(**kw)."""
    FIELDS = {"decoder_start_token_id": None, "bos_token_id": None, "eos_token_id": None,
              "pad_token_id": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
              "bad_words_ids": None, "num_beams": 1, "max_length": 20, "min_length": 0,
              "length_penalty": 1.0, "early_stopping": False, "no_repeat_ngram_size": 0,
              "renormalize_logits": False}

    def __init__(self, values, **overrides):
        for field, default in self.FIELDS.items():
            setattr(self, field, overrides.get(field, values.get(field, default)))
        unknown = set(overrides) - set(self.FIELDS)
        if unknown:
            raise KeyError("unknown generation options %s" % sorted(unknown))
        if self.decoder_start_token_id is None:
            self.decoder_start_token_id = self.bos_token_id

    def eos_ids(self):
        eos = self.eos_token_id
        return [] if eos is None else list(eos) if isinstance(eos, list) else [eos]

    def as_dict(self):
        return {field: getattr(self, field) for field in self.FIELDS}


def process_scores(config, input_ids, scores):
    """The logits processors generate() builds from the config, in
    _get_logits_processor's order: no-repeat n-grams, bad words, min length,
    forced BOS, forced EOS, then renormalisation (log_softmax) last."""
    cur_len = input_ids.shape[-1]
    scores = scores.clone()
    n = config.no_repeat_ngram_size
    if n and cur_len + 1 >= n:
        for row, ids in enumerate(input_ids.tolist()):
            prefix = tuple(ids[cur_len - n + 1:])
            for start in range(cur_len - n + 1):
                if tuple(ids[start:start + n - 1]) == prefix:
                    scores[row, ids[start + n - 1]] = -math.inf
    if config.bad_words_ids:
        # NoBadWordsLogitsProcessor drops the sequences equal to [eos].
        for sequence in config.bad_words_ids:
            if sequence in [[eos] for eos in config.eos_ids()]:
                continue
            if len(sequence) != 1:
                raise NotImplementedError("bad_words_ids longer than one token")
            scores[:, sequence[0]] = -math.inf
    if config.min_length and config.eos_ids() and cur_len < config.min_length:
        scores[:, config.eos_ids()] = -math.inf
    if config.forced_bos_token_id is not None and cur_len == 1:
        scores[:, :] = -math.inf
        scores[:, config.forced_bos_token_id] = 0
    if config.forced_eos_token_id is not None and cur_len == config.max_length - 1:
        forced = config.forced_eos_token_id
        scores[:, :] = -math.inf
        scores[:, forced if isinstance(forced, list) else [forced]] = 0
    if config.renormalize_logits:
        scores = scores.log_softmax(dim=-1)
    return scores


def greedy(model, config, input_ids):
    """greedy_search for one source sentence: the processors see the raw
    logits; stops at eos (kept) or at max_length tokens including the start.
    Returns the ids, no score, and the smallest gap between the best and
    the second-best token over the steps."""
    encoder_out = model.encode(input_ids)
    ids = torch.tensor([[config.decoder_start_token_id]])
    margins = []
    while True:
        logits = model.decode(ids, encoder_out, input_ids)[:, -1, :]
        scores = process_scores(config, ids, logits)
        top = scores.topk(2, dim=-1).values[0]
        margins.append(float(top[0] - top[1]))
        token = int(scores.argmax(dim=-1))
        ids = torch.cat([ids, torch.tensor([[token]])], dim=-1)
        if token in config.eos_ids() or ids.shape[-1] >= config.max_length:
            return ids[0].tolist(), None, smallest_finite(margins)


class Hypotheses:
    """BeamHypotheses: the num_beams best finished sequences, each scored
    sum_logprobs / len(sequence) ** length_penalty (len counts the start
    token, not the eos)."""

    def __init__(self, config):
        self.config = config
        self.beams = []
        self.worst_score = 1e9

    def add(self, sequence, sum_logprobs):
        score = sum_logprobs / (len(sequence) ** self.config.length_penalty)
        if len(self.beams) < self.config.num_beams or score > self.worst_score:
            self.beams.append((score, sequence))
            if len(self.beams) > self.config.num_beams:
                ranked = sorted((s, i) for i, (s, _) in enumerate(self.beams))
                del self.beams[ranked[0][1]]
                self.worst_score = ranked[1][0]
            else:
                self.worst_score = min(score, self.worst_score)

    def is_done(self, best_sum_logprobs, cur_len):
        config = self.config
        if len(self.beams) < config.num_beams:
            return False
        if config.early_stopping is True:
            return True
        if config.early_stopping is False or config.length_penalty <= 0.0:
            best = best_sum_logprobs / cur_len ** config.length_penalty
        else:  # "never" with a positive length penalty
            best = best_sum_logprobs / config.max_length ** config.length_penalty
        return self.worst_score >= best


def beam(model, config, input_ids):
    """beam_search for one source sentence (BeamSearchScorer, batch 1).
    Returns the best sequence (start token first, eos appended when it fits
    under max_length), its score and the smallest gap between candidates
    at the ranks where one is taken and the next is not."""
    beams = config.num_beams
    encoder_out = model.encode(input_ids.repeat_interleave(beams, dim=0))
    ids = torch.full((beams, 1), config.decoder_start_token_id, dtype=torch.long)
    beam_scores = torch.zeros(beams)
    beam_scores[1:] = -1e9
    hypotheses = Hypotheses(config)
    eos_ids = config.eos_ids()
    done = False
    margins = []
    while True:
        logits = model.decode(ids, encoder_out, input_ids.repeat_interleave(beams, dim=0))[:, -1, :]
        logits = model.adjust_logits_during_generation(logits)
        scores = process_scores(config, ids, logits.log_softmax(dim=-1))
        scores = scores + beam_scores[:, None]
        vocab = scores.shape[-1]
        top_scores, top_tokens = scores.view(1, beams * vocab).topk(2 * beams, dim=1, largest=True, sorted=True)
        top_scores, top_tokens = top_scores[0], top_tokens[0]
        next_scores, next_tokens, next_sources = [], [], []
        ranked = top_scores.tolist()
        # the gaps a rounding difference could cross: at rank num_beams (an
        # eos there is dropped) and after the last candidate taken
        margins.append(ranked[beams - 1] - ranked[beams])
        for rank, (score, flat) in enumerate(zip(top_scores.tolist(), top_tokens.tolist())):
            source, token = flat // vocab, flat % vocab
            if token in eos_ids:
                if rank < beams:
                    hypotheses.add(ids[source].tolist(), score)
            else:
                next_scores.append(score)
                next_tokens.append(token)
                next_sources.append(source)
            if len(next_tokens) == beams:
                if rank + 1 < len(ranked):
                    margins.append(ranked[rank] - ranked[rank + 1])
                break
        done = hypotheses.is_done(float(top_scores.max()), ids.shape[-1])
        beam_scores = torch.tensor(next_scores)
        ids = torch.cat([ids[next_sources], torch.tensor(next_tokens)[:, None]], dim=-1)
        if done or ids.shape[-1] >= config.max_length:
            break
    if not done:
        for row in range(beams):
            hypotheses.add(ids[row].tolist(), float(beam_scores[row]))
    # finalize: sorted by score, the last (on a tie, the later added) wins
    score, best = sorted(hypotheses.beams, key=lambda entry: entry[0])[-1]
    if len(best) < min(len(best) + 1, config.max_length):
        best = best + [eos_ids[0]]
    return best, score, smallest_finite(margins)


def smallest_finite(values):
    finite = [value for value in values if math.isfinite(value)]
    return min(finite) if finite else None


def generate(model, config, input_ids):
    """generate() as transformers picks it: beam search when num_beams > 1."""
    if config.num_beams > 1:
        return beam(model, config, input_ids)
    return greedy(model, config, input_ids)


# ---- tokenizers ----

def clean_up_tokenization(text):
    """PreTrainedTokenizerBase.clean_up_tokenization (clean_up_tokenization_spaces)."""
    for before, after in [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                          (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]:
        text = text.replace(before, after)
    return text


def load_sentencepiece(folder, name):
    import sentencepiece
    model = sentencepiece.SentencePieceProcessor()
    model.Load(os.path.join(folder, name))
    return model


class Twin:
    """A folder read as transformers reads it: config.json, model.safetensors,
    generation_config.json and the family's tokenizer."""

    def __init__(self, folder, model, tokenizer):
        self.folder = folder
        self.config = model.config
        self.model = model
        self.tokenizer = tokenizer
        self.generation_values = read_json(folder, "generation_config.json")
        settings_file = os.path.join(folder, "tokenizer_config.json")
        settings = read_json(folder, "tokenizer_config.json") if os.path.exists(settings_file) else {}
        # transformers' default when the folder does not say (bart-base has no tokenizer_config.json)
        self.clean_up = settings.get("clean_up_tokenization_spaces", True)

    def decode(self, ids):
        """tokenizer.decode(ids, skip_special_tokens=True)"""
        text = self.tokenizer.decode(ids)
        return clean_up_tokenization(text) if self.clean_up else text

    def generation_config(self, **overrides):
        return GenerationConfig(self.generation_values, **overrides)

    def logits(self, input_ids, decoder_input_ids):
        with torch.no_grad():
            return self.model.logits(torch.tensor([input_ids]), torch.tensor([decoder_input_ids]))[0]

    def generate(self, input_ids, **overrides):
        with torch.no_grad():
            return generate(self.model, self.generation_config(**overrides), torch.tensor([input_ids]))
