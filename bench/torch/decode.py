#!/usr/bin/python3
"""PyTorch decoding written its fastest way: the strong anchor for libtfm's
decoding (bench/bench.c --what decode), at the sizes of bench/torch/bench.py's
twins of the tutorial models.

  --config 003  tutorial 003's Encoder/Decoder: source 22, 84 tokens
  --config avg  tutorials 000/001's nn.Transformer: source 91, 9 tokens
  --config 002  tutorial 002's CausalTransformer: source 100, 99 tokens

The twin's weights (random, as tfm-bench's) are read into a decoder that runs
one token at a time over a batch of rows: every projection an nn.Linear (the
self-attention's three fused in one), keys and values cached per layer in
buffers the step fills, the encoder output's cross-attention keys and values
computed once per batch, under torch.inference_mode(). Greedy decodes a row
per source; beam search (--beam N) a row per hypothesis, [sources * N] rows,
whose caches follow their parents by index_select, as Hugging Face's
reorder_cache does. --precision int8 runs the same after
torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8).

As tfm-bench's decode job: `sources` random sources (tokens in [1, vocab),
no padding), `decode_batch` (250) per call, bos 1, and no end token: every
source generates max_length tokens (the decoder input length of the config),
so that both sides do the same work. One call warms up, untimed; then all
the calls are timed together. tokens_per_s counts the tokens returned
(sources * max_length; beam search returns each source's best hypothesis).

Prints one JSON line. Run as /usr/bin/python3 with OMP_WAIT_POLICY=passive
and OMP_NUM_THREADS set, as bench/run.py does.
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn

from bench import CausalTransformer, Seq2SeqTransformer, Taylor

BOS = 1

# tfm-bench's decode jobs: vocabularies, source length, tokens generated
SIZES = {
    '003': dict(src_vocab=37, src_len=22, max_length=84),
    'avg': dict(src_vocab=13, src_len=91, max_length=9),
    '002': dict(src_vocab=5000, src_len=100, max_length=99),
}


# CachedLayer.attend sums products for heads this narrow, or keys of up to
# this many elements (4 MB); else it calls torch.matmul
NARROW_HEAD = 16
ELEMENTWISE_MAX = 1 << 20


def linear_from(weight, bias=None):
    """An nn.Linear holding a copy of weight [out, in] (and bias)."""
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        out.weight.copy_(weight)
        if bias is not None:
            out.bias.copy_(bias)
    return out


def plain_linear(linear):
    """A copy as nn.Linear itself: quantize_dynamic({nn.Linear}) matches the
    exact class, not nn.MultiheadAttention's out_proj subclass."""
    return linear_from(linear.weight, linear.bias)


def concat_linears(*linears):
    """One nn.Linear computing the given ones' outputs side by side."""
    bias = [x.bias for x in linears]
    return linear_from(torch.cat([x.weight for x in linears]),
                       None if bias[0] is None else torch.cat(bias))


class CachedLayer(nn.Module):
    """A decoder layer, one position at a time: post-norm (the tutorial
    twins'), x = norm1(x + self-attention), norm2(x + cross-attention),
    norm3(x + FFN); or with norm_first (the translation twin's), x + self-
    attention(norm1(x)), then + cross-attention(norm2(x)), + FFN(norm3(x)).
    The scales multiply the attentions' scores."""

    def __init__(self, heads, scales, qkv, self_out, cross_q, cross_kv, cross_out, ff1, ff2,
                 norms, norm_first=False):
        super().__init__()
        self.heads, self.norm_first = heads, norm_first
        self.self_scale, self.cross_scale = scales
        self.qkv, self.self_out = qkv, self_out
        self.cross_q, self.cross_kv, self.cross_out = cross_q, cross_kv, cross_out
        self.ff1, self.ff2 = ff1, ff2
        self.norm1, self.norm2, self.norm3 = norms

    def split_heads(self, x):
        """[rows, n, d] -> [rows, heads, n, d / heads]"""
        return x.view(x.shape[0], x.shape[1], self.heads, -1).transpose(1, 2)

    def attend(self, q, k, v, bias=None):
        """q [rows, d]; k, v [rows, heads, n, head_dim]; bias [rows, 1, n]
        -> [rows, d]. One query per row: products summed measured 1.5x
        faster than torch.matmul, whose CPU bmm loops over rows * heads,
        for 8-wide heads or keys within about L2; with wide heads and keys
        beyond, the products' temporaries cost more than the loop (4x at
        avg's cross-attention, beam 4)."""
        rows = q.shape[0]
        q = q.view(rows, self.heads, 1, -1)
        if k.shape[-1] <= NARROW_HEAD or k.numel() <= ELEMENTWISE_MAX:
            scores = (k * q).sum(-1)
            if bias is not None:
                scores = scores + bias
            weights = torch.softmax(scores, dim=-1)
            return (weights.unsqueeze(-1) * v).sum(2).view(rows, -1)
        scores = torch.matmul(q, k.transpose(-1, -2))
        if bias is not None:
            scores = scores + bias.unsqueeze(1)
        return torch.matmul(torch.softmax(scores, dim=-1), v).view(rows, -1)

    def memory(self, encoded):
        """The cross-attention's keys and values of the encoder output."""
        k, v = self.cross_kv(encoded).chunk(2, dim=-1)
        return self.split_heads(k.contiguous()), self.split_heads(v.contiguous())

    def forward(self, x, t, cache, self_bias, memory, memory_bias):
        """x [rows, d] at position t; cache [2 (keys, values), rows, heads,
        T, head_dim] takes position t's keys and values; the biases (or None)
        add to the scores."""
        def self_attention(x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            keys, values = cache
            keys[:, :, t] = k.view(k.shape[0], self.heads, -1)
            values[:, :, t] = v.view(v.shape[0], self.heads, -1)
            return self.self_out(self.attend(q * self.self_scale, keys[:, :, :t + 1],
                                             values[:, :, :t + 1], self_bias))

        def cross_attention(x):
            return self.cross_out(self.attend(self.cross_q(x) * self.cross_scale, *memory,
                                              memory_bias))

        def feed_forward(x):
            return self.ff2(torch.relu(self.ff1(x)))

        for sublayer, norm in zip((self_attention, cross_attention, feed_forward),
                                  (self.norm1, self.norm2, self.norm3)):
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


class CachedDecoder(nn.Module):
    """A twin's decoder, incremental: start() encodes a batch of sources,
    step() takes each row's last token and returns its next-token logits;
    beam search's expand() and reorder() make rows follow others. A subclass per
    twin holds the twin's encoder and embeddings (as submodules, so that
    quantize_dynamic reaches the encoder's linears too) and defines
    encode(src) -> (encoder output, cross-attention bias or None) and
    embed(tokens, position) -> [rows, d]. target_pad: a token id the
    self-attention masks out of the prefix (-1e10), as tutorial 003 does, or
    None."""

    def __init__(self, layers, final_norm, generator, max_length, target_pad=None):
        super().__init__()
        self.target_pad = target_pad
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm
        self.generator = generator
        self.max_length = max_length

    def start(self, src):
        encoded, self.memory_bias = self.encode(src)
        self.memories = [layer.memory(encoded) for layer in self.layers]
        heads, rows = self.layers[0].heads, src.shape[0]
        # every layer's keys and values in one buffer, so that a beam step
        # reorders them with one index_select into its twin buffer
        self.cache = torch.empty(len(self.layers), 2, rows, heads, self.max_length,
                                 encoded.shape[-1] // heads)
        self.spare = torch.empty_like(self.cache)
        self.self_bias = None if self.target_pad is None else \
            torch.zeros(rows, 1, self.max_length)
        self.t = 0

    def step(self, tokens):
        t = self.t
        x = self.embed(tokens, t)
        self_bias = None
        if self.self_bias is not None:
            self.self_bias[:, 0, t] = (tokens == self.target_pad) * -1e10
            self_bias = self.self_bias[..., :t + 1]
        for layer, cache, memory in zip(self.layers, self.cache, self.memories):
            x = layer(x, t, cache, self_bias, memory, self.memory_bias)
        self.t += 1
        return self.generator(self.final_norm(x))

    def expand(self, index):
        """Row i becomes a copy of row index[i], its source's memory too (the
        first step of beam search: a row per hypothesis from a row per
        source)."""
        self.memories = [tuple(x.index_select(0, index) for x in m) for m in self.memories]
        if self.memory_bias is not None:
            self.memory_bias = self.memory_bias.index_select(0, index)
        self.cache = self.cache.index_select(2, index)
        self.spare = torch.empty_like(self.cache)
        if self.self_bias is not None:
            self.self_bias = self.self_bias.index_select(0, index)

    def reorder(self, index):
        """Row i takes the prefix of row index[i], a row of the same source
        (whose memory is the same): the self-attention's state only."""
        filled = self.t  # positions written so far; the rest is left as it is
        torch.index_select(self.cache[..., :filled, :], 2, index,
                           out=self.spare[..., :filled, :])
        self.cache, self.spare = self.spare, self.cache
        if self.self_bias is not None:
            self.self_bias = self.self_bias.index_select(0, index)


# --- each twin's weights, read into a cached decoder -------------------------------------


class Cached003(CachedDecoder):
    """Tutorial 003's Taylor: separate Q/K/V linears, scores divided by
    trainable sqrt(emb_dim) scales, learned positions, a trainable embedding
    scale, padding masked out (-1e10): the source's in the cross-attention,
    the target's (an untrained model may choose <pad>) in the
    self-attention."""

    def __init__(self, model, max_length):
        dec = model.decoder
        layers = []
        for x in dec.layers:
            s, c = x.self_attention, x.attention
            layers.append(CachedLayer(
                s.n_heads, (1.0 / s.scale.item(), 1.0 / c.scale.item()),
                concat_linears(s.linear_Q, s.linear_K, s.linear_V), s.linear_O,
                c.linear_Q, concat_linears(c.linear_K, c.linear_V), c.linear_O,
                x.feedforward.linear_1, x.feedforward.linear_2,
                (x.self_attention_norm, x.attention_norm, x.feedforward_norm)))
        super().__init__(layers, nn.Identity(), dec.linear, max_length, Taylor.PAD)
        self.encoder = model.encoder
        self.tok_embedding, self.pos_embedding = dec.tok_embedding, dec.pos_embedding
        self.embedding_scale = dec.scale

    def encode(self, src):
        mask = (src != Taylor.PAD).unsqueeze(1).unsqueeze(2)
        bias = None
        if not bool(mask.all()):  # tfm-bench's random sources have no padding
            bias = torch.zeros(mask.shape[0], 1, mask.shape[-1]).masked_fill(~mask[:, 0], -1e10)
        return self.encoder(src, mask), bias

    def embed(self, tokens, t):
        return self.tok_embedding(tokens) * self.embedding_scale + self.pos_embedding.weight[t]


def cached_layers(decoder):
    """The layers of an nn.TransformerDecoder (post-norm or norm_first) as
    CachedLayers: the packed in-projections split into the self-attention's
    fused Q/K/V and the cross-attention's query and fused key/value."""
    layers = []
    for x in decoder.layers:
        s, c = x.self_attn, x.multihead_attn
        d, scale = s.embed_dim, 1.0 / math.sqrt(s.head_dim)
        layers.append(CachedLayer(
            s.num_heads, (scale, scale), linear_from(s.in_proj_weight, s.in_proj_bias),
            plain_linear(s.out_proj), linear_from(c.in_proj_weight[:d], c.in_proj_bias[:d]),
            linear_from(c.in_proj_weight[d:], c.in_proj_bias[d:]), plain_linear(c.out_proj),
            x.linear1, x.linear2, (x.norm1, x.norm2, x.norm3), x.norm_first))
    return layers


class CachedAvg(CachedDecoder):
    """Tutorials 000/001's nn.Transformer: packed in-projections, unscaled
    embeddings shared by source and target, sinusoidal positions, final
    norms; no masks on the source."""

    def __init__(self, model, max_length):
        transformer = model.transformer
        super().__init__(cached_layers(transformer.decoder), transformer.decoder.norm,
                         model.generator, max_length)
        self.encoder = transformer.encoder
        self.tok_emb, self.positions = model.tok_emb, model.positional_encoding

    def encode(self, src):
        x = self.positions(self.tok_emb(src))
        # PyTorch 1.13's fast path of nn.TransformerEncoderLayer reads
        # linear1.weight as a tensor, a method once quantized: a zero mask
        # (no fast path with a mask) takes the ordinary path instead
        quantized = not isinstance(self.encoder.layers[0].linear1, nn.Linear)
        mask = torch.zeros(src.shape[1], src.shape[1]) if quantized else None
        return self.encoder(x, mask), None

    def embed(self, tokens, t):
        return self.tok_emb(tokens) + self.positions.pe[0, t]


def heads_linear(w):
    """Tutorial 002's per-head weight (heads, d_model, d_k) as an
    nn.Linear whose output h * d_k + e is einsum("bnd,hde->bhne")'s [h, e]."""
    return linear_from(w.permute(0, 2, 1).reshape(-1, w.shape[1]))


class Cached002(CachedDecoder):
    """Tutorial 002's CausalTransformer: per-head W_q/W_k/W_v without bias,
    sinusoidal positions; no masks on the source."""

    def __init__(self, model, max_length):
        layers = []
        for x in model.decoder_layers:
            s, c = x.self_attn, x.cross_attn
            scale = 1.0 / math.sqrt(s.d_k)
            layers.append(CachedLayer(
                s.num_heads, (scale, scale),
                concat_linears(heads_linear(s.W_q), heads_linear(s.W_k), heads_linear(s.W_v)),
                s.W_o, heads_linear(c.W_q),
                concat_linears(heads_linear(c.W_k), heads_linear(c.W_v)), c.W_o,
                x.feed_forward.w1, x.feed_forward.w2, (x.norm1, x.norm2, x.norm3)))
        super().__init__(layers, nn.Identity(), model.fc, max_length)
        self.encoder_embedding, self.encoder_layers = model.encoder_embedding, model.encoder_layers
        self.tgt_embedding, self.positions = model.decoder_embedding, model.positional_encoding

    def encode(self, src):
        x = self.positions(self.encoder_embedding(src))
        for layer in self.encoder_layers:
            x = layer(x)
        return x, None

    def embed(self, tokens, t):
        return self.tgt_embedding(tokens) + self.positions.pe[0, t]


TWINS = {'003': (Taylor, Cached003), 'avg': (Seq2SeqTransformer, CachedAvg),
         '002': (CausalTransformer, Cached002)}


def make_decoder(config, precision='float32', max_length=None):
    """The twin (random weights from torch's seed, in eval mode) and its
    cached decoder; int8: quantize_dynamic on the cached decoder, whose
    linears include the encoder's."""
    twin, cached = TWINS[config]
    model = twin().eval()
    decoder = cached(model, max_length or SIZES[config]['max_length']).eval()
    if precision == 'int8':
        decoder = torch.ao.quantization.quantize_dynamic(decoder, {nn.Linear},
                                                         dtype=torch.qint8)
    return model, decoder


# --- the strategies, over any decoder with start/step/expand/reorder ----------------------


def greedy(decoder, src, max_length):
    """[sources, max_length] tokens: each row's most probable next token."""
    decoder.start(src)
    out = torch.empty(src.shape[0], max_length, dtype=torch.long)
    tokens = torch.full((src.shape[0],), BOS, dtype=torch.long)
    for t in range(max_length):
        tokens = decoder.step(tokens).argmax(dim=-1)
        out[:, t] = tokens
    return out


def beam_search(decoder, src, max_length, beam):
    """[sources, max_length] tokens: each source's best of `beam`
    hypotheses by the sum of log probabilities (with no end token, all have
    the same length, so a length penalty would not change the ranking).
    The first step runs a row per source, whose `beam` best tokens start the
    hypotheses; after it, [sources * beam] rows."""
    B = src.shape[0]
    decoder.start(src)
    logp = torch.log_softmax(decoder.step(torch.full((B,), BOS, dtype=torch.long)), dim=-1)
    scores, tokens = logp.topk(beam, dim=-1)               # [B, beam]
    decoder.expand(torch.arange(B).repeat_interleave(beam))
    history = tokens.reshape(-1, 1)
    scores = scores.reshape(-1, 1)
    first_row = (torch.arange(B) * beam).unsqueeze(1)
    for _ in range(1, max_length):
        logp = torch.log_softmax(decoder.step(history[:, -1]), dim=-1)   # [B * beam, V]
        V = logp.shape[-1]
        scores, best = (scores + logp).view(B, beam * V).topk(beam, dim=-1)
        parents = (first_row + torch.div(best, V, rounding_mode='floor')).view(-1)
        decoder.reorder(parents)
        history = torch.cat([history.index_select(0, parents), (best % V).view(-1, 1)], dim=1)
        scores = scores.view(-1, 1)
    return history.view(B, beam, max_length)[:, 0]  # topk sorts: the best first


def decode(decoder, src, max_length, beam):
    with torch.inference_mode():
        return greedy(decoder, src, max_length) if beam == 1 else \
            beam_search(decoder, src, max_length, beam)


# --- the benchmark -----------------------------------------------------------------------


def bench(config, sources, decode_batch, beam, precision):
    size = SIZES[config]
    _, decoder = make_decoder(config, precision)
    all_src = torch.randint(1, size['src_vocab'], (sources, size['src_len']))
    per_call = min(decode_batch, sources)
    chunks = all_src.split(per_call)
    n = size['max_length']
    decode(decoder, chunks[0], n, beam)  # warm-up: first-touch costs untimed
    start = time.perf_counter()
    for chunk in chunks:
        decode(decoder, chunk, n, beam)
    ms = (time.perf_counter() - start) * 1e3
    return {'steps': 1, 'sources': sources, 'batch': per_call, 'max_length': n, 'beam': beam,
            'median_ms': ms, 'min_ms': ms, 'tokens_per_s': sources * n / (ms / 1e3)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--config', choices=sorted(SIZES), default='003')
    p.add_argument('--beam', type=int, default=1, help='1: greedy')
    p.add_argument('--precision', choices=['float32', 'int8'], default='float32')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--sources', type=int, default=750)
    p.add_argument('--decode-batch', type=int, default=250, help='sources per call')
    p.add_argument('--seed', type=int, default=0)
    a = p.parse_args()
    if a.beam < 1 or a.sources < 1 or a.decode_batch < 1:
        p.error('beam, sources and decode-batch must be >= 1')
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    r = bench(a.config, a.sources, a.decode_batch, a.beam, a.precision)
    out = {'impl': 'pytorch-int8' if a.precision == 'int8' else 'pytorch-fast',
           'config': a.config, 'what': 'decode', 'threads': a.threads,
           'precision': a.precision}
    out.update(r)
    out['peak_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out['torch'] = torch.__version__
    out['torch_threads'] = torch.get_num_threads()
    out['quantized_engine'] = torch.backends.quantized.engine
    print(json.dumps(out))


if __name__ == '__main__':
    main()
