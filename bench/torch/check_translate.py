#!/usr/bin/python3
"""Checks bench/torch/translate.py's twin against libtfm with the same
weights: MODEL (a tfm-translate --out file) read by libtfm (tfm.Model.load)
and mapped onto the twin, then

- the loss of one training batch (tfm.batch_plan's first of the
  validation pairs, as the twin's training builds them; dropout off):
  libtfm's forward and label-smoothed cross entropy (the tfm package)
  against the twin's, within --tolerance relative;
- the greedy translations of the first --sentences test sentences: the
  twin's cached batched decoder against tfm-translate's (--tfm-translate
  BUILD/examples/tfm-translate), line for line.

  check_translate.py --model MODEL --tfm-translate BUILD/examples/tfm-translate
      [--vocab VOCAB.model] [--data DIR]

Prints each check's figures and "ok" or "FAILED"; exits 1 on a failure.
Not in the meson suite: it needs PyTorch. Environment as translate.py's.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

import tfm
from translate import (PAD, Batches, CachedTwin, Vocabulary, decoding_flags, load_libtfm,
                       read_lines, translate_lines, usable_pairs)


def batch_losses(model_path, twin, max_len, vocab, a):
    """(libtfm's loss, the twin's) on the validation pairs' first batch."""
    sources, targets, _ = usable_pairs(
        vocab.encode(read_lines(os.path.join(a.data, 'validation.en'))),
        vocab.encode(read_lines(os.path.join(a.data, 'validation.fr'))), max_len)
    src, tgt_in, labels = next(iter(Batches(sources, targets, a.max_tokens, seed=0)))
    causal = np.triu(np.ones((tgt_in.shape[1],) * 2, bool), 1)
    with tfm.Model.load(model_path) as model, tfm.Tape():
        model.eval()
        logits = model.forward(src.numpy(), tgt_in.numpy(), tgt_mask=causal,
                               src_key_padding_mask=(src == PAD).numpy(),
                               memory_key_padding_mask=(src == PAD).numpy())
        ours = float(tfm.cross_entropy(logits, labels.numpy(), ignore_index=PAD,
                                       label_smoothing=a.label_smoothing).numpy()[0])
    with torch.no_grad():
        logits = twin(src, tgt_in)
        theirs = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                                 ignore_index=PAD, label_smoothing=a.label_smoothing).item()
    return ours, theirs, tuple(src.shape), tuple(tgt_in.shape)


def libtfm_greedy(a, lines):
    out = subprocess.run([a.tfm_translate, '--model', a.model, '--beam', '1'],
                         input=''.join(line + '\n' for line in lines), capture_output=True,
                         text=True, check=True)
    return out.stdout.splitlines()


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--model', required=True, help="tfm-translate's --out file")
    p.add_argument('--vocab', help='the tokenizer, when the model file carries none')
    p.add_argument('--tfm-translate', required=True, help='the tfm-translate program')
    p.add_argument('--data', default='runs/translation/data')
    p.add_argument('--sentences', type=int, default=20)
    p.add_argument('--max-tokens', type=int, default=4000)
    p.add_argument('--label-smoothing', type=float, default=0.1)
    p.add_argument('--tolerance', type=float, default=1e-4)
    decoding_flags(p)
    a = p.parse_args()
    a.beam = 1
    torch.set_num_threads(2)
    vocab = Vocabulary.of_model(a.model, a.vocab)
    twin, options = load_libtfm(a.model)
    failed = 0

    ours, theirs, src_shape, tgt_shape = batch_losses(a.model, twin, options['max_src_len'], vocab, a)
    relative = abs(ours - theirs) / abs(ours)
    ok = relative <= a.tolerance
    failed += not ok
    print('loss of a batch (source %s, target %s): libtfm %.7f, twin %.7f, relative '
          'difference %.2e (within %g): %s' % (src_shape, tgt_shape, ours, theirs, relative,
                                               a.tolerance, 'ok' if ok else 'FAILED'))

    lines = read_lines(os.path.join(a.data, 'test.en'))[:a.sentences]
    twin_lines, _ = translate_lines(CachedTwin(twin).eval(), vocab, lines, a,
                                    options['max_tgt_len'])
    libtfm_lines = libtfm_greedy(a, lines)
    differ = [i for i, (x, y) in enumerate(zip(twin_lines, libtfm_lines)) if x != y]
    ok = len(libtfm_lines) == len(lines) and not differ
    failed += not ok
    print('greedy translations of %d test sentences: %d equal to tfm-translate\'s: %s'
          % (len(lines), len(lines) - len(differ), 'ok' if ok else 'FAILED'))
    for i in differ:
        print('  %d: %s\n     twin:   %s\n     libtfm: %s' % (i, lines[i], twin_lines[i],
                                                               libtfm_lines[i]))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
