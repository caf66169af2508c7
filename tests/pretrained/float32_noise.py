#!/usr/bin/python3
"""How far float32 rounding alone moves each fixture's logits (needs torch,
so it is not in the meson suite): the twin run in float64 (weights, masks
and positions) against the twin in float32 on this machine and against
the float32 logits recorded in expected.safetensors, each as the largest
|a - b| / (1 + |b|), the measure of tests/test_pretrained.c.

    /usr/bin/python3 tests/pretrained/float32_noise.py

The suite's tolerances come from these figures: a float32 implementation
cannot be held closer to the recorded logits than the twin itself is when
it runs on another BLAS kernel.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "twins"))
sys.path.insert(0, HERE)

from common import load_safetensors, read_json  # noqa: E402
from make_fixtures import FAMILIES, TESTS  # noqa: E402


def largest_gap(a, b):
    return max(((x - y).abs() / (1 + y.abs())).max().item() for x, y in zip(a, b))


def main():
    torch.set_num_threads(1)
    plain_float = torch.Tensor.float
    for name, _, twin_module, _ in FAMILIES:
        folder = os.path.join(TESTS, name)
        cases = read_json(folder, "expected.json")["cases"]
        recorded = load_safetensors(os.path.join(folder, "expected.safetensors"))
        recorded = [recorded["logits.%d" % i].double() for i in range(len(cases))]
        # float64 throughout: the twins' masks and positions call .float()
        torch.set_default_dtype(torch.float64)
        torch.Tensor.float = lambda self: self.double()
        try:
            twin = twin_module.load(folder)
            for key in list(twin.model.weights):
                twin.model.weights[key] = twin.model.weights[key].double()
            exact = [twin.logits(c["input_ids"], c["decoder_input_ids"]) for c in cases]
        finally:
            torch.Tensor.float = plain_float
            torch.set_default_dtype(torch.float32)
        twin = twin_module.load(folder)
        here = [twin.logits(c["input_ids"], c["decoder_input_ids"]).double() for c in cases]
        print("%-12s float32 here from float64 %.3g, recorded from float64 %.3g, "
              "float32 here from recorded %.3g" % (name, largest_gap(here, exact),
                                                   largest_gap(recorded, exact),
                                                   largest_gap(here, recorded)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
