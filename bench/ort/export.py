#!/usr/bin/python3
"""ONNX graphs of libtfm's benchmark models, as Optimum lays out an
encoder-decoder for ONNX Runtime: the anchor of bench/ort/decode.js.

  /usr/bin/python3 bench/ort/export.py CONFIG [--out runs/ort/CONFIG] [--model FILE]
      [--check-sources N]

CONFIG is one of tfm-bench's decoding configurations (bench/bench.c):
avg (tutorials 000/001), 002 (tutorial 002) or translation (the README's
translation model: d 256, 3 + 3 layers, 8,000 pieces). The model is a
libtfm model of that configuration's options (tfm.Model, random weights
from its seed; translation: --model, else runs/translation/model.safetensors
if it exists, else random), saved as OUT/model.safetensors; its PyTorch
twin (the same weights, read through the tfm package) is exported with
torch.onnx.export, opset 13, dynamic batch and length axes:

  encoder_model.onnx          input_ids, attention_mask -> last_hidden_state
  decoder_model.onnx          input_ids, encoder_attention_mask,
                              encoder_hidden_states -> logits,
                              present.{i}.decoder.key/value,
                              present.{i}.encoder.key/value
  decoder_with_past_model.onnx  input_ids, encoder_attention_mask,
                              past_key_values.{i}.{decoder,encoder}.{key,value}
                              -> logits, present.{i}.decoder.key/value

(keys and values [batch, heads, length, head_dim]; a with-past step reads
its position from the past's length), and each again as
*_quantized.onnx, int8 as onnxruntime.quantization.quantize_dynamic makes
it (that Python package is not in Debian, so the same rewrite is done here
with the onnx package, python3-onnx): every MatMul by a constant weight
becomes DynamicQuantizeLinear of the activation (uint8), MatMulInteger by
the weight as int8 (symmetric, one scale per tensor, quantize_dynamic's
defaults), a Cast and a Mul by the two scales; ONNX Runtime's optimizer
fuses them into its int8 MatMulIntegerToFloat kernel. The generator's
MatMul is quantized too, as tfm_model_quantize quantizes libtfm's.

With --check-sources N, OUT/check.json holds N random sources and libtfm's
float32 greedy and beam 4 tokens for them (the Python binding, no end token,
the configuration's max_length): bench/ort/decode.js --check holds ONNX
Runtime's tokens to them.

Needs PyTorch and onnx (Debian's python3-torch, python3-onnx) and the tfm
package (PYTHONPATH=bindings/python, TFM_LIBRARY=BUILD/lib/libtfm.so.0).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import helper, numpy_helper, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'bench', 'torch'))
import tfm  # noqa: E402
from translate import sinusoidal  # noqa: E402  libtfm's interleaved table

TRANSLATION_MODEL = os.path.join(ROOT, 'runs', 'translation', 'model.safetensors')

# tfm-bench's decoding configurations (bench/bench.c's configs and
# build_model): the model's options, the source length and vocabulary of its
# random sources, and the tokens each source generates
CONFIGS = {
    'avg': dict(options=dict(src_vocab=13, tgt_vocab=13, max_src_len=91, max_tgt_len=10,
                             share_embeddings=1, encoder_layers=3, decoder_layers=3,
                             final_norm=1, d_model=256, heads=4, d_ff=128,
                             embedding_dropout=0.0),
                src_len=91, max_length=9),
    '002': dict(options=dict(src_vocab=5000, tgt_vocab=5000, max_src_len=100, max_tgt_len=100,
                             encoder_layers=6, decoder_layers=6, d_model=512, heads=8,
                             d_ff=2048),
                src_len=100, max_length=99),
    'translation': dict(options=dict(src_vocab=8000, tgt_vocab=8000, max_src_len=128,
                                     max_tgt_len=129, share_embeddings=1,
                                     embedding_scale='sqrt_d', encoder_layers=3,
                                     decoder_layers=3, final_norm=1, d_model=256, heads=4,
                                     d_ff=1024, norm_first=1, tie_generator=1, bos_id=1,
                                     eos_id=2, pad_id=3),
                        src_len=32, max_length=48),
}
BOS = 1


# --- the twin: libtfm's model (nn.Transformer's layers) written out op by op --------


class Linear(nn.Module):
    """x @ weight.T + bias with the weight stored transposed, so that the
    graph holds one MatMul by a constant [in, out] (what quantize_dynamic
    quantizes)."""

    def __init__(self, weight, bias):
        super().__init__()
        self.weight_t = nn.Parameter(torch.from_numpy(np.ascontiguousarray(weight.T)))
        self.bias = nn.Parameter(torch.from_numpy(bias))

    def forward(self, x):
        return torch.matmul(x, self.weight_t) + self.bias


def norm(state, name, eps):
    n = nn.LayerNorm(state[name + '.weight'].shape[0], eps=eps)
    with torch.no_grad():
        n.weight.copy_(torch.from_numpy(state[name + '.weight']))
        n.bias.copy_(torch.from_numpy(state[name + '.bias']))
    return n


def linear(state, name):
    return Linear(state[name + '.weight'], state[name + '.bias'])


class Attention(nn.Module):
    """nn.MultiheadAttention's packed in-projection split into the query's
    and the keys' and values' products."""

    def __init__(self, state, name, heads):
        super().__init__()
        w, b = state[name + '.in_proj_weight'], state[name + '.in_proj_bias']
        d = w.shape[1]
        self.heads, self.head_dim = heads, d // heads
        self.q = Linear(w[:d] / math.sqrt(d // heads), b[:d] / math.sqrt(d // heads))
        self.kv = Linear(w[d:], b[d:])
        self.out = linear(state, name + '.out_proj')

    def split(self, x):
        """[B, L, d] -> [B, heads, L, head_dim]"""
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def keys_values(self, x):
        k, v = self.kv(x).chunk(2, dim=-1)
        return self.split(k), self.split(v)

    def forward(self, x, k, v, bias):
        """x [B, L, d] attends to k, v [B, heads, T, head_dim]; bias adds to
        the scores."""
        q = self.split(self.q(x))
        weights = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) + bias, dim=-1)
        out = torch.matmul(weights, v).transpose(1, 2)
        return self.out(out.reshape(out.shape[0], out.shape[1], -1))


class FeedForward(nn.Module):
    def __init__(self, state, name):
        super().__init__()
        self.linear1, self.linear2 = linear(state, name + '.linear1'), \
            linear(state, name + '.linear2')

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class Twin(nn.Module):
    """A libtfm model (its options and state_dict) as an nn.Module that
    computes what libtfm computes: embeddings (times sqrt(d) when
    embedding_scale is sqrt_d) plus libtfm's sinusoidal positions,
    nn.Transformer's post-norm or pre-norm layers, final norms, the
    generator (its own weight, or the tied table)."""

    def __init__(self, options, state):
        super().__init__()
        wanted = dict(positions='sinusoidal', activation='relu', bias=1, fused_qkv=1,
                      trainable_scale=0, position_offset=0, embedding_norm=0,
                      feed_forward_bias=1, rms_norm=0, gated_feed_forward=0,
                      unscaled_attention=0, relative_attention_buckets=0,
                      generator_rescale=0, head_dim=0)
        for key, value in wanted.items():
            if options[key] != value:
                sys.exit(f'export: a model with {key} {options[key]!r} (the twin has {value!r})')
        eps, heads, d = options['layer_norm_eps'], options['heads'], options['d_model']
        self.norm_first = bool(options['norm_first'])
        self.scale = math.sqrt(d) if options['embedding_scale'] == 'sqrt_d' else 1.0
        if options['embedding_scale'] not in ('none', 'sqrt_d'):
            sys.exit(f"export: embedding_scale {options['embedding_scale']!r}")
        src = state['src_embedding.weight']
        tgt = src if options['share_embeddings'] else state['tgt_embedding.weight']
        self.src_embedding = nn.Parameter(torch.from_numpy(src))
        self.tgt_embedding = nn.Parameter(torch.from_numpy(tgt))
        self.register_buffer('positions', sinusoidal(
            max(options['max_src_len'], options['max_tgt_len']), d))
        self.encoder = nn.ModuleList()
        for i in range(options['encoder_layers']):
            n = f'encoder.layers.{i}'
            layer = nn.Module()
            layer.attention = Attention(state, n + '.self_attn', heads)
            layer.feed_forward = FeedForward(state, n)
            layer.norms = nn.ModuleList([norm(state, f'{n}.norm{j}', eps) for j in (1, 2)])
            self.encoder.append(layer)
        self.decoder = nn.ModuleList()
        for i in range(options['decoder_layers']):
            n = f'decoder.layers.{i}'
            layer = nn.Module()
            layer.self_attention = Attention(state, n + '.self_attn', heads)
            layer.cross_attention = Attention(state, n + '.multihead_attn', heads)
            layer.feed_forward = FeedForward(state, n)
            layer.norms = nn.ModuleList([norm(state, f'{n}.norm{j}', eps) for j in (1, 2, 3)])
            self.decoder.append(layer)
        final = options['final_norm']
        self.encoder_norm = norm(state, 'encoder.norm', eps) if final else nn.Identity()
        self.decoder_norm = norm(state, 'decoder.norm', eps) if final else nn.Identity()
        generator = tgt if options['tie_generator'] else state['generator.weight']
        self.generator = Linear(generator, state['generator.bias'])

    def sublayer(self, x, f, norm):
        return x + f(norm(x)) if self.norm_first else norm(x + f(x))

    def embed(self, table, ids, first):
        """ids [B, L] at positions first, first + 1, ..."""
        positions = self.positions[torch.arange(ids.shape[1]) + first]
        return table[ids] * self.scale + positions

    def encode(self, input_ids, attention_mask):
        bias = mask_bias(attention_mask)
        x = self.embed(self.src_embedding, input_ids, 0)
        for layer in self.encoder:
            def attend(y):
                return layer.attention(y, *layer.attention.keys_values(y), bias)
            x = self.sublayer(x, attend, layer.norms[0])
            x = self.sublayer(x, layer.feed_forward, layer.norms[1])
        return self.encoder_norm(x)

    def decode(self, input_ids, memory_bias, past, cross):
        """Logits and each layer's keys and values (past's followed by
        input_ids'); cross: each layer's (keys, values) of the memory."""
        first = past[0][0].shape[2] if past else 0
        length = input_ids.shape[1]
        # the causal mask over the new positions (past ones are all seen)
        i = torch.arange(length)
        causal = (i.unsqueeze(0) > i.unsqueeze(1)).float() * -1e9
        if past:
            causal = torch.cat([torch.zeros(length, first), causal], dim=1)
        x = self.embed(self.tgt_embedding, input_ids, first)
        present = []
        for n, layer in enumerate(self.decoder):
            def self_attend(y):
                k, v = layer.self_attention.keys_values(y)
                if past:
                    k, v = torch.cat([past[n][0], k], dim=2), torch.cat([past[n][1], v], dim=2)
                present.append((k, v))
                return layer.self_attention(y, k, v, causal)

            def cross_attend(y):
                return layer.cross_attention(y, *cross[n], memory_bias)
            x = self.sublayer(x, self_attend, layer.norms[0])
            x = self.sublayer(x, cross_attend, layer.norms[1])
            x = self.sublayer(x, layer.feed_forward, layer.norms[2])
        return self.generator(self.decoder_norm(x)), present


def mask_bias(attention_mask):
    """[B, S] ones and zeros -> [B, 1, 1, S] additive bias."""
    return ((1 - attention_mask) * -1e9).float().unsqueeze(1).unsqueeze(1)


class EncoderGraph(nn.Module):
    def __init__(self, twin):
        super().__init__()
        self.twin = twin

    def forward(self, input_ids, attention_mask):
        return self.twin.encode(input_ids, attention_mask)


class DecoderGraph(nn.Module):
    """The first step (no past): the cross-attention's keys and values come
    out as present.{i}.encoder.*, for the with-past steps to take."""

    def __init__(self, twin):
        super().__init__()
        self.twin = twin

    def forward(self, input_ids, encoder_attention_mask, encoder_hidden_states):
        cross = [layer.cross_attention.keys_values(encoder_hidden_states)
                 for layer in self.twin.decoder]
        logits, present = self.twin.decode(input_ids, mask_bias(encoder_attention_mask), None,
                                           cross)
        return (logits,) + tuple(t for (k, v), (ck, cv) in zip(present, cross)
                                 for t in (k, v, ck, cv))


class DecoderWithPastGraph(nn.Module):
    def __init__(self, twin):
        super().__init__()
        self.twin = twin

    def forward(self, input_ids, encoder_attention_mask, *past_key_values):
        layers = len(self.twin.decoder)
        grouped = [past_key_values[4 * n:4 * n + 4] for n in range(layers)]
        logits, present = self.twin.decode(input_ids, mask_bias(encoder_attention_mask),
                                           [(g[0], g[1]) for g in grouped],
                                           [(g[2], g[3]) for g in grouped])
        return (logits,) + tuple(t for kv in present for t in kv)


def kv_names(prefix, layers, encoder=True):
    return [f'{prefix}.{n}.{side}.{kind}' for n in range(layers)
            for side in (('decoder', 'encoder') if encoder else ('decoder',))
            for kind in ('key', 'value')]


def export(twin, out_dir, config):
    """The three float32 graphs in out_dir."""
    layers, d = len(twin.decoder), twin.positions.shape[1]
    heads = twin.decoder[0].self_attention.heads
    head_dim = d // heads
    B, S, T = 2, CONFIGS[config]['src_len'], 3
    ids = torch.ones(B, S, dtype=torch.long)
    mask = torch.ones(B, S, dtype=torch.long)
    batch_src = {0: 'batch_size', 1: 'encoder_sequence_length'}
    kw = dict(opset_version=13, do_constant_folding=True)
    with torch.no_grad():
        torch.onnx.export(EncoderGraph(twin), (ids, mask),
                          os.path.join(out_dir, 'encoder_model.onnx'),
                          input_names=['input_ids', 'attention_mask'],
                          output_names=['last_hidden_state'],
                          dynamic_axes={'input_ids': batch_src, 'attention_mask': batch_src,
                                        'last_hidden_state': batch_src}, **kw)
        memory = twin.encode(ids, mask)
        dec_ids = torch.ones(B, 1, dtype=torch.long)
        present = kv_names('present', layers)
        axes = {'input_ids': {0: 'batch_size', 1: 'decoder_sequence_length'},
                'encoder_attention_mask': batch_src, 'encoder_hidden_states': batch_src,
                'logits': {0: 'batch_size', 1: 'decoder_sequence_length'}}
        for name in present:
            axes[name] = {0: 'batch_size', 2: 'encoder_sequence_length' if '.encoder.' in name
                          else 'decoder_sequence_length'}
        torch.onnx.export(DecoderGraph(twin), (dec_ids, mask, memory),
                          os.path.join(out_dir, 'decoder_model.onnx'),
                          input_names=['input_ids', 'encoder_attention_mask',
                                       'encoder_hidden_states'],
                          output_names=['logits'] + present, dynamic_axes=axes, **kw)
        past = []
        for name in kv_names('past_key_values', layers):
            past.append(torch.randn(B, heads, S if '.encoder.' in name else T, head_dim))
        past_names = kv_names('past_key_values', layers)
        present = kv_names('present', layers, encoder=False)
        axes = {'input_ids': {0: 'batch_size'}, 'encoder_attention_mask': batch_src,
                'logits': {0: 'batch_size'}}
        for name in past_names:
            axes[name] = {0: 'batch_size', 2: 'encoder_sequence_length' if '.encoder.' in name
                          else 'past_decoder_sequence_length'}
        for name in present:
            axes[name] = {0: 'batch_size', 2: 'past_decoder_sequence_length + 1'}
        torch.onnx.export(DecoderWithPastGraph(twin), (dec_ids, mask, *past),
                          os.path.join(out_dir, 'decoder_with_past_model.onnx'),
                          input_names=['input_ids', 'encoder_attention_mask'] + past_names,
                          output_names=['logits'] + present, dynamic_axes=axes, **kw)


# --- int8: quantize_dynamic's rewrite of each MatMul by a constant weight --------------


def quantize(path, out_path):
    model = onnx.load(path)
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    nodes, added = [], []
    for node in graph.node:
        w = weights.get(node.input[1]) if node.op_type == 'MatMul' else None
        if w is None or len(w.dims) != 2:
            nodes.append(node)
            continue
        name = node.name or node.output[0]
        value = numpy_helper.to_array(w).astype(np.float32)
        scale = float(np.abs(value).max()) / 127.0 or 1.0
        q = np.clip(np.round(value / scale), -127, 127).astype(np.int8)
        added += [numpy_helper.from_array(q, w.name + '_quantized'),
                  numpy_helper.from_array(np.array(scale, np.float32), w.name + '_scale'),
                  numpy_helper.from_array(np.array(0, np.int8), w.name + '_zero_point')]
        a = node.input[0]
        nodes += [
            helper.make_node('DynamicQuantizeLinear', [a],
                             [f'{name}_a_q', f'{name}_a_scale', f'{name}_a_zp'],
                             name=f'{name}_quantize'),
            helper.make_node('MatMulInteger', [f'{name}_a_q', w.name + '_quantized',
                                               f'{name}_a_zp', w.name + '_zero_point'],
                             [f'{name}_int32'], name=f'{name}_matmul_integer'),
            helper.make_node('Cast', [f'{name}_int32'], [f'{name}_float'],
                             to=TensorProto.FLOAT, name=f'{name}_cast'),
            helper.make_node('Mul', [f'{name}_a_scale', w.name + '_scale'],
                             [f'{name}_scales'], name=f'{name}_scales_mul'),
            helper.make_node('Mul', [f'{name}_float', f'{name}_scales'], list(node.output),
                             name=f'{name}_rescale'),
        ]
    used = {i for n in nodes for i in n.input}
    kept = [init for init in graph.initializer if init.name in used] + added
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


# --- the model, and libtfm's tokens to check ONNX Runtime's against --------------------


def libtfm_model(config, model_path):
    if config == 'translation':
        path = model_path or (TRANSLATION_MODEL if os.path.exists(TRANSLATION_MODEL) else None)
        if path:
            return tfm.Model.load(path), path
    elif model_path:
        return tfm.Model.load(model_path), model_path
    return tfm.Model(**CONFIGS[config]['options']), None


def check_tokens(model, config, sources, seed=5):
    """Random sources (tokens in [3, vocab): no bos, eos or pad) and
    libtfm's float32 greedy and beam 4 tokens, no end token."""
    c = CONFIGS[config]
    rng = np.random.default_rng(seed)
    src = rng.integers(3, c['options']['src_vocab'], (sources, c['src_len'])).astype(np.int32)
    model.eval()
    out = {'sources': src.tolist(), 'max_length': c['max_length']}
    kw = dict(max_length=c['max_length'], bos_id=BOS, eos_id=-1, src_pad_id=-1,
              cache_precision='float32')
    out['greedy'] = np.asarray(model.greedy(src, **kw))[:, 1:].tolist()
    out['beam4'] = np.asarray(model.beam(src, beam_size=4, **kw)[0])[:, 0, 1:].tolist()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('config', choices=sorted(CONFIGS))
    p.add_argument('--out', help='default: runs/ort/CONFIG')
    p.add_argument('--model', help='a libtfm model file of the configuration')
    p.add_argument('--check-sources', type=int, default=8)
    a = p.parse_args()
    out = a.out or os.path.join(ROOT, 'runs', 'ort', a.config)
    os.makedirs(out, exist_ok=True)
    model, path = libtfm_model(a.config, a.model)
    options = model.options
    for key in ('src_vocab', 'd_model', 'heads', 'encoder_layers', 'd_ff'):
        if options[key] != CONFIGS[a.config]['options'][key]:
            sys.exit(f'export: {path}: {key} {options[key]}, the configuration has '
                     f"{CONFIGS[a.config]['options'][key]}")
    twin = Twin(options, model.state_dict()).eval()
    export(twin, out, a.config)
    for name in ('encoder_model', 'decoder_model', 'decoder_with_past_model'):
        quantize(os.path.join(out, name + '.onnx'), os.path.join(out, name + '_quantized.onnx'))
    if a.check_sources:
        with open(os.path.join(out, 'check.json'), 'w') as f:
            json.dump(check_tokens(model, a.config, a.check_sources), f)
    with open(os.path.join(out, 'config.json'), 'w') as f:
        json.dump({'config': a.config, 'model': path or 'random (tfm.Model, seed 0)',
                   'src_len': CONFIGS[a.config]['src_len'],
                   'src_vocab': options['src_vocab'],
                   'max_length': CONFIGS[a.config]['max_length'],
                   'decoder_layers': options['decoder_layers'], 'heads': options['heads'],
                   'd_model': options['d_model'], 'bos_id': BOS}, f, indent=1)
    print(f'export: {a.config} graphs in {out}')


if __name__ == '__main__':
    main()
