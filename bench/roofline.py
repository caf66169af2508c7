#!/usr/bin/env python3
"""The fastest a decoding job of bench/run.py could run on this machine, and
so the highest ratio against PyTorch it could reach.

A decoding run does two kinds of work that cannot hide behind each other
on a core: products (the encoder's, the cross-attention's keys and values,
each step's layers and output projection), bound by the BLAS's float32
rate, and attention over the key/value caches, bound by how fast memory
streams them (a step reads every source's cross-attention tiles and every
row's self-attention tiles once; a source's beam hypotheses share all but
their last). The bound is their sum:

    bound_s = product_flop / rate + cache_bytes / bandwidth

where the caches count only if a decoding call's (its sources' tiles at
the middle step) outgrow the last-level cache (--llc); 003's stay in it.

Give the machine's own figures: --rate from `OPENBLAS_NUM_THREADS=1
build/bench/tfm-bench-matmul --threads 2` (its float32 column), --bandwidth
from a two-thread read of a large buffer. With --log (a bench/run.py
--decode-only log), each job's libtfm and fastest-PyTorch times are read
from it, and the line gives the ratio measured, the ratio at the bound, and
libtfm's time over the bound.

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
}
CALL_SOURCES = 250  # tfm-bench's sources per decoding call (--decode-batch)
BLOCK = 16  # positions per cache tile (lib/decode/decode.h)


def tiles(n):
    return math.ceil(n / BLOCK)


def work(c, sources, beam, llc, cache_bytes=4):
    """Product FLOP and cache bytes read from memory of one decoding job."""
    d, L, S, T = c['d'], c['layers'], c['src_len'], c['steps']
    tokens = sources * S
    encoder = tokens * L * (4 * d * d + 2 * d * c['d_ff'] + 2 * S * d)
    cross_kv = tokens * L * 2 * d * d
    per_row_step = L * (6 * d * d + 2 * d * c['d_ff']) + d * c['vocab']
    decoder = sources * beam * T * per_row_step
    flop = 2 * (encoder + cross_kv + decoder)
    tile = 2 * BLOCK * (d // c['heads']) * cache_bytes * c['heads'] * L  # all heads and layers
    cross = sources * T * tiles(S) * tile
    # step t attends over t + 1 positions; hypotheses share all but the last tile
    self_tiles = sum(tiles(t + 1) - 1 + beam for t in range(T))
    call = min(sources, CALL_SOURCES) * (tiles(S) + tiles(T // 2) - 1 + beam) * tile
    return flop, (cross + sources * self_tiles * tile) if call > llc else 0


def read_log(path):
    times = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get('impl') in ('libtfm', 'pytorch-fast', 'pytorch-int8'):
                key = (r['config'], r['what'], 'libtfm' if r['impl'] == 'libtfm' else 'pytorch')
                times[key] = min(times.get(key, math.inf), r['median_ms'] / 1000)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--rate', type=float, required=True, help='float32 GFLOP/s of the products')
    p.add_argument('--bandwidth', type=float, required=True, help='GB/s read from memory')
    p.add_argument('--llc', type=float, default=32, help="the last-level cache's MB (32)")
    p.add_argument('--log', help='a bench/run.py --decode-only log')
    a = p.parse_args()
    times = read_log(a.log) if a.log else {}
    print(f'float32 products at {a.rate:g} GFLOP/s, caches read at {a.bandwidth:g} GB/s')
    for config, c in CONFIGS.items():
        for what, (beam, precision) in DECODE_JOBS.items():
            if precision != 'float32':
                continue
            flop, cache = work(c, DECODE_SOURCES[config], beam, a.llc * 2**20)
            compute, memory = flop / (a.rate * 1e9), cache / (a.bandwidth * 1e9)
            bound = compute + memory
            caches = (f'{cache / 1e9:.1f} GB of caches ({memory:.2f} s)' if cache
                      else 'caches within the last-level cache')
            line = (f'{config} {"greedy" if beam == 1 else f"beam {beam}"}: {flop / 1e9:.0f} GFLOP '
                    f'({compute:.2f} s) + {caches} = {bound:.2f} s')
            tfm, torch = times.get((config, what, 'libtfm')), times.get((config, what, 'pytorch'))
            if tfm and torch:
                line += (f'; libtfm {tfm:.2f} s ({tfm / bound:.2f}x the bound), PyTorch '
                         f'{torch:.2f} s: ratio {torch / tfm:.2f}x, at the bound '
                         f'{torch / bound:.2f}x')
            print(line)


if __name__ == '__main__':
    main()
