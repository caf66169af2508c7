"""Tutorial 003 from Python: a transformer learns Taylor expansions
(data/taylor/seq2seq_series_2terms.txt), then translates the test set.

The data, the model, its initialisation, the batch order and the monitored
losses are those of the C example (examples/taylor.c with its defaults:
the notebook's recipe), so with the same seed and iterations both print the
same loss curve:

    python3 taylor.py --iterations 3000
    tfm-taylor --iterations 3000 --evaluate 0     # the same losses

Translation is greedy over the test set, scored as the notebook scores it
(the C example also runs the notebook's 85th decoding step for the few
outputs that reach the length cap without <eos>; this one does not).
"""
import argparse
import math
import os
import re
import time

import numpy as np

import tfm

PAD, SOS, EOS = 0, 1, 2
MAX_SEQ_LEN, TRAIN_SIZE, TEST_SIZE = 85, 11000, 750
TOKEN = re.compile(r'O\(x\*\*6\)|\*\*|\*|\+|-|/|\(|\)|[1-9]\.0|[0-9]|[a-zA-Z]+')
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = [os.path.join(HERE, '..', '..', '..', 'data', 'taylor', 'seq2seq_series_2terms.txt'),
        '/usr/local/share/tfm/taylor/seq2seq_series_2terms.txt',
        '/usr/share/tfm/taylor/seq2seq_series_2terms.txt']


def tokens_of(text, line_number):
    found = TOKEN.findall(text)
    if ''.join(found) != text:
        raise ValueError('line %d: a character no token covers' % line_number)
    return found


def vocabulary(columns):
    """The digits and every token, in byte order, after <pad> <sos> <eos>."""
    tokens = set('0123456789')
    for column in columns:
        tokens.update(column)
    return ['<pad>', '<sos>', '<eos>'] + sorted(tokens)


def length_cap(counts, max_len):
    mean = sum(counts) / len(counts)
    var = sum(n * n for n in counts) / len(counts) - mean * mean
    avg, std = math.floor(mean + 0.5), math.floor(math.sqrt(max(var, 0.0)) + 0.5)
    return min(avg + 3 * std, max(counts), max_len)


def load_data(path):
    """Rows of <sos> + codes + <pad>s + <eos> for the pairs within the caps,
    as data/taylor/FORMAT.md specifies."""
    sources, targets = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            source, target = line.strip().split('|')
            sources.append(tokens_of(source, number))
            targets.append(tokens_of(target, number))
    vocab = [vocabulary(sources), vocabulary(targets)]
    caps = [length_cap([len(t) for t in side], MAX_SEQ_LEN - 2) for side in (sources, targets)]
    rows = [[], []]
    for pair in zip(sources, targets):
        if len(pair[0]) > caps[0] or len(pair[1]) > caps[1]:
            continue
        for side in (0, 1):
            code = {token: i for i, token in enumerate(vocab[side])}
            tokens = pair[side]
            rows[side].append([SOS] + [code[t] for t in tokens] +
                              [PAD] * (caps[side] - len(tokens)) + [EOS])
    return vocab, np.array(rows[0], np.int32), np.array(rows[1], np.int32)


def build_model(src_vocab, tgt_vocab, src_len, tgt_len, seed, d_model=64):
    model = tfm.Model(src_vocab=src_vocab, tgt_vocab=tgt_vocab, max_src_len=src_len,
                      max_tgt_len=tgt_len, positions='learned', embedding_scale='trainable',
                      encoder_layers=2, decoder_layers=2, final_norm=0, d_model=d_model,
                      heads=8, d_ff=128, dropout=0.1, fused_qkv=0, trainable_scale=1,
                      scale_init=math.sqrt(d_model), seed=seed)
    # The notebook's layers are nn.Linear's U(-1/sqrt(in), 1/sqrt(in)).
    init = tfm.Rng(seed + 1)
    for name in model.params.names():
        weight = model.params[name]
        if name.startswith(('encoder.', 'decoder.')) and weight.ndim == 2:
            bound = 1.0 / math.sqrt(weight.shape[1])
            tfm.check(tfm.lib.tfm_init_uniform(weight._ptr(), -bound, bound, init._ptr()))
    return model


def shuffle(values, rng):
    for i in range(len(values) - 1, 0, -1):
        j = rng.next_u64() % (i + 1)
        values[i], values[j] = values[j], values[i]


def batch_loss(model, src, tgt_in, tgt_out):
    src_mask = tfm.padding_mask(src, PAD)
    tgt_mask = tfm.combine_masks(tfm.padding_mask(tgt_in, PAD),
                                 tfm.causal_mask(tgt_in.shape[1], additive=False))
    logits = model.forward(src, tgt_in, src_mask=src_mask, tgt_mask=tgt_mask,
                           memory_mask=src_mask)
    return tfm.cross_entropy(logits, tgt_out, ignore_index=PAD)


def eval_loss(model, rows_src, rows_tgt):
    model.eval()
    with tfm.Tape(recording=False):
        value = batch_loss(model, rows_src, rows_tgt[:, :-1], rows_tgt[:, 1:]).item()
    model.train()
    return value


def train(model, src, tgt, iterations, step, seed, batch=32):
    train_rows = list(range(TRAIN_SIZE))
    val_rows = np.arange(TRAIN_SIZE, len(src) - TEST_SIZE)
    rng = tfm.Rng(seed + 2)  # the C example's: monitor sample, then the epochs' order
    monitor = np.array([rng.next_u64() % TRAIN_SIZE for _ in range(len(val_rows))])
    adam = tfm.Adam(model, lr=2e-4, beta2=0.999)
    per_epoch, cursor, tape = TRAIN_SIZE // batch, TRAIN_SIZE // batch, tfm.Tape()
    start = time.monotonic()
    for done in range(1, iterations + 1):
        if cursor == per_epoch:
            shuffle(train_rows, rng)
            cursor = 0
        rows = train_rows[cursor * batch:(cursor + 1) * batch]
        cursor += 1
        with tape:
            adam.zero_grad()
            loss = batch_loss(model, src[rows], tgt[rows, :-1], tgt[rows, 1:])
            lr = adam.lr
            loss.backward()
            adam.step()
        if done % step and done != iterations:
            continue
        rate = done / (time.monotonic() - start)  # training only, as the C example's
        train_loss = eval_loss(model, src[monitor], tgt[monitor])
        val_loss = eval_loss(model, src[val_rows], tgt[val_rows])
        print('%8d  train %.4f  val %.4f  lr %.2e  %.1f it/s' % (done, train_loss, val_loss, lr,
                                                                rate), flush=True)


def translate(model, vocab, src, tgt, count):
    rows = np.arange(len(src) - TEST_SIZE, len(src))[:count]
    model.eval()
    tokens = model.greedy(src[rows], max_length=tgt.shape[1] - 1, bos_id=SOS, eos_id=EOS,
                          src_pad_id=PAD)
    words = vocab[1]

    def text(codes):
        return ''.join(words[c] for c in codes if c not in (PAD, SOS, EOS) and c >= 0)
    correct = sum(text(out) == text(want) for out, want in zip(tokens, tgt[rows]))
    accuracy = correct / len(rows)
    print('%d of %d correct\nAccuracy: %8.3f +/- %.3f' % (
        correct, len(rows), accuracy, math.sqrt(accuracy * (1 - accuracy) / len(rows))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data', default=next((p for p in DATA if os.path.exists(p)), DATA[0]))
    parser.add_argument('--iterations', type=int, default=3000)
    parser.add_argument('--step', type=int, default=100, help='monitor every this many')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--threads', type=int, default=1, help="libtfm's own threads")
    parser.add_argument('--translate', type=int, default=TEST_SIZE,
                        help='test functions to translate (0: none)')
    a = parser.parse_args()
    tfm.set_num_threads(a.threads)
    vocab, src, tgt = load_data(a.data)
    print('Data: %d pairs kept; source %d x %d codes, target %d x %d' % (
        len(src), len(vocab[0]), src.shape[1], len(vocab[1]), tgt.shape[1]))
    model = build_model(len(vocab[0]), len(vocab[1]), src.shape[1], tgt.shape[1], a.seed)
    train(model, src, tgt, a.iterations, a.step, a.seed)
    if a.translate:
        translate(model, vocab, src, tgt, a.translate)


if __name__ == '__main__':
    main()
