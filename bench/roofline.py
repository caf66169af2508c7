#!/usr/bin/env python3
"""The fastest a decoding job of bench/run.py could run on this machine, and
so the highest ratio against PyTorch it could reach.

A decoding run does two kinds of work that cannot hide behind each other
on a core: products (the encoder's, the cross-attention's keys and values,
each step's layers and output projection), bound by the rate of the
precision's own kernel, and attention over the key/value caches, bound by
how fast memory streams them (a step reads every source's cross-attention
tiles and every row's self-attention tiles once; a source's beam
hypotheses share all but their last). The bound is their sum:

    bound_s = product_flop / rate[precision]
              + attention_flop / rate[the attention's precision]
              + cache_bytes / bandwidth

where the encoder's attention (its scores and contexts, products of two
activations) runs at the matrix products' precision, not the weights':
an int8 model's in float32 (counting them at the int8 rate made int8's
bound up to 15% too low, at avg's 91-token sources), and the caches
count only if a decoding call's (its sources' tiles at the middle step)
outgrow the last-level cache (--llc); 003's stay in it.
An int8 model's caches hold bfloat16 (tfm_decode_options' cache_precision
AUTO), a float32 model's float32, whatever its products' precision.

Give the machine's own figures: --rate, --rate-bf16 and --rate-int8 from
`OPENBLAS_NUM_THREADS=1 build/bench/tfm-bench-int8` (the packed float32
kernel's, the packed bfloat16 kernel's and the int8 kernel's rate at 256
rows on 2 threads, decoding's own products), --bandwidth from a two-thread
read of a large buffer. With --log (a bench/run.py --decode-only log, or
tfm-bench lines with --precision float32, bfloat16 or int8), each job's
fastest libtfm and PyTorch times are read from it, and the line gives
libtfm's time over the bound, the ratio measured and the ratio at the
bound. A precision without a rate is left out.

    /usr/bin/python3 bench/roofline.py --rate 195 --bandwidth 25 \\
        --log docs/runs/bench_decode_2026-11-28_zen4_prefetch.jsonl
"""
import argparse
import json
import math

from run import DECODE_JOBS, DECODE_SOURCES  # bench/run.py's jobs and their sources

# tfm-bench's configurations (bench/bench.c): the decoder's input length is
# the tokens generated; avg is tutorials 000/001's model
CONFIGS = {
    '003': dict(d=64, heads=8, layers=2, d_ff=128, vocab=30, src_len=22, steps=84),
    'avg': dict(d=256, heads=4, layers=3, d_ff=128, vocab=13, src_len=91, steps=9),
    '002': dict(d=512, heads=8, layers=6, d_ff=2048, vocab=5000, src_len=100, steps=99),
    'translation': dict(d=256, heads=4, layers=3, d_ff=1024, vocab=8000, src_len=32, steps=48),
}
CALL_SOURCES = 250  # tfm-bench's sources per decoding call (--decode-batch)
BLOCK = 16  # positions per cache tile (lib/decode/decode.h)


def tiles(n):
    return math.ceil(n / BLOCK)


def work(c, sources, beam, llc, cache_bytes=4):
    """Product FLOP of the weights, FLOP of the encoder's attention (scores
    and contexts) and cache bytes read from memory of one decoding job."""
    d, L, S, T = c['d'], c['layers'], c['src_len'], c['steps']
    tokens = sources * S
    encoder = tokens * L * (4 * d * d + 2 * d * c['d_ff'])
    cross_kv = tokens * L * 2 * d * d
    per_row_step = L * (6 * d * d + 2 * d * c['d_ff']) + d * c['vocab']
    decoder = sources * beam * T * per_row_step
    flop = 2 * (encoder + cross_kv + decoder)
    attention_flop = 2 * tokens * L * 2 * S * d
    tile = 2 * BLOCK * (d // c['heads']) * cache_bytes * c['heads'] * L  # all heads and layers
    cross = sources * T * tiles(S) * tile
    # step t attends over t + 1 positions; hypotheses share all but the last tile
    self_tiles = sum(tiles(t + 1) - 1 + beam for t in range(T))
    call = min(sources, CALL_SOURCES) * (tiles(S) + tiles(T // 2) - 1 + beam) * tile
    return flop, attention_flop, (cross + sources * self_tiles * tile) if call > llc else 0


def attention_precision(c, precision):
    """The precision of the encoder's attention products in a job of the
    weights' precision: an int8 model's quantized weights leave them to
    the matrix products' precision, float32; bfloat16 products take heads
    wider than 16 columns (tfm_matmul_precision)."""
    if precision == 'bfloat16' and c['d'] // c['heads'] > 16:
        return 'bfloat16'
    return 'float32'


# a job's products and what its caches hold, per precision of the products
CACHE_BYTES = {'float32': 4, 'bfloat16': 4, 'int8': 2}
# bench/run.py's anchors: PyTorch's of each precision (bfloat16 has none),
# and ONNX Runtime's, whose records name their precision
ANCHORS = {'pytorch-fast': 'float32', 'pytorch-int8': 'int8', 'onnxruntime': None}
ANCHOR_NAMES = {'pytorch': 'PyTorch', 'onnxruntime': 'ONNX Runtime'}


def read_log(path):
    """The fastest time of each (config, beam, precision, 'libtfm', 'pytorch' or
    'onnxruntime')."""
    times = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            r = r.get('out', r) if isinstance(r.get('out'), dict) else r  # a wrapped line
            impl = r.get('impl')
            if impl != 'libtfm' and impl not in ANCHORS or r.get('what') in ('train', 'check'):
                continue
            precision = r.get('precision') or ANCHORS.get(impl) or 'float32'
            side = impl if impl in ('libtfm', 'onnxruntime') else 'pytorch'
            key = (r['config'], r['beam'], precision, side)
            times[key] = min(times.get(key, math.inf), r['median_ms'] / 1000)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--rate', type=float, required=True, help='float32 GFLOP/s of the products')
    p.add_argument('--rate-bf16', type=float, help='GFLOP/s of the bfloat16 products')
    p.add_argument('--rate-int8', type=float, help='GFLOP/s (2 per multiply-add) of the int8 ones')
    p.add_argument('--bandwidth', type=float, required=True, help='GB/s read from memory')
    p.add_argument('--llc', type=float, default=32, help="the last-level cache's MB (32)")
    p.add_argument('--log', help='a bench/run.py --decode-only log, or tfm-bench lines')
    a = p.parse_args()
    rates = {'float32': a.rate, 'bfloat16': a.rate_bf16, 'int8': a.rate_int8}
    times = read_log(a.log) if a.log else {}
    print('products at ' + ', '.join(f'{rate:g} GFLOP/s in {precision}'
                                      for precision, rate in rates.items() if rate) +
          f'; caches read at {a.bandwidth:g} GB/s')
    beams = sorted({beam for beam, _ in DECODE_JOBS.values()})
    for config, c in CONFIGS.items():
        for beam in beams:
            for precision, rate in rates.items():
                if not rate:
                    continue
                flop, attention, cache = work(c, DECODE_SOURCES[config], beam,
                                              a.llc * 2**20, CACHE_BYTES[precision])
                attention_in = attention_precision(c, precision)
                compute = flop / (rate * 1e9) + attention / (rates[attention_in] * 1e9)
                memory = cache / (a.bandwidth * 1e9)
                bound = compute + memory
                caches = (f'{cache / 1e9:.1f} GB of caches ({memory:.2f} s)' if cache
                          else 'caches within the last-level cache')
                line = (f'{config} {"greedy" if beam == 1 else f"beam {beam}"} {precision}: '
                        f'{flop / 1e9:.0f} GFLOP + {attention / 1e9:.0f} GFLOP of the '
                        f'encoder\'s attention in {attention_in} '
                        f'({compute:.2f} s) + {caches} = {bound:.3f} s')
                tfm = times.get((config, beam, precision, 'libtfm'))
                if tfm:
                    line += f'; libtfm {tfm:.3f} s ({tfm / bound:.2f}x the bound)'
                for anchor, name in ANCHOR_NAMES.items():
                    other = times.get((config, beam, precision, anchor))
                    if tfm and other:
                        line += (f', {name} {other:.2f} s: ratio {other / tfm:.2f}x, at the '
                                 f'bound {other / bound:.2f}x')
                print(line)


if __name__ == '__main__':
    main()
