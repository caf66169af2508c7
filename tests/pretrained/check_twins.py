#!/usr/bin/python3
"""Self-check of the twins against the committed fixture folders (needs
torch, so it is not in the meson suite):

    /usr/bin/python3 tests/pretrained/check_twins.py

For every folder: the twin's tokenizer gives the recorded input ids and
labels and decodes the labels back to the target text; its logits are
expected.safetensors' within test_pretrained.c's rule (2e-5 of 1 + |logit|,
T5 v1.1's 4e-5: the fixtures were recorded on another CPU, and float32
products sum in the order of the CPU's BLAS kernels); its greedy and beam
outputs and texts equal expected.json, their scores and margins within
the same rule; and a second twin read from the same folder gives
bit-identical logits and outputs. Exits 1 on the first
folder that differs, naming what differs.

    /usr/bin/python3 tests/pretrained/check_twins.py --saved

reads each folder as libtfm saves it back
(tfm.Model.from_pretrained(folder).save_pretrained(...), in one file and
in shards) with the twins, which read transformers' layout as its
modeling code does, and requires bit-identical results to the twin of the
original folder (tokens, texts, scores, logits). Needs the tfm package
importable (PYTHONPATH).
"""
import os
import sys
import tempfile
import unicodedata

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "twins"))

from common import load_safetensors, read_json  # noqa: E402
from make_fixtures import FAMILIES, TESTS  # noqa: E402


def run(twin, expected):
    """What the twin computes for each recorded case."""
    results = []
    for case in expected["cases"]:
        greedy = twin.generate(case["input_ids"], **case["greedy"]["options"])
        beam = twin.generate(case["input_ids"], **case["beam"]["options"])
        results.append({
            "input_ids": twin.tokenizer.encode(case["source"], language=expected["source_language"]),
            "labels": twin.tokenizer.encode(case["target"], language=expected["target_language"], target=True),
            "logits": twin.logits(case["input_ids"], case["decoder_input_ids"]),
            "greedy": {"ids": greedy[0], "text": twin.decode(greedy[0]), "min_margin": greedy[2]},
            "beam": {"ids": beam[0], "text": twin.decode(beam[0]), "score": beam[1], "min_margin": beam[2]},
        })
    return results


# test_pretrained.c's tolerance(): of 1 + |value|
T5_V1_1 = ("t5", "t5/narrow")


def compare(name, expected, logits, results):
    tolerance = 4e-5 if name in T5_V1_1 else 2e-5
    problems = []
    for number, (case, got) in enumerate(zip(expected["cases"], results)):
        where = "%s case %d" % (name, number)
        for field in ["input_ids", "labels"]:
            if got[field] != case[field]:
                problems.append("%s: %s %s, expected %s" % (where, field, got[field], case[field]))
        recorded = logits["logits.%d" % number]
        difference = ((got["logits"] - recorded).abs() / (1 + recorded.abs())).max().item()
        if difference > tolerance:
            problems.append("%s: logits differ by %g of 1 + |logit|" % (where, difference))
        for kind in ["greedy", "beam"]:
            for field, value in got[kind].items():
                wanted = case[kind][field]
                if isinstance(value, float) and isinstance(wanted, float):
                    close = abs(value - wanted) <= tolerance * (1 + abs(wanted))
                else:
                    close = value == wanted
                if not close:
                    problems.append("%s: %s %s %r, expected %r" % (where, kind, field, value, wanted))
    return problems


def roundtrip(name, twin, expected):
    """The labels decode to the target text, for the cases every character
    of which the tokenizer knows (the last case holds one it does not); the
    SentencePiece models normalise it first (nmt_nfkc: NFKC, so a no-break
    space comes back as a space)."""
    problems = []
    for number, case in enumerate(expected["cases"][:-1]):
        text = twin.decode(case["labels"])
        if text not in [case["target"], unicodedata.normalize("NFKC", case["target"])]:
            problems.append("%s case %d: labels decode to %r, not %r" % (name, number, text, case["target"]))
    return problems


def identical(name, first, second):
    problems = []
    for number, (a, b) in enumerate(zip(first, second)):
        if not torch.equal(a["logits"], b["logits"]) or {k: v for k, v in a.items() if k != "logits"} != \
                {k: v for k, v in b.items() if k != "logits"}:
            problems.append("%s case %d: a second twin of the folder gives other results" % (name, number))
    return problems


def check(name, folder, twin_module, expected, logits):
    """The twin read from folder against the fixture's expected results."""
    first = run(twin_module.load(folder), expected)
    second = run(twin_module.load(folder), expected)
    problems = compare(name, expected, logits, first) + roundtrip(name, twin_module.load(folder), expected) + \
        identical(name, first, second)
    for problem in problems:
        print(problem)
    return problems


def saved_copies(folder, scratch):
    """The folder as libtfm saves it back: in one file, and in shards."""
    import tfm
    model = tfm.Model.from_pretrained(folder)
    os.makedirs(scratch)
    whole, sharded = os.path.join(scratch, "whole"), os.path.join(scratch, "sharded")
    model.save_pretrained(whole)
    size = os.path.getsize(os.path.join(whole, "model.safetensors"))
    model.save_pretrained(sharded, max_shard_bytes=size // 3)
    return [whole, sharded]


def main():
    failed = False
    saved = "--saved" in sys.argv[1:]
    scratch = tempfile.TemporaryDirectory() if saved else None
    for name, _, twin_module, _ in FAMILIES:
        source = os.path.join(TESTS, name)
        expected = read_json(source, "expected.json")
        logits = load_safetensors(os.path.join(source, "expected.safetensors"))
        folders = saved_copies(source, os.path.join(scratch.name, name.replace("/", "_"))) \
            if saved else [source]
        reference = run(twin_module.load(source), expected) if saved else None
        for folder in folders:
            if saved:
                problems = identical("%s saved %s" % (name, os.path.basename(folder)), reference,
                                     run(twin_module.load(folder), expected))
                for problem in problems:
                    print(problem)
            else:
                problems = check(name, folder, twin_module, expected, logits)
            failed = failed or bool(problems)
            print("%s%s: %s (%d cases)" % (name, " saved " + os.path.basename(folder) if saved else "",
                                           "differs" if problems else "ok", len(expected["cases"])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
