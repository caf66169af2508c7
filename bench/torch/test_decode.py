#!/usr/bin/python3
"""Checks bench/torch/decode.py's cached decoders against their twins
(bench/torch/bench.py), with the same random weights: greedy and beam search
through the cache give, token for token, what they give when every step
re-runs the twin's own forward over the whole prefix; at 003, greedy also
matches tutorial 003's translate loop, one source at a time. With int8,
every linear of the decoder is quantized.

  /usr/bin/python3 bench/torch/test_decode.py [-v]

Not in the meson suite: it needs PyTorch (Debian's python3-torch).
"""
import unittest
from unittest import mock

import torch
import torch.nn as nn

import decode as decode_module
from decode import SIZES, decode, make_decoder


class Recomputed:
    """The twin decoding without a cache: step() runs model(src, prefix) on
    the whole prefix and keeps its last position's logits."""

    def __init__(self, model):
        self.model = model

    def start(self, src):
        self.src, self.prefix = src, None

    def step(self, tokens):
        tokens = tokens.unsqueeze(1)
        self.prefix = tokens if self.prefix is None else torch.cat([self.prefix, tokens], 1)
        return self.model(self.src, self.prefix)[:, -1]

    def expand(self, index):
        self.src = self.src.index_select(0, index)
        self.prefix = self.prefix.index_select(0, index)

    reorder = expand


# a few sources, and at 002 (d 512, the source re-encoded every step) fewer
# steps, so that the recomputed reference stays a matter of seconds
CASES = {'003': dict(sources=4, max_length=84), 'avg': dict(sources=4, max_length=9),
         '002': dict(sources=2, max_length=8)}
BEAM = 4


def setup(config, precision='float32'):
    torch.manual_seed(1)
    case, size = CASES[config], SIZES[config]
    model, cached = make_decoder(config, precision, case['max_length'])
    src = torch.randint(1, size['src_vocab'], (case['sources'], size['src_len']))
    return model, cached, src, case['max_length']


class CachedAgainstRecomputed(unittest.TestCase):
    def check(self, config, beam):
        model, cached, src, n = setup(config)
        if config == '003':  # a padded source: the cross-attention's mask
            src[-1, 15:] = 0
        with torch.no_grad():
            expected = decode(Recomputed(model), src, n, beam)
        got = decode(cached, src, n, beam)
        self.assertEqual(got.shape, (src.shape[0], n))
        self.assertEqual(got.tolist(), expected.tolist())

    def test_003_greedy(self):
        self.check('003', 1)

    def test_003_beam(self):
        self.check('003', BEAM)

    def test_avg_greedy(self):
        self.check('avg', 1)

    def test_avg_beam(self):
        self.check('avg', BEAM)

    def test_002_greedy(self):
        self.check('002', 1)

    def test_002_beam(self):
        self.check('002', BEAM)

    def test_003_beam_through_matmul(self):
        """The attention's other way (torch.matmul, for wide heads and long
        keys), on tutorial 003's masks."""
        with mock.patch.object(decode_module, 'NARROW_HEAD', 0), \
                mock.patch.object(decode_module, 'ELEMENTWISE_MAX', 0):
            self.check('003', BEAM)

    def test_beam_differs_from_greedy(self):
        """Beam search is more than greedy on some row (else the beam tests
        above would not tell a beam search from a greedy one)."""
        _, cached, src, n = setup('003')
        self.assertNotEqual(decode(cached, src, n, BEAM).tolist(),
                            decode(cached, src, n, 1).tolist())


class TutorialLoop(unittest.TestCase):
    def test_003_greedy_equals_translate(self):
        """Tutorial 003's own loop (bench.py's Taylor.translate, one source at
        a time, the prefix re-run) gives the cached batch's tokens."""
        model, cached, src, n = setup('003')
        got = decode(cached, src, n, 1)
        with torch.no_grad():
            for i in range(src.shape[0]):
                loop = model.translate(src[i:i + 1], n)[1:]  # after <sos>
                self.assertEqual([int(x) for x in loop], got[i].tolist())


class Int8(unittest.TestCase):
    def test_every_linear_quantized(self):
        for config in CASES:
            _, cached, src, n = setup(config, 'int8')
            float_linears = [name for name, m in cached.named_modules()
                             if isinstance(m, nn.Linear)]
            if config == 'avg':  # nn.MultiheadAttention's, in the twin's encoder
                float_linears = [x for x in float_linears if '.self_attn.' not in x]
            self.assertEqual(float_linears, [], config)
            self.assertEqual(decode(cached, src, n, BEAM).shape, (src.shape[0], n))


if __name__ == '__main__':
    unittest.main()
