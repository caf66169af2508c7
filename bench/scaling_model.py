"""docs/scaling.md's model of data-parallel training on N ranks.

A step on N ranks is its compute on the rank's slice, then one ring
allreduce of the gradients (libtfm_mpi does not overlap the two):

    T_step(N, b) = c * b + 2 (N - 1) alpha + 2 (N - 1) / N * bytes / bandwidth

with c the compute seconds per sample on one core (measured), b the
samples per rank, bytes = 4 x the parameter count, alpha the latency of
one message and bandwidth the link's. Efficiency is c * b / T_step: the
share of a step spent computing. The batch a rank needs for 90% is
b >= 9 * T_allreduce / c.

  /usr/bin/python3 bench/scaling_model.py --allreduce ALLREDUCE.txt \\
      --step 003=MS/BATCH --step avg=MS/BATCH --step 002=MS/BATCH

ALLREDUCE.txt is tfm-allreduce's output on this machine (its loopback fit
is printed for reference; the networks' figures are the stated ones).
"""
import argparse
import math

PARAMETERS = {'003': 180_646, 'avg': 2_779_918, '002': 51_825_544}  # tfm_model_parameter_count
TUTORIAL_BATCH = {'003': 32, 'avg': 32, '002': 64}
NETWORKS = {  # name: (bytes per second, seconds per message)
    '10 Gbit/s Ethernet (TCP, 25 us)': (10e9 / 8, 25e-6),
    '100 Gbit/s (RDMA, 3 us)': (100e9 / 8, 3e-6),
}
RANKS = (8, 64, 512)


def fit(path):
    """The 2-rank allreduce's latency (the smallest message's time) and
    bandwidth (the best bytes per second of the large messages)."""
    points = sorted(tuple(map(float, line.split()[:2])) for line in open(path)
                    if line.strip() and not line.startswith('#'))
    return points[0][1], max(b / t for b, t in points[len(points) // 2:])


def allreduce_seconds(ranks, nbytes, bandwidth, alpha):
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes / bandwidth


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--allreduce', required=True)
    parser.add_argument('--step', action='append', required=True,
                        help='CONFIG=MS/BATCH: one core\'s step time at that batch')
    a = parser.parse_args()
    alpha, bandwidth = fit(a.allreduce)
    print('Loopback (2 ranks, this machine): alpha %.1f us, %.2f GB/s' % (alpha * 1e6,
                                                                        bandwidth / 1e9))
    per_sample = {}
    for item in a.step:
        config, value = item.split('=')
        ms, batch = value.split('/')
        per_sample[config] = float(ms) / 1000 / float(batch)
    print()
    print('| config | parameters | MB | compute ms/sample (1 core) | network | ranks | '
          'allreduce ms | efficiency at the tutorial\'s batch per rank | batch per rank for '
          '90% | global batch for 90% |')
    print('| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |')
    for config, c in per_sample.items():
        nbytes = 4 * PARAMETERS[config]
        b = TUTORIAL_BATCH[config]
        for network, (bw, lat) in NETWORKS.items():
            for ranks in RANKS:
                t = allreduce_seconds(ranks, nbytes, bw, lat)
                efficiency = c * b / (c * b + t)
                need = max(1, math.ceil(9 * t / c))
                print('| %s | %d | %.1f | %.2f | %s | %d | %.2f | %.1f%% | %d | %d |' % (
                    config, PARAMETERS[config], nbytes / 1e6, c * 1e3, network, ranks, t * 1e3,
                    100 * efficiency, need, need * ranks))


if __name__ == '__main__':
    main()
