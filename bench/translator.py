#!/usr/bin/python3
"""One translator, many callers (issue 40): tfm-bench-translator on a build,
interleaved, 2 threads each.

  /usr/bin/python3 bench/translator.py --build DIR [--model FILE] [--data DIR]
      [--rounds R] [--callers N] [--decoding-threads N] [--limit N] [--int8]
      [--workers N] [--max-wait-ms N] [--max-batch N] [--max-batch-tokens N]
      [--log FILE]

--model is a tfm_translator's model (a model file or a published folder;
by default the one the README trains, runs/translation/model.safetensors)
and --data the folder scripts/translation_data.py writes (by default
runs/translation/data): its test.en are the sources (the 1,000 test
sentences; --limit keeps the first N).

Each of R rounds is one process that translates every source twice, as one
tfm_translate() call ("batched") and through the scheduler by --callers
closed-loop callers that each submit one sentence at a time, in that order
in odd rounds and the other way in even ones; the callers' texts are checked
equal to the batched call's, byte for byte. Both run with libtfm's threads
at 2 (tfm_set_num_threads) and OPENBLAS_NUM_THREADS=1. Prints

  concurrent callers: X sentences/s, p50 A ms, p99 B ms: 0.86x of one batched call (Y sentences/s)

with each side's best over the rounds (and each round's own ratio, and
the ratio of their CPU seconds: on a shared machine a process runs part of
its wall time, which the CPU time leaves out), then the memory of
--decoding-threads threads decoding at once on one model (each a
tfm_translate() of its share of the sources) against the bound "weights +
that many decodings' buffers + 10%": the weights are the resident memory
after opening, one decoding's buffers what one such thread adds to it at
its peak (a process of its own):

  8 decoding threads on one model: peak P MB; weights W MB + 8 decodings' buffers D MB = Q MB (+10%: limit L MB): within

The CPU (model name, family/model) and the load average before and after
are printed; other jobs share the machine. Every process's JSON lines go
to --log (appended), with the command line.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = 2


def cpu_name():
    """The CPU's model name, family and model, from /proc/cpuinfo."""
    with open('/proc/cpuinfo') as f:
        info = f.read()

    def field(name):
        found = re.search(r'^%s\s*:\s*(.*)$' % name, info, re.M)
        return found.group(1).strip() if found else '?'
    return '%s (family %s, model %s), %d logical CPUs' % (
        field('model name'), field('cpu family'), field('model'), os.cpu_count() or 0)


def load_average():
    return ' '.join('%.2f' % x for x in os.getloadavg())


def run(argv, log):
    """The JSON records tfm-bench-translator printed; its command line, exit
    status, times and the load on stderr, all of it in the log."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1')
    print('  $ OPENBLAS_NUM_THREADS=1 ' + shlex.join(argv), file=sys.stderr, flush=True)
    start = time.perf_counter()
    p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    print('    exit %d, %.1f s, load %s' % (p.returncode, seconds, load_average()),
          file=sys.stderr, flush=True)
    records = [json.loads(line) for line in p.stdout.splitlines() if line.startswith('{')]
    if log:
        with open(log, 'a', encoding='utf-8') as f:
            f.write(json.dumps({'argv': argv, 'exit': p.returncode, 'seconds': seconds,
                                'load': load_average(), 'stderr': p.stderr[-2000:],
                                'records': records}) + '\n')
    if p.returncode != 0:
        sys.exit('tfm-bench-translator failed (exit %d):\n%s%s' % (p.returncode, p.stdout,
                                                                   p.stderr))
    return records


def by_mode(records, mode):
    return next(r for r in records if r.get('mode') == mode)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--build', required=True, help='the build directory')
    parser.add_argument('--model', default=os.path.join(ROOT, 'runs', 'translation',
                                                         'model.safetensors'))
    parser.add_argument('--data', default=os.path.join(ROOT, 'runs', 'translation', 'data'))
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--callers', type=int, default=32)
    parser.add_argument('--decoding-threads', type=int, default=8)
    parser.add_argument('--limit', type=int, help='the first N sources only')
    parser.add_argument('--int8', action='store_true')
    for flag in ('--workers', '--max-wait-ms', '--max-batch', '--max-batch-tokens'):
        parser.add_argument(flag, type=int, help="the translator's option (its default: unset)")
    parser.add_argument('--log', help='append every run\'s records (JSON lines) to FILE')
    a = parser.parse_args()

    program = os.path.join(a.build, 'bench', 'tfm-bench-translator')
    sources = os.path.join(a.data, 'test.en')
    for path, what in ((program, 'the bench (build it: ninja -C BUILD)'),
                       (a.model, 'the model (train it as the README says, or give --model)'),
                       (sources, 'the test sources (scripts/translation_data.py, or --data)')):
        if not os.path.exists(path):
            sys.exit('%s: no such file: %s' % (path, what))
    common = [program, '--model', a.model, '--sources', sources, '--threads', str(THREADS)]
    if a.limit:
        common += ['--limit', str(a.limit)]
    if a.int8:
        common.append('--int8')
    for name in ('workers', 'max_wait_ms', 'max_batch', 'max_batch_tokens'):
        if getattr(a, name) is not None:
            common += ['--' + name.replace('_', '-'), str(getattr(a, name))]

    print('CPU: %s; %d libtfm threads, OPENBLAS_NUM_THREADS=1' % (cpu_name(), THREADS))
    print('load average before: %s' % load_average())
    sys.stdout.flush()

    batched, callers, ratios, differ = [], [], [], 0
    for k in range(a.rounds):
        modes = [['--batched'], ['--callers', str(a.callers)]]
        records = run(common + sum(modes if k % 2 == 0 else modes[::-1], []), a.log)
        b, c = by_mode(records, 'batched'), by_mode(records, 'callers')
        check = next(r for r in records if r.get('check') == 'callers_equal_batched')
        batched.append(b)
        callers.append(c)
        ratios.append(c['sentences_per_s'] / b['sentences_per_s'])
        differ += check['differ']
        print('round %d: batched %.1f sentences/s (%.2f CPU s in %.2f s); %d callers %.1f '
              'sentences/s (%.2f CPU s in %.2f s), p50 %.1f ms, p99 %.1f ms, %d batches of %.1f; '
              'ratio %.2fx; %d texts differ' % (
                  k + 1, b['sentences_per_s'], b['cpu_seconds'], b['seconds'], a.callers,
                  c['sentences_per_s'], c['cpu_seconds'], c['seconds'], c['p50_ms'],
                  c['p99_ms'], c['batches'], c['mean_batch'], ratios[-1], check['differ']),
              flush=True)

    n = a.decoding_threads
    one = by_mode(run(common + ['--threads-decoding', '1'], a.log), 'threads_decoding')
    many = by_mode(run(common + ['--threads-decoding', str(n)], a.log), 'threads_decoding')

    best_b = max(batched, key=lambda r: r['sentences_per_s'])
    best_c = max(callers, key=lambda r: r['sentences_per_s'])
    print('load average after: %s' % load_average())
    print('rounds\' own ratios: %s (median %.2fx); callers\' texts differing from the batched '
          'call\'s: %d of %d' % (', '.join('%.2fx' % r for r in ratios),
                                statistics.median(ratios), differ,
                                sum(c['sentences'] for c in callers)))
    cpu_b = statistics.median(b['cpu_seconds'] for b in batched)
    cpu_c = statistics.median(c['cpu_seconds'] for c in callers)
    print('CPU seconds for the %d sentences (median): batched %.2f, callers %.2f: %.2fx the '
          'batched call\'s sentences per CPU second' % (batched[0]['sentences'], cpu_b, cpu_c,
                                                          cpu_b / cpu_c))
    print('concurrent callers: %.1f sentences/s, p50 %.1f ms, p99 %.1f ms: %.2fx of one batched '
          'call (%.1f sentences/s)' % (best_c['sentences_per_s'], best_c['p50_ms'],
                                       best_c['p99_ms'],
                                       best_c['sentences_per_s'] / best_b['sentences_per_s'],
                                       best_b['sentences_per_s']))
    mb = 1 / 1024
    weights = many['open_rss_kb'] * mb
    buffers = max(0.0, (one['peak_vmhwm_kb'] - one['open_rss_kb']) * mb)
    bound = weights + n * buffers
    limit = 1.1 * bound
    peak = many['peak_vmhwm_kb'] * mb
    print('%d decoding threads on one model: peak %.1f MB; weights %.1f MB + %d decodings\' '
          'buffers %.1f MB = %.1f MB (+10%%: limit %.1f MB): %s' % (
              n, peak, weights, n, n * buffers, bound, limit,
              'within' if peak <= limit else 'over'))
    return 1 if differ else 0


if __name__ == '__main__':
    sys.exit(main())
