"""What an unmerged adapter costs: sentences/s of the README's trained
model translating the test set's first N English messages through one
translator, with no adapter, with an adapter chosen per call (rank 8 on q,
v; rank 16 on every projection), and through a merged copy of each;
interleaved rounds, best of each. Then one training step over the
adapter alone against one over the whole model.
  usage: python3 bench/adapters.py [MODEL] [SOURCES] [N] [ROUNDS]"""
import sys
import time

import numpy as np

import tfm

MODEL = sys.argv[1] if len(sys.argv) > 1 else 'runs/translation/model.safetensors'
SOURCES = sys.argv[2] if len(sys.argv) > 2 else 'runs/translation/data/test.en'
N = int(sys.argv[3]) if len(sys.argv) > 3 else 200
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
ADAPTERS = {'r8': dict(rank=8, alpha=16, targets=('q', 'v')),
            'r16': dict(rank=16, alpha=32, targets=('q', 'k', 'v', 'o', 'ff_in', 'ff_out'))}


def with_adapters(model):
    for name, options in ADAPTERS.items():
        model.add_adapter(name, **options)
        store = model.adapter_params(name)
        rng = np.random.default_rng(1)
        store.load_state_dict({k: (rng.standard_normal(v.shape) * 0.02).astype(np.float32)
                               for k, v in store.state_dict().items()})
    return model


def main():
    texts = [line.rstrip('\n') for line in open(SOURCES, encoding='utf-8')][:N]
    model = with_adapters(tfm.Model.load(MODEL).eval())
    shared = tfm.Translator.from_model(model)
    merged = {}
    for name in ADAPTERS:
        copy = with_adapters(tfm.Model.load(MODEL).eval())
        copy.merge_adapter(name)
        merged[name] = tfm.Translator.from_model(copy)
    runs = {'none': lambda: shared.translate(texts)}
    for name in ADAPTERS:
        runs[name + ' unmerged'] = lambda name=name: shared.translate(texts, adapter=name)
        runs[name + ' merged'] = lambda name=name: merged[name].translate(texts)
    best, outputs = {}, {}
    for _ in range(ROUNDS):
        for label, run in runs.items():
            start = time.perf_counter()
            outputs[label] = run()
            best[label] = min(best.get(label, 1e9), time.perf_counter() - start)
    for label in runs:
        same = ''
        if label.endswith('unmerged'):
            twin = outputs[label.replace('unmerged', 'merged')]
            same = ', %d/%d texts as merged' % (
                sum(a == b for a, b in zip(outputs[label], twin)), len(texts))
        print('%-14s %6.1f sentences/s  %.3fx of none%s' % (
            label, len(texts) / best[label], best['none'] / best[label], same))
    # a training step: adapter alone against the whole model
    src = np.array([[5, 6, 7, 8, 9, 10, 11, 12] * 4] * 32, dtype=np.int32)
    tgt = src[:, :24]
    for label in ('whole model', 'r16 adapter', 'r8 adapter'):
        train = with_adapters(tfm.Model.load(MODEL))
        if label == 'whole model':
            optimizer = tfm.AdamW(train, lr=1e-4)
        else:
            name = label.split()[0]
            train.use_adapter(name)
            optimizer = tfm.AdamW(train.adapter_params(name), lr=1e-4)
        train.train()
        tape, times = tfm.Tape(), []
        for _ in range(4):
            start = time.perf_counter()
            with tape:
                loss = tfm.cross_entropy(train.forward(src, tgt, tgt_mask=tfm.causal_mask(24)),
                                         tgt)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            times.append(time.perf_counter() - start)
        print('train step, %-12s %.3f s (best of 4, batch 32 x 32 -> 24)' % (label, min(times)))


if __name__ == '__main__':
    main()
