"""The Python package's overhead: tutorial 003's training loop written in
Python (bindings/python/examples/taylor.py) against the C example
(tfm-taylor), same configuration and seed, alternated over rounds on one
thread (OPENBLAS_NUM_THREADS=1, libtfm's threads 1).

  /usr/bin/python3 bench/python_overhead.py [--build build] [--iterations 300] [--rounds 3]

Prints each run's iterations per second (training only) and the ratio of
the medians, Python / C."""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rate(argv, env):
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    rates = re.findall(r'([0-9.]+) it/s', out)
    if not rates:
        sys.exit('no rate in the output of %s' % ' '.join(argv))
    return float(rates[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--build', default=os.path.join(ROOT, 'build'))
    parser.add_argument('--iterations', type=int, default=300)
    parser.add_argument('--rounds', type=int, default=3)
    a = parser.parse_args()
    data = os.path.join(ROOT, 'data', 'taylor', 'seq2seq_series_2terms.txt')
    env = dict(os.environ, OPENBLAS_NUM_THREADS='1', PYTHONPATH=os.path.join(ROOT, 'bindings', 'python'),
               TFM_LIBRARY=os.path.join(a.build, 'lib', 'libtfm.so.0'))
    common = ['--data', data, '--iterations', str(a.iterations), '--step', str(a.iterations)]
    c_argv = [os.path.join(a.build, 'examples', 'tfm-taylor')] + common + [
        '--evaluate', '0', '--out', os.path.join(a.build, 'python_overhead_taylor')]
    py_argv = [sys.executable, os.path.join(ROOT, 'bindings', 'python', 'examples', 'taylor.py')] + \
        common + ['--translate', '0']
    c_rates, py_rates = [], []
    for r in range(a.rounds):
        c_rates.append(rate(c_argv, env))
        py_rates.append(rate(py_argv, env))
        print('round %d: C %.2f it/s, Python %.2f it/s' % (r + 1, c_rates[-1], py_rates[-1]),
              flush=True)
    c, py = statistics.median(c_rates), statistics.median(py_rates)
    print('median: C %.2f it/s, Python %.2f it/s; Python / C = %.3f (1 thread, %d iterations)'
          % (c, py, py / c, a.iterations))


if __name__ == '__main__':
    main()
