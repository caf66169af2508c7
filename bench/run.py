#!/usr/bin/python3
"""Runs libtfm's benchmark (BUILD/bench/tfm-bench) and its PyTorch twins
(bench/torch/bench.py) interleaved, and prints a table per OpenBLAS
environment with the issue's targets, met or missed.

  /usr/bin/python3 bench/run.py [--build DIR] [--configs 003,avg,002]
      [--rounds R] [--envs found,unset,haswell] [--quick] [--log FILE]
      [--checkpoint FILE] [--decode-only | --train-only]
  /usr/bin/python3 bench/run.py --from FILE     (re-print a logged run; FILE,FILE...:
      several runs' rounds together)
  /usr/bin/python3 bench/run.py --versus DIR [--build DIR] ...
      (libtfm against libtfm from another build, e.g. -Dnative=true)
  /usr/bin/python3 bench/run.py --decode-only --anchors onnxruntime
      [--configs avg,002,translation] ...   (libtfm against ONNX Runtime)

Jobs: a training step of each config on 2 threads; each config's decoding
on 2 threads, greedy and beam 4, in float32 and int8; and libtfm's steps on
1 thread (for the 2-thread speed-up). The decoding jobs run an untrained
model on random sources that never end (no end token: max_length tokens
each), the PyTorch twin's way. Their anchors: PyTorch decoding its fastest
way (bench/torch/decode.py: batched, keys and values cached; int8 by
quantize_dynamic), and at 003 greedy the tutorial's translate loop
(bench/torch/bench.py); each decoding job prints a "decode ratio against the
fastest PyTorch decode" line, tokens per second over tokens per second.
libtfm's int8 decoding is tfm-bench --precision int8 (tfm_model_quantize:
the layers and the generator), and an "int8 over float32" line per
configuration and strategy gives its speed over libtfm's float32 decoding
of the same run. With --checkpoint (a tutorial 003 model,
e.g. runs/demo/taylor_best.safetensors from scripts/demo.sh), libtfm's
greedy and beam 4 translation of 003's 750 test functions are timed too
(examples/tfm-taylor --translate). Each round runs, job by job, libtfm
then the PyTorch anchors (the tutorials' code, and --style fast for
training), each in its own process; each keeps its best (lowest) median
over the rounds, and ratios are taken against the fastest anchor. 002 and
the tutorial's translation loop run one round (a PyTorch step takes ~12 s
or more, the loop minutes).

--anchors onnxruntime (or pytorch,onnxruntime) holds the decoding jobs
against ONNX Runtime too (issue 44): bench/ort/decode.js, onnxruntime-node
from npm (cd bench/ort && npm ci --ignore-scripts), running the graphs
bench/ort/export.py makes from a twin of the configuration's libtfm model
(Optimum's layout, float32 and int8), greedy and beam 4, 2 threads; its
configurations are avg, 002 and translation (the README's translation
model's shape: d 256, 3 + 3 layers, 8,000 pieces, 32 source pieces, 48
generated; ONNX Runtime's graphs carry runs/translation's trained weights
when they exist). Before the rounds the graphs are made where missing
(runs/ort/CONFIG) and their float32 greedy and beam 4 tokens are checked
equal to libtfm's on the same sources; a "decode ratio against ONNX
Runtime" line per configuration, strategy and precision follows, with the
load averages the rounds ran under (each record holds /proc/loadavg's
1-minute figure from just before it ran).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWIN = os.path.join(ROOT, 'bench', 'torch', 'bench.py')
DECODER = os.path.join(ROOT, 'bench', 'torch', 'decode.py')  # PyTorch's fastest decoding
PYTHON = '/usr/bin/python3'  # Debian's python3-torch
CONFIGS = ['003', 'avg', '002']
# ONNX Runtime's anchor (bench/ort): its configurations, and the translation
# model's shape, which tfm-bench decodes but no PyTorch twin does
ORT = 'onnxruntime'
ORT_DIR = os.path.join(ROOT, 'bench', 'ort')
ORT_CONFIGS = ['avg', '002', 'translation']
ORT_RATIO = 3.0  # issue 44: libtfm's tokens/s over ONNX Runtime's, at least
ENVS = ['found', 'unset', 'haswell']

# Issue 14's targets: the fastest PyTorch anchor's time / libtfm's, at least.
TRAIN_RATIO = {'003': 4.0, 'avg': 2.5, '002': 1.5}
DECODE_RATIO = 150.0
BEAM = 4               # beam 4 decoding's time / greedy's, at most BEAM_COST
BEAM_COST = 3.0
SGEMM_FRACTION = 0.85  # of the 002 step
MEMORY_RATIO = 0.5     # libtfm / PyTorch peak RSS, 002 step, at most
SPEEDUP = 1.8          # libtfm's 002 step, 2 threads over 1
# libtfm's training step with tfm_model_set_recompute(attention weights |
# feed-forward hidden | norm outputs | attention context): tfm-bench
# --recompute 15
RECOMPUTED = 'train-recompute'
RECOMPUTE_FLAGS = 15
# The PyTorch anchors: the tutorials' code, the same work written with
# PyTorch's fast modules (bench/torch/bench.py --style fast), and in C++ on
# libtorch (BUILD/bench/tfm-bench-libtorch, built with
# -Dlibtorch_bench=enabled); ratios are taken against the fastest.
ANCHORS = ['pytorch', 'pytorch-fast', 'libtorch']
# libtfm's step with bfloat16 products (tfm-bench --precision bfloat16, on
# CPUs with AVX512_BF16), against the float32 anchors and PyTorch's own
# mixed precision: the fast twin under CPU autocast to bfloat16.
BF16 = 'train-bf16'
BF16_ANCHOR = 'pytorch-fast-bf16'
# Decoding jobs: (beam, precision) by name. Their anchors: bench/torch/
# decode.py in float32 ('pytorch-fast') or after quantize_dynamic
# ('pytorch-int8'), and at 003 greedy the tutorial's loop ('pytorch').
DECODE_JOBS = {'decode': (1, 'float32'), f'beam{BEAM}': (BEAM, 'float32'),
               'decode-int8': (1, 'int8'), f'beam{BEAM}-int8': (BEAM, 'int8')}
INT8_ANCHOR = 'pytorch-int8'
DECODE_SOURCES = {'003': 750, 'avg': 750, '002': 64,  # 002: ~100x 003's work per token
                  'translation': 250}
# Issue 31's target: libtfm's tokens per second over the fastest PyTorch
# decode's, at least, float32 against float32 and int8 against int8.
DECODE_ANCHOR_RATIO = 3.0
# and libtfm's int8 greedy decoding over its float32 greedy decoding
INT8_SPEEDUP = {'003': 1.3, '002': 1.8}


def cpu_has_bf16():
    try:
        with open('/proc/cpuinfo') as f:
            return ' avx512_bf16' in f.read()
    except OSError:
        return False


def anchors_in(build):
    """The anchors this build can run."""
    have = os.path.exists(os.path.join(build, 'bench', 'tfm-bench-libtorch'))
    return [a for a in ANCHORS if a != 'libtorch' or have]


# the translation of 003's test set by a trained model (--checkpoint)
TEST_SET = 'test-'


def jobs(configs, decode=True, bf16=False, checkpoint=None, train=True):
    """(config, what, threads, with PyTorch) in run order; the translation
    shape decodes only."""
    decoded = configs
    configs = [c for c in configs if c in CONFIGS]
    out = [(c, 'train', 2, True) for c in configs] if train else []
    if bf16 and train:
        out += [(c, BF16, 2, True) for c in configs]
    if '002' in configs and train:  # libtfm's 002 step recomputing what it may (its memory)
        out.append(('002', RECOMPUTED, 2, False))
    if decode:
        out += [(c, what, 2, True) for c in decoded for what in DECODE_JOBS]
        if '003' in configs and checkpoint:
            out += [('003', TEST_SET + what, 2, False) for what in ('greedy', f'beam{BEAM}')]
    # libtfm alone on 1 thread: its 2-thread scaling (the target is 002's)
    if train:
        out += [(c, 'train', 1, False) for c in configs]
    return out


def decode_impls(config, what, first_round, anchors=('pytorch',)):
    """Who runs a decoding job: libtfm, then its PyTorch anchors (the
    tutorial's loop, minutes, in the first round only) and ONNX Runtime,
    as anchors asks and where they have the configuration."""
    beam, precision = DECODE_JOBS[what]
    impls = ['libtfm']
    if 'pytorch' in anchors and config in CONFIGS:
        if precision == 'int8':
            impls.append(INT8_ANCHOR)
        else:
            loop = config == '003' and beam == 1 and first_round
            impls += (['pytorch'] if loop else []) + ['pytorch-fast']
    if ORT in anchors and config in ORT_CONFIGS:
        impls.append(ORT)
    return impls


def base_env(name):
    """The environment as found, or with OPENBLAS_CORETYPE unset / Haswell."""
    env = dict(os.environ)
    if name == 'unset':
        env.pop('OPENBLAS_CORETYPE', None)
    elif name == 'haswell':
        env['OPENBLAS_CORETYPE'] = 'Haswell'
    return env


def decode_command(impl, config, what, threads, sources, build):
    """(argv, extra environment) of a decoding job."""
    beam, precision = DECODE_JOBS[what]
    if impl == 'libtfm':
        # libtfm's threads alone, the BLAS on one (as tfm_set_num_threads sets it)
        extra = {'OPENBLAS_NUM_THREADS': 1, 'BLIS_NUM_THREADS': 1, 'OMP_NUM_THREADS': threads}
        argv = [os.path.join(build, 'bench', 'tfm-bench'), '--threads', str(threads),
                '--config', config, '--what', 'decode', '--sources', str(sources),
                '--beam', str(beam)] + (['--precision', precision] if precision != 'float32'
                                        else [])
        return argv, extra
    if impl == ORT:  # its own pool: intraOpNumThreads threads
        return ['node', os.path.join(ORT_DIR, 'decode.js'), '--graphs', ort_graphs(config),
                '--threads', str(threads), '--sources', str(sources), '--beam', str(beam),
                '--precision', precision], {}
    extra = {'OMP_NUM_THREADS': threads, 'OMP_WAIT_POLICY': 'passive'}
    if impl == 'pytorch':  # the tutorial's loop
        return [PYTHON, TWIN, '--threads', str(threads), '--config', config, '--what', 'decode',
                '--sources', str(sources)], extra
    return [PYTHON, DECODER, '--threads', str(threads), '--config', config, '--sources',
            str(sources), '--beam', str(beam), '--precision', precision], extra


def command(impl, env_name, config, what, threads, counts, build, sgemm=True, checkpoint=None):
    """(argv, env, a shell line that reproduces the run); impl is 'libtfm',
    'versus' (libtfm from the build given as build) or a PyTorch anchor;
    sgemm False skips libtfm's timing of the BLAS alone."""
    if what in DECODE_JOBS:
        argv, extra = decode_command(impl, config, what, threads, counts['sources'], build)
    elif what.startswith(TEST_SET):
        extra = {'OPENBLAS_NUM_THREADS': 1}
        argv = [os.path.join(build, 'examples', 'tfm-taylor'), '--translate', checkpoint,
                '--threads', str(threads), '--examples', '0', '--beam',
                what[len(TEST_SET + 'beam'):] if 'beam' in what else '1']
    elif impl in ('libtfm', 'versus'):
        # libtfm's own threads (--threads) and OpenBLAS's (or BLIS's)
        extra = {'OPENBLAS_NUM_THREADS': threads, 'BLIS_NUM_THREADS': threads,
                 'OMP_NUM_THREADS': threads}
        argv = [os.path.join(build, 'bench', 'tfm-bench'), '--threads', str(threads)]
        if not sgemm:
            argv += ['--sgemm', '0']
    else:
        # passive: PyTorch's OpenMP threads otherwise spin against OpenBLAS's
        extra = {'OMP_NUM_THREADS': threads, 'OMP_WAIT_POLICY': 'passive'}
        argv = [os.path.join(build, 'bench', 'tfm-bench-libtorch'), '--threads', str(threads)] \
            if impl == 'libtorch' else [PYTHON, TWIN, '--threads', str(threads)]
        if impl in ('pytorch-fast', BF16_ANCHOR):
            argv += ['--style', 'fast']
    if not what.startswith(TEST_SET) and what not in DECODE_JOBS:
        argv += ['--config', config, '--what', what]
    if what == BF16:
        argv[argv.index(what)] = 'train'
        argv += ['--precision', 'bfloat16']
    if what.startswith('train'):
        argv += ['--steps', str(counts['steps']), '--warmup', str(counts['warmup'])]
    if what == RECOMPUTED:
        argv[argv.index(what)] = 'train'
        argv += ['--recompute', str(RECOMPUTE_FLAGS)]
    env = base_env(env_name)
    env.update({k: str(v) for k, v in extra.items()})
    prefix = ['env'] + (['-u', 'OPENBLAS_CORETYPE'] if 'OPENBLAS_CORETYPE' not in env else
                        ['OPENBLAS_CORETYPE=' + env['OPENBLAS_CORETYPE']])
    line = shlex.join(prefix + [f'{k}={v}' for k, v in extra.items()] + argv)
    return argv, env, line


def ort_graphs(config):
    return os.path.join(ROOT, 'runs', 'ort', config)


def ort_prepare(config, build, log):
    """Makes the configuration's graphs if missing, then checks ONNX
    Runtime's float32 tokens against libtfm's; a record either way."""
    rec = {'impl': ORT, 'config': config, 'what': 'check'}
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, 'bindings', 'python'),
               TFM_LIBRARY=os.path.join(build, 'lib', 'libtfm.so.0'))
    steps = [] if os.path.exists(os.path.join(ort_graphs(config), 'config.json')) else \
        [[PYTHON, os.path.join(ORT_DIR, 'export.py'), config]]
    steps.append(['node', os.path.join(ORT_DIR, 'decode.js'), '--graphs', ort_graphs(config),
                  '--check'])
    for argv in steps:
        p = subprocess.run(argv, env=env, capture_output=True, text=True)
        if p.returncode:
            rec['error'] = f'{shlex.join(argv)}: exit {p.returncode}: {p.stderr.strip()[-300:]}' \
                + (p.stdout.strip()[-300:] if 'decode.js' in argv[1] else '')
            break
    else:
        rec.update(json.loads(p.stdout.splitlines()[-1]))
    log.write(json.dumps(rec) + '\n')
    log.flush()
    print(f"[{config}] ONNX Runtime graphs: {rec.get('error') or rec['check']}", file=sys.stderr)
    return rec


def load_average():
    try:
        with open('/proc/loadavg') as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def counts_for(a, config):
    """Steps, warm-up steps and sources: the defaults unless given."""
    default = lambda value, d: d if value is None else value  # noqa: E731
    return {'steps': default(a.steps, 10),
            'warmup': default(a.warmup, 1 if config == '002' else 3),
            'sources': default(a.sources, DECODE_SOURCES[config])}


def run_one(argv, env):
    """The program's JSON line, or {'error': ...}."""
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True)
    except OSError as e:
        return {'error': str(e)}
    if argv[0].endswith('tfm-taylor'):
        return translation(p)
    lines = [x for x in p.stdout.splitlines() if x.startswith('{')]
    if p.returncode or not lines:
        return {'error': f'exit {p.returncode}: {p.stderr.strip()[-300:]}'}
    try:
        return json.loads(lines[-1])
    except ValueError as e:
        return {'error': f'bad JSON ({e}): {lines[-1][:200]}'}


def translation(p):
    """tfm-taylor --translate's time and accuracy, as a record."""
    times = re.findall(r'accuracy: +([0-9.]+) +\(([0-9.]+) s\)', p.stdout)
    if p.returncode or not times:
        return {'error': f'exit {p.returncode}: {p.stderr.strip()[-300:]}'}
    accuracy, seconds = times[-1]
    return {'median_ms': 1e3 * float(seconds), 'accuracy': float(accuracy), 'steps': 1,
            'sources': 750}


def run_all(a, log):
    found = os.environ.get('OPENBLAS_CORETYPE')
    print(f'OPENBLAS_CORETYPE found as: {found!r}' if found is not None else
          'OPENBLAS_CORETYPE found unset', file=sys.stderr)
    same = 'unset' if found is None else 'haswell' if found.lower() == 'haswell' else None
    envs = a.envs
    if 'found' in envs and same in envs:
        print(f"'found' is the same as '{same}': skipped", file=sys.stderr)
        envs = [e for e in envs if e != 'found']
    records = []
    if ORT in a.anchors and not a.train_only:
        records += [ort_prepare(c, a.build, log) for c in a.configs if c in ORT_CONFIGS]
    for env_name in envs:
        for r in range(a.rounds):
            for config, what, threads, with_torch in jobs(a.configs, not a.train_only,
                                                          a.bf16, a.checkpoint,
                                                          not a.decode_only):
                if a.versus:
                    # both builds' training steps only; every round, 002's too
                    if what != 'train' or threads != 2:
                        continue
                elif ((config == '002' and (what not in DECODE_JOBS or 'pytorch' in a.anchors))
                      or what == RECOMPUTED) and r > 0:
                    continue
                counts = counts_for(a, config)
                anchors = anchors_in(a.build) if what == 'train' else \
                    [BF16_ANCHOR] if what == BF16 else ['pytorch']
                impls = ['versus', 'libtfm'] if a.versus else \
                    ['libtfm'] + anchors if with_torch else ['libtfm']
                if what in DECODE_JOBS:
                    impls = decode_impls(config, what, r == 0, a.anchors)
                for impl in impls:
                    build = a.versus if impl == 'versus' else a.build
                    # the BLAS alone is the same for both builds
                    argv, env, line = command(impl, env_name, config, what, threads, counts,
                                              build, sgemm=not a.versus,
                                              checkpoint=a.checkpoint)
                    start, load = time.time(), load_average()
                    out = run_one(argv, env)
                    rec = {'env': env_name, 'found_coretype': found, 'build': build,
                           'coretype': env.get('OPENBLAS_CORETYPE'),
                           'round': r + 1, 'threads': threads, 'impl': impl,
                           'config': config, 'what': what, 'cmd': line, 'load': load}
                    rec.update(out)
                    # the program's own line says 'libtfm' for both builds, 'decode' for beams
                    rec.update(impl=impl, what=what)
                    records.append(rec)
                    log.write(json.dumps(rec) + '\n')
                    log.flush()
                    result = out.get('error') or f"{out.get('median_ms', float('nan')):.1f} ms"
                    print(f'[{env_name} round {r + 1}] {config} {what} {threads}t {impl}: '
                          f'{result} ({time.time() - start:.0f} s)\n    {line}',
                          file=sys.stderr)
    return records


# --- the table --------------------------------------------------------------


def best(records, env, impl, config, what, threads):
    """The record with the lowest median, or None."""
    ok = [r for r in records if r.get('env') == env and r.get('impl') == impl and
          r.get('config') == config and r.get('what') == what and
          r.get('threads') == threads and 'median_ms' in r]
    return min(ok, key=lambda r: r['median_ms'], default=None)


def fastest_anchor(records, env, config, what, threads):
    """The fastest PyTorch anchor's best record, or None; libtfm's bfloat16
    step is held against the float32 anchors and PyTorch's bfloat16 one."""
    found = [best(records, env, impl, config, 'train' if what == BF16 else what, threads)
             for impl in ANCHORS + [INT8_ANCHOR]]
    if what == BF16:
        found.append(best(records, env, BF16_ANCHOR, config, what, threads))
    return min((r for r in found if r), key=lambda r: r['median_ms'], default=None)


def fmt(x, spec):
    return '-' if x is None else format(x, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(name, value, target, higher_is_better, unit='x'):
    if value is None:
        return f'{name}: not measured (target {target:g}{unit})'
    if higher_is_better:
        met, by = value >= target, (value / target if value >= target else target / value)
        goal = f'>= {target:g}{unit}'
    else:
        met, by = value <= target, (target / value if value <= target else value / target)
        goal = f'<= {target:g}'
    return (f'{name}: {value:.2f}{unit}, target {goal}: '
            f'{"met" if met else "missed"} by {by:.2f}x')


def table(records, env):
    coretypes = {r.get('coretype') for r in records if r.get('env') == env}
    print(f'\n### Environment "{env}": OPENBLAS_CORETYPE='
          f'{", ".join(str(c) if c is not None else "(unset)" for c in coretypes)}\n')
    print('Each figure: the best median over the rounds (002 and the tutorial\'s decoding '
          'loop: one round); ms per training step, or for all the sources decoded.\n')
    print('| config | what | threads | libtfm ms | PyTorch ms (fastest anchor) | anchor | '
          'PyTorch / libtfm | libtfm GFLOP/s | PyTorch GFLOP/s | sgemm GFLOP/s | '
          'libtfm / sgemm | RSS MB libtfm | RSS MB PyTorch | RSS libtfm / PyTorch | '
          'allocs/step (libtfm\'s) |')
    print('| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: '
          '| ---: | ---: | ---: |')
    keys = []
    for r in records:
        k = (r.get('config'), r.get('what'), r.get('threads'))
        if r.get('env') == env and k not in keys:
            keys.append(k)
    bests = {}
    for config, what, threads in keys:
        t = best(records, env, 'libtfm', config, what, threads)
        p = fastest_anchor(records, env, config, what, threads)
        bests[config, what, threads] = (t, p)
        t_ms, p_ms = t and t['median_ms'], p and p['median_ms']
        gflop = t and t.get('gemm_gflop')  # libtfm's count serves both

        def rate(ms):
            return gflop / (ms / 1e3) if gflop and ms else None
        sgemm = rate(t and t.get('sgemm_ms'))
        t_rss, p_rss = t and t.get('peak_rss_mb'), p and p.get('peak_rss_mb')
        allocs = '-' if not t or 'allocs_per_step' not in t else (
            f"{t['allocs_per_step']:g} ({t.get('libtfm_allocs_per_step', float('nan')):g})")
        label = what if what.startswith('train') else \
            f"{what}, {(t or p).get('sources', '?')} sources (ms: all)"
        print(f'| {config} | {label} | {threads} | {fmt(t_ms, ".1f")} | {fmt(p_ms, ".1f")} | '
              f'{p["impl"] if p else "-"} | '
              f'{fmt(ratio(p_ms, t_ms), ".2f")} | {fmt(rate(t_ms), ".1f")} | '
              f'{fmt(rate(p_ms), ".1f")} | {fmt(sgemm, ".1f")} | '
              f'{fmt(ratio(rate(t_ms), sgemm), ".0%")} | {fmt(t_rss, ".0f")} | '
              f'{fmt(p_rss, ".0f")} | {fmt(ratio(t_rss, p_rss), ".2f")} | {allocs} |')
    failed = [r for r in records if r.get('env') == env and 'error' in r]
    for r in failed:
        print(f"\nfailed: {r['impl']} {r['config']} {r['what']} {r['threads']}t round "
              f"{r.get('round')}: {r['error']}")
    return bests


def tokens_per_s(record):
    return record and record.get('tokens_per_s')


def decode_ratio(records, env, config, what):
    """The line of a decoding job: libtfm's tokens per second over the
    fastest PyTorch decode's (float32 against float32, int8 against int8),
    or None if neither ran."""
    beam, precision = DECODE_JOBS[what]
    t = best(records, env, 'libtfm', config, what, 2)
    anchors = [best(records, env, impl, config, what, 2)
               for impl in ('pytorch', 'pytorch-fast', INT8_ANCHOR)]
    p = max((r for r in anchors if tokens_per_s(r)), key=tokens_per_s, default=None)
    ran = any(r.get('env') == env and r.get('config') == config and r.get('what') == what and
              r.get('impl') in ('pytorch', 'pytorch-fast', INT8_ANCHOR) for r in records)
    if not ran:  # --anchors without pytorch
        return None
    name = (f"{config} {'greedy' if beam == 1 else f'beam {beam}'} {precision} decode ratio "
            'against the fastest PyTorch decode')

    def figures(r, who):
        return f"{who} {fmt(tokens_per_s(r), ',.0f')} tokens/s, {fmt(r.get('peak_rss_mb'), '.0f')} MB"
    if not t and precision == 'int8':
        return f"{name}: {figures(p, p['impl'])}; libtfm int8: not built"
    line = verdict(name, ratio(tokens_per_s(t), tokens_per_s(p)), DECODE_ANCHOR_RATIO, True)
    return line + ''.join(f'; {figures(r, who)}' for r, who in
                          ((t, 'libtfm'), (p, p and p['impl'])) if r)


def ort_ratio(records, env, config, what):
    """The line of a decoding job against ONNX Runtime (float32 against
    float32, int8 against int8), with the load averages its runs started
    under, or None if neither ran."""
    beam, precision = DECODE_JOBS[what]
    t, o = best(records, env, 'libtfm', config, what, 2), best(records, env, ORT, config, what, 2)
    if not o:
        return None
    name = (f"{config} {'greedy' if beam == 1 else f'beam {beam}'} {precision} decode ratio "
            'against ONNX Runtime (2 threads each)')
    loads = [r['load'] for r in records if r.get('env') == env and r.get('config') == config
             and r.get('what') == what and r.get('impl') in ('libtfm', ORT)
             and r.get('load') is not None]
    line = verdict(name, ratio(tokens_per_s(t), tokens_per_s(o)), ORT_RATIO, True)
    line += ''.join(f"; {who} {fmt(tokens_per_s(r), ',.0f')} tokens/s, "
                    f"{fmt(r.get('peak_rss_mb'), '.0f')} MB" for r, who in
                    ((t, 'libtfm'), (o, ORT)) if r)
    if loads:
        line += f'; load {min(loads):.2f}-{max(loads):.2f}'
    return line


def ort_checks(records):
    """A line per configuration whose ONNX Runtime tokens were checked
    (its last check, where logs of several runs are read together)."""
    checks = {r['config']: r for r in records if r.get('impl') == ORT and r.get('what') == 'check'}
    return [f"{config} ONNX Runtime float32 tokens against libtfm's: " +
            (f"failed: {r['error']}" if 'error' in r else
             ', '.join(f'{k} {v}' for k, v in r['check'].items()))
            for config, r in checks.items()]


def targets(bests, records, env):
    """A line per target of the issues, from table()'s best records (and
    the records, for the decoding jobs' anchors)."""
    lines = []

    def get(*key):
        return bests.get(key, (None, None))
    for config, target in TRAIN_RATIO.items():
        for what, name in (('train', ''), (BF16, ', bfloat16 products')):
            t, p = get(config, what, 2)
            if t or p:
                lines.append(verdict(f'{config} train ratio{name} (2 threads, against '
                                     f'{p["impl"] if p else "-"})',
                                     ratio(p and p['median_ms'], t and t['median_ms']), target,
                                     True))
    t, _ = get('003', 'decode', 2)
    loop = best(records, env, 'pytorch', '003', 'decode', 2)
    if t or loop:
        lines.append(verdict("003 decode ratio against tutorial 003's loop (2 threads)",
                             ratio(loop and loop['median_ms'], t and t['median_ms']),
                             DECODE_RATIO, True))
    lines += ort_checks(records)
    for config in CONFIGS + [c for c in ORT_CONFIGS if c not in CONFIGS]:
        for what in DECODE_JOBS:
            for line in (decode_ratio(records, env, config, what),
                         ort_ratio(records, env, config, what)):
                if line:
                    lines.append(line)
        for f32, int8 in (('decode', 'decode-int8'), (f'beam{BEAM}', f'beam{BEAM}-int8')):
            t, q = get(config, f32, 2)[0], get(config, int8, 2)[0]
            if t and q:
                name = (f"{config} {'greedy' if f32 == 'decode' else f'beam {BEAM}'} libtfm "
                        'int8 over float32 decoding (2 threads)')
                speedup = ratio(tokens_per_s(q), tokens_per_s(t))
                lines.append(verdict(name, speedup, INT8_SPEEDUP[config], True)
                             if f32 == 'decode' and config in INT8_SPEEDUP
                             else f'{name}: {fmt(speedup, ".2f")}x')
    t, _ = get('003', 'decode', 2)
    b, _ = get('003', f'beam{BEAM}', 2)
    if t or b:
        lines.append(verdict(f'003 beam {BEAM} decoding time / greedy (2 threads, random '
                             'sources that never end)',
                             ratio(b and b['median_ms'], t and t['median_ms']), BEAM_COST, False,
                             unit=''))
    t, _ = get('003', TEST_SET + 'greedy', 2)
    b, _ = get('003', f'{TEST_SET}beam{BEAM}', 2)
    if t or b:
        lines.append(verdict(f'003 beam {BEAM} decoding time / greedy (2 threads, the test set '
                             f'by the checkpoint; accuracy {fmt(t and t.get("accuracy"), ".3f")} '
                             f'greedy, {fmt(b and b.get("accuracy"), ".3f")} beam)',
                             ratio(b and b['median_ms'], t and t['median_ms']), BEAM_COST, False,
                             unit=''))
    t, p = get('002', 'train', 2)
    if t or p:
        frac = None
        if t and t.get('sgemm_ms') and t.get('median_ms'):
            frac = t['sgemm_ms'] / t['median_ms']  # same FLOPs: the rates' ratio
        lines.append('002 train fraction of the sgemm rate (2 threads): ' +
                     ('not measured' if frac is None else
                      f"{frac:.0%}, target >= {SGEMM_FRACTION:.0%}: "
                      f"{'met' if frac >= SGEMM_FRACTION else 'missed'} by "
                      f"{abs(frac - SGEMM_FRACTION) * 100:.0f} points"))
        lines.append(verdict('002 train peak RSS libtfm / PyTorch',
                             ratio(t and t.get('peak_rss_mb'), p and p.get('peak_rss_mb')),
                             MEMORY_RATIO, False, unit=''))
        r, _ = get('002', RECOMPUTED, 2)
        if r:
            lines.append(verdict('002 train, recomputing, peak RSS libtfm / PyTorch',
                                 ratio(r.get('peak_rss_mb'), p and p.get('peak_rss_mb')),
                                 MEMORY_RATIO, False, unit=''))
            lines.append(verdict('002 train, recomputing, ratio (2 threads)',
                                 ratio(p and p['median_ms'], r['median_ms']),
                                 TRAIN_RATIO['002'], True))
    t1, _ = get('002', 'train', 1)
    if t or t1:
        lines.append(verdict('002 train libtfm speed-up of 2 threads over 1',
                             ratio(t1 and t1['median_ms'], t and t['median_ms']), SPEEDUP, True))
    for (config, what, threads), (t, _) in bests.items():
        if t and 'allocs_per_step' in t:
            n = t['allocs_per_step']
            lines.append(f"{config} {what} ({threads}t) allocations per "
                         f"{'step' if what.startswith('train') else 'run'}: {n:g} "
                         f"(libtfm's own {t.get('libtfm_allocs_per_step', float('nan')):g}), "
                         f"target 0: {'met' if n == 0 else f'missed by {n:g}'}")
    return lines


def versus_table(records):
    """libtfm from one build against another, per environment and config."""
    print('| environment | config | threads | build | path | versus build | path | '
          'ms | versus ms | ms / versus ms |')
    print('| --- | --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: |')
    keys = []
    for r in records:
        k = (r.get('env'), r.get('config'), r.get('threads'))
        if k not in keys:
            keys.append(k)
    for env, config, threads in keys:
        t = best(records, env, 'libtfm', config, 'train', threads)
        v = best(records, env, 'versus', config, 'train', threads)
        if not t or not v:
            continue
        print(f"| {env} | {config} | {threads} | {os.path.basename(t['build'])} | "
              f"{t.get('cpu_path', '?')} | {os.path.basename(v['build'])} | "
              f"{v.get('cpu_path', '?')} | {t['median_ms']:.1f} | "
              f"{v['median_ms']:.1f} | {t['median_ms'] / v['median_ms']:.3f} |")
    for r in records:
        if 'error' in r:
            print(f"\nfailed: {r['impl']} {r['config']} {r['threads']}t round "
                  f"{r.get('round')}: {r['error']}")


def report(records):
    if any(r.get('impl') == 'versus' for r in records):
        versus_table(records)
        return
    found = {r.get('found_coretype', '?') for r in records if r.get('what') != 'check'}
    print('OPENBLAS_CORETYPE as found: ' +
          ', '.join('(unset)' if f is None else str(f) for f in found))
    envs = []
    for r in records:
        if r.get('env') not in envs and r.get('what') != 'check':  # checks precede the runs
            envs.append(r.get('env'))
    for env in envs:
        bests = table(records, env)
        print()
        for line in targets(bests, records, env):
            print('- ' + line)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default=os.path.join(ROOT, 'build'),
                   help='meson build directory holding bench/tfm-bench (default: build)')
    p.add_argument('--versus', metavar='DIR',
                   help='time libtfm from this build too (e.g. -Dnative=true), not PyTorch')
    p.add_argument('--configs', default=','.join(CONFIGS),
                   help=f'among {CONFIGS + ["translation"]} (translation: decoding only)')
    p.add_argument('--anchors', default='pytorch',
                   help='the decoding jobs\' anchors: pytorch, onnxruntime or both, comma-'
                        'separated (default pytorch)')
    only = p.add_mutually_exclusive_group()
    only.add_argument('--train-only', action='store_true', help='no decoding job')
    only.add_argument('--decode-only', action='store_true', help='the decoding jobs alone')
    p.add_argument('--bf16', choices=['auto', 'yes', 'no'], default='auto',
                   help='also time training with bfloat16 products (auto: if the CPU has '
                        'AVX512_BF16)')
    p.add_argument('--rounds', type=int, default=3, help="002 and the tutorial's decoding loop always run once")
    p.add_argument('--envs', default=','.join(ENVS))
    p.add_argument('--quick', action='store_true',
                   help='smoke test: steps 2, warmup 1, sources 20, rounds 1')
    p.add_argument('--steps', type=int, help='timed steps (default 10)')
    p.add_argument('--warmup', type=int, help='untimed steps (default 3; 002: 1)')
    p.add_argument('--sources', type=int,
                   help='decoded sources (default 750; 002: %d)' % DECODE_SOURCES['002'])
    p.add_argument('--log', default='/tmp/tfm-bench.jsonl', help='where the JSON lines go')
    p.add_argument('--checkpoint', metavar='FILE',
                   help='a trained tutorial 003 model: also time its greedy and beam '
                        'translation of the test set')
    p.add_argument('--from', dest='from_file', metavar='FILE',
                   help='re-print the tables of a logged run, without running')
    a = p.parse_args()
    if a.from_file:
        records = []
        for name in a.from_file.split(','):
            with open(name) as f:
                records += [json.loads(x) for x in f if x.strip()]
        report(records)
        return
    a.bf16 = a.bf16 == 'yes' or (a.bf16 == 'auto' and cpu_has_bf16())
    a.configs = a.configs.split(',')
    a.envs = a.envs.split(',')
    a.anchors = a.anchors.split(',')
    if set(a.configs) - set(CONFIGS + ORT_CONFIGS) or set(a.envs) - set(ENVS) or a.rounds < 1 \
            or set(a.anchors) - {'pytorch', ORT} or \
            ('translation' in a.configs and not a.decode_only):
        p.error(f'configs among {CONFIGS + ["translation"]} (translation with --decode-only), '
                f'envs among {ENVS}, anchors among pytorch, {ORT}, rounds >= 1')
    if a.quick:
        a.rounds = 1
        a.steps = 2 if a.steps is None else a.steps
        a.warmup = 1 if a.warmup is None else a.warmup
        a.sources = 20 if a.sources is None else a.sources
    start = time.time()
    with open(a.log, 'w') as log:
        records = run_all(a, log)
    print(f'{len(records)} runs in {time.time() - start:.0f} s; JSON lines in {a.log}',
          file=sys.stderr)
    report(records)


if __name__ == '__main__':
    main()
