#!/usr/bin/python3
"""libtfm's training step on each BLAS build Debian ships: OpenBLAS with
threads (what libtfm links), OpenBLAS serial, BLIS serial and BLIS with
threads, in one interleaved run. The variants other than the linked one are
loaded over it: OpenBLAS serial by LD_LIBRARY_PATH (same soname), BLIS by
LD_PRELOAD (its cblas_sgemm comes first; libtfm sets the thread count of
the library whose cblas_sgemm it calls).

  apt-get download libopenblas0-serial libblis4-serial libblis4-pthread
  for d in *.deb; do dpkg -x $d ROOT; done
  /usr/bin/python3 bench/blas_variants.py --root ROOT [--build build] [--rounds 3]

Two settings per variant: libtfm's 2 threads splitting the products (the
BLAS set to one thread), and libtfm's 1 thread with the BLAS's own 2
(serial builds have none: skipped). Prints a table of best medians and
allocations per step; the JSON lines go to --log.
"""
import argparse
import json
import os
import subprocess
import sys

LIB = 'usr/lib/x86_64-linux-gnu'


def variants(root):
    """(name, extra environment, has threads)."""
    return [
        ('OpenBLAS pthread (linked)', {}, True),
        ('OpenBLAS serial', {'LD_LIBRARY_PATH': os.path.join(root, LIB, 'openblas-serial')},
         False),
        ('BLIS serial', {'LD_PRELOAD': os.path.join(root, LIB, 'blis-serial', 'libblis.so.4')},
         False),
        ('BLIS pthread', {'LD_PRELOAD': os.path.join(root, LIB, 'blis-pthread', 'libblis.so.4')},
         True),
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--root', required=True, help='where the .deb files were extracted')
    p.add_argument('--build', default='build')
    p.add_argument('--configs', default='003,avg,002')
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--log', default='/tmp/tfm-blas-variants.jsonl')
    a = p.parse_args()
    bench = os.path.join(a.build, 'bench', 'tfm-bench')
    records = []
    with open(a.log, 'w') as log:
        for r in range(a.rounds):
            for config in a.configs.split(','):
                if config == '002' and r > 0:
                    continue  # a step takes seconds: one round
                steps, warmup = ('3', '1') if config == '002' else ('10', '3')
                for name, extra, threaded in variants(a.root):
                    for tfm_threads, blas_threads in ((2, 2), (1, 2)):
                        if tfm_threads == 1 and not threaded:
                            continue
                        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas_threads),
                                   BLIS_NUM_THREADS=str(blas_threads), **extra)
                        env.pop('OPENBLAS_CORETYPE', None)
                        argv = [bench, '--threads', str(tfm_threads), '--config', config,
                                '--what', 'train', '--steps', steps, '--warmup', warmup,
                                '--sgemm', '0']
                        out = subprocess.run(argv, env=env, capture_output=True, text=True)
                        line = [x for x in out.stdout.splitlines() if x.startswith('{')]
                        rec = {'variant': name, 'config': config, 'round': r + 1,
                               'tfm_threads': tfm_threads, 'blas_threads': blas_threads,
                               'env': extra, 'cmd': argv}
                        rec.update(json.loads(line[-1]) if out.returncode == 0 and line else
                                   {'error': out.stderr.strip()[-300:]})
                        records.append(rec)
                        log.write(json.dumps(rec) + '\n')
                        log.flush()
                        print(f"[round {r + 1}] {config} {name} libtfm {tfm_threads}t: "
                              f"{rec.get('median_ms', rec.get('error'))}", file=sys.stderr)
    print('| config | BLAS | threads | ms per step (best median) | allocations per step |')
    print('| --- | --- | --- | ---: | ---: |')
    keys = []
    for rec in records:
        k = (rec['config'], rec['variant'], rec['tfm_threads'])
        if k not in keys:
            keys.append(k)
    for config, name, t in keys:
        ok = [x for x in records if (x['config'], x['variant'], x['tfm_threads']) ==
              (config, name, t) and 'median_ms' in x]
        if not ok:
            print(f'| {config} | {name} | - | failed | - |')
            continue
        b = min(ok, key=lambda x: x['median_ms'])
        how = '2 libtfm, BLAS 1' if t == 2 else '1 libtfm, BLAS 2'
        print(f"| {config} | {name} | {how} | {b['median_ms']:.1f} | "
              f"{b['allocs_per_step']:g} |")


if __name__ == '__main__':
    main()
