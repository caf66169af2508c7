#!/usr/bin/python3
"""The PyTorch twin of tfm-translate's English -> French model (issue 30):
the same model, vocabulary, batches, loss, optimizer and schedule, written
the way a PyTorch user writes them, to hold libtfm's speed against.

  translate.py train --data DIR --vocab FILE.model [--steps N | --minutes M]
      [--threads 2] [--precision float32|bfloat16] [shape and recipe flags]
  translate.py translate --data DIR --model FILE [--vocab FILE.model] [--beam 4]
      [--batch 64] [--threads 2] [--out HYP]

train: the vocabulary is tfm-translate's (its --save-vocab file, read with
python3-sentencepiece; the ids are checked against libtfm's own tokenizer,
tfm.Tokenizer, on every line encoded); the batches are libtfm's (the same
pairs skipped, tfm.batch_plan, pad and shift_targets from the same seed,
so the twin sees tfm-translate's batches in its order); the model is
nn.Transformer (pre-norm, final norms) between one embedding table shared
by source and target, scaled by sqrt(d) plus libtfm's interleaved
sinusoidal positions, and the output projection tied to that table (its
own bias, as libtfm's generator.bias); label-smoothed cross entropy over
the non-pad labels, AdamW (betas 0.9 and 0.98, eps 1e-9, no weight decay
for vectors) with warm-up then 1/sqrt decay (tfm_optimizer's
warmup_invsqrt), clipping by the global norm. bfloat16: the forward under
torch.autocast('cpu', torch.bfloat16), the loss in float32. Prints the
shapes and parameter count, a progress line per --log-every steps, and at
the end one JSON line: target tokens (labels that are not <pad>) per second
over all the steps, as tfm-translate counts them, and peak RSS.

translate: MODEL is libtfm's model file (tfm-translate --out; read through
the tfm package and mapped onto the twin by name: nn.Transformer's names
are libtfm's), so that both sides translate with the same weights, and its
tokenizer is the one the file carries (else --vocab). The test sources are
sorted by length and decoded --batch at a time by the cached decoder of
bench/torch/decode.py (keys and values cached per layer, the
cross-attention's once per batch, inference_mode), never generating <s> or
<pad> (tfm-translate's suppress_ids): greedy, or beam search as libtfm's
(the best min(beam, beam - finished) continuations each step, those ending
in </s> finish, a source stops at `beam` finished or at its length limit,
floor(2n) + 10 tokens for n source tokens as tfm-translate sets it; scores
over length ** length_penalty); a source that is done leaves the batch.
--precision int8 quantizes the decoder and encoder first, PyTorch's way
(torch.ao.quantization.quantize_dynamic on every nn.Linear, the generator
too, as tfm-translate --int8 quantizes libtfm's). Scored with libtfm's
chrF and BLEU (tfm.chrf, tfm.bleu), as tfm-translate scores. One JSON line: sentences and tokens per second, chrF, BLEU.

Run as /usr/bin/python3 (Debian's python3-torch) with OMP_WAIT_POLICY=passive
and OMP_NUM_THREADS set, as bench/translate.py does, and the tfm package
importable (PYTHONPATH=bindings/python, TFM_LIBRARY=BUILD/lib/libtfm.so.0).
"""
import argparse
import base64
import json
import math
import os
import resource
import sys
import time

import numpy as np
import sentencepiece
import torch
import torch.nn as nn
import torch.nn.functional as F

import tfm
from decode import CachedDecoder, cached_layers, linear_from

# tfm-translate's ids (its vocabulary trainer's): <unk> 0, <s> 1, </s> 2, <pad> 3
BOS, EOS, PAD = 1, 2, 3
NEVER = [BOS, PAD]  # never generated: tfm-translate's suppress_ids


def read_lines(path):
    with open(path, encoding='utf-8') as f:
        return f.read().splitlines()


# --- the vocabulary --------------------------------------------------------------------


class Vocabulary:
    """tfm-translate's SentencePiece model through python3-sentencepiece,
    the PyTorch user's tokenizer, with libtfm's reading of the same bytes
    beside it to check that the ids are the same."""

    def __init__(self, model_bytes):
        self.spm = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)
        self.libtfm = tfm.Tokenizer.from_bytes(model_bytes)
        if self.spm.get_piece_size() != self.libtfm.vocab_size:
            sys.exit('vocabulary: sentencepiece reads %d pieces, libtfm %d'
                     % (self.spm.get_piece_size(), self.libtfm.vocab_size))
        self.size = self.spm.get_piece_size()
        self.checked = 0

    @classmethod
    def of_model(cls, path, vocab=None):
        """The tokenizer a libtfm model file carries (tfm_model_set_tokenizers:
        base64 in its "tfm.tokenizer" metadata), else the file vocab."""
        carried = tfm.metadata(path).get('tfm.tokenizer')
        if carried is None and vocab is None:
            sys.exit('%s carries no tokenizer: give --vocab' % path)
        if carried is not None:
            return cls(base64.b64decode(carried))
        with open(vocab, 'rb') as f:
            return cls(f.read())

    def encode(self, lines):
        """Each line's ids; exits at the first line whose ids libtfm's
        tokenizer gives otherwise."""
        ids = self.spm.encode(lines)
        for line, ours, theirs in zip(lines, ids, self.libtfm.encode(lines)):
            if ours != theirs:
                sys.exit('vocabulary: %r: sentencepiece %s, tfm.Tokenizer %s'
                         % (line, ours, theirs))
        self.checked += len(lines)
        return ids

    def decode(self, ids):
        return self.spm.decode(ids)


# --- the model -------------------------------------------------------------------------


def sinusoidal(max_len, d_model):
    """libtfm's table (lib/nn/positions.c): columns 2i and 2i + 1 are the
    sine and cosine of position * exp(-2i ln(10000) / d)."""
    j = np.arange(d_model)
    freq = np.exp((j - j % 2) * (-math.log(10000.0) / d_model))
    angle = np.arange(max_len)[:, None] * freq[None, :]
    return torch.from_numpy(np.where(j % 2, np.cos(angle), np.sin(angle)).astype(np.float32))


class TranslationTwin(nn.Module):
    """tfm_model with share_embeddings, embedding_scale sqrt_d, sinusoidal
    positions, norm_first, final_norm and tie_generator: parameter names
    transformer.* are libtfm's without the prefix, embedding.weight is its
    src_embedding.weight and generator_bias its generator.bias."""

    def __init__(self, vocab, d_model, heads, layers, d_ff, dropout, max_src_len,
                 max_tgt_len):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout,
                                          batch_first=True, norm_first=True)
        self.generator_bias = nn.Parameter(torch.zeros(vocab))
        self.embedding_dropout = nn.Dropout(dropout)
        self.register_buffer('positions', sinusoidal(max(max_src_len, max_tgt_len), d_model),
                             persistent=False)
        # libtfm's tied table: N(0, 1/d_model), as fairseq's
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)

    def embed(self, ids):
        x = self.embedding(ids) * math.sqrt(self.d_model) + self.positions[:ids.shape[1]]
        return self.embedding_dropout(x)

    def forward(self, src, tgt_in):
        """Logits [B, T, vocab]: the sources' <pad> keys masked out, the
        targets' only by the causal mask (as tfm-translate: their pads
        follow their tokens, and the loss ignores the pads' rows)."""
        src_pad = src == PAD
        causal = torch.triu(torch.ones(tgt_in.shape[1], tgt_in.shape[1], dtype=torch.bool), 1)
        memory = self.transformer.encoder(self.embed(src), src_key_padding_mask=src_pad)
        out = self.transformer.decoder(self.embed(tgt_in), memory, tgt_mask=causal,
                                       memory_key_padding_mask=src_pad)
        return F.linear(out, self.embedding.weight, self.generator_bias)

    # libtfm's names for the twin's parameters
    def libtfm_name(self, name):
        if name.startswith('transformer.'):
            return name[len('transformer.'):]
        return {'embedding.weight': 'src_embedding.weight',
                'generator_bias': 'generator.bias'}[name]


def twin_like(options):
    """A twin of a libtfm model's options (tfm.Model.options)."""
    for name, wanted in (('share_embeddings', 1), ('tie_generator', 1), ('norm_first', 1),
                         ('final_norm', 1), ('positions', 'sinusoidal'),
                         ('embedding_scale', 'sqrt_d'), ('activation', 'relu'), ('bias', 1)):
        if options[name] != wanted:
            sys.exit('the twin is of a model with %s %r, not %r' % (name, wanted, options[name]))
    if options['encoder_layers'] != options['decoder_layers']:
        sys.exit('the twin has as many decoder layers as encoder layers')
    return TranslationTwin(options['src_vocab'], options['d_model'], options['heads'],
                           options['encoder_layers'], options['d_ff'], options['dropout'],
                           options['max_src_len'], options['max_tgt_len'])


def load_libtfm(path):
    """(the twin holding a libtfm model file's weights, in eval mode, the
    libtfm model's options)."""
    with tfm.Model.load(path) as model:
        options, state = model.options, model.state_dict()
    twin = twin_like(options)
    theirs = set(state)
    with torch.no_grad():
        for name, parameter in twin.named_parameters():
            parameter.copy_(torch.from_numpy(state[twin.libtfm_name(name)]))
            theirs.discard(twin.libtfm_name(name))
    if theirs:
        sys.exit('%s has parameters the twin lacks: %s' % (path, sorted(theirs)))
    return twin.eval(), options


# --- batches ---------------------------------------------------------------------------


def usable_pairs(sources, targets, max_len):
    """tfm-translate's pairs: those with a side of no ids, a source of more
    than max_len ids or a target of more than max_len - 1 are skipped.
    (sources, targets, pairs skipped)."""
    kept = [(x, y) for x, y in zip(sources, targets)
            if x and y and len(x) <= max_len and len(y) <= max_len - 1]
    return [x for x, _ in kept], [y for _, y in kept], len(sources) - len(kept)


class Batches:
    """tfm-translate's training batches: tfm.batch_plan over the (source,
    target + 1) lengths with max_tokens, from an Rng seeded with seed + 1
    and carried from epoch to epoch; tensors from tfm.pad and
    tfm.shift_targets (sources as they are: no </s>)."""

    def __init__(self, sources, targets, max_tokens, seed):
        self.sources, self.targets = tfm.Corpus(sources), tfm.Corpus(targets)
        self.max_tokens, self.rng = max_tokens, tfm.Rng(seed + 1)
        self.epoch, self.plan = 0, []

    def __iter__(self):
        while True:
            if not self.plan:
                self.epoch += 1
                self.plan = tfm.batch_plan(self.sources.lengths, self.targets.lengths + 1,
                                           self.max_tokens, rng=self.rng)[::-1]
            rows = self.plan.pop()
            with tfm.pad(self.sources, rows, PAD) as src:
                src = torch.from_numpy(src.numpy()).long()
            tgt_in, labels = tfm.shift_targets(self.targets, rows, BOS, EOS, PAD)
            with tgt_in, labels:
                yield src, torch.from_numpy(tgt_in.numpy()).long(), \
                    torch.from_numpy(labels.numpy()).long()


# --- training ----------------------------------------------------------------------------


def warmup_invsqrt(warmup):
    """tfm_optimizer's TFM_SCHEDULE_WARMUP_INVSQRT as a LambdaLR factor:
    min(s / w, sqrt(w / s)) at step s = steps done + 1."""
    return lambda done: min((done + 1) / warmup, math.sqrt(warmup / (done + 1)))


def train(a):
    torch.manual_seed(a.seed)
    with open(a.vocab, 'rb') as f:
        vocab = Vocabulary(f.read())
    src, tgt, skipped = usable_pairs(vocab.encode(read_lines(os.path.join(a.data, 'train.en'))),
                                     vocab.encode(read_lines(os.path.join(a.data, 'train.fr'))),
                                     a.max_len)
    print('vocabulary: %d pieces; sentencepiece and tfm.Tokenizer give the same ids on all '
          '%d lines; %d training pairs (%d skipped)' % (vocab.size, vocab.checked, len(src),
                                                        skipped), flush=True)
    # tfm-translate's lengths: max_len source positions, one more for targets (<s>)
    twin = TranslationTwin(vocab.size, a.d_model, a.heads, a.layers, a.d_ff, a.dropout,
                           a.max_len, a.max_len + 1).train()
    libtfm = tfm.Model(src_vocab=vocab.size, tgt_vocab=vocab.size, max_src_len=a.max_len,
                       max_tgt_len=a.max_len + 1, share_embeddings=1, tie_generator=1,
                       embedding_scale='sqrt_d', norm_first=1, d_model=a.d_model, heads=a.heads,
                       encoder_layers=a.layers, decoder_layers=a.layers, d_ff=a.d_ff,
                       dropout=a.dropout)
    count = sum(p.numel() for p in twin.parameters())
    print('model: d %d, %d heads, %d+%d layers, d_ff %d, vocabulary %d: %d parameters '
          '(libtfm\'s tfm_model of the same options: %d)'
          % (a.d_model, a.heads, a.layers, a.layers, a.d_ff, vocab.size, count,
             libtfm.parameter_count()), flush=True)
    if count != libtfm.parameter_count():
        sys.exit('the twin and libtfm\'s model differ in size')
    libtfm.close()

    # tfm_optimizer_no_decay_for_vectors: biases and norms undecayed
    groups = [{'params': [p for p in twin.parameters() if p.dim() >= 2]},
              {'params': [p for p in twin.parameters() if p.dim() < 2], 'weight_decay': 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.98), eps=1e-9,
                                  weight_decay=a.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_invsqrt(a.warmup))
    autocast = a.precision == 'bfloat16'
    steps, tokens, losses = 0, 0, []
    start = time.perf_counter()
    deadline = start + 60 * a.minutes if a.minutes else None
    for src, tgt_in, labels in Batches(src, tgt, a.max_tokens, a.seed):
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            logits = twin(src, tgt_in)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1),
                               ignore_index=PAD, label_smoothing=a.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(twin.parameters(), a.clip)
        optimizer.step()
        schedule.step()
        steps += 1
        tokens += int((labels != PAD).sum())
        losses.append(loss.item())
        if steps % a.log_every == 0:
            print('step %d: loss %.3f, %.0f target tokens/s' % (
                steps, sum(losses[-a.log_every:]) / a.log_every,
                tokens / (time.perf_counter() - start)), flush=True)
        if steps == a.steps or (deadline and time.perf_counter() >= deadline):
            break
    seconds = time.perf_counter() - start
    out = {'impl': 'pytorch', 'what': 'train', 'precision': a.precision, 'threads': a.threads,
           'steps': steps, 'seconds': seconds, 'target_tokens': tokens,
           'target_tokens_per_s': tokens / seconds, 'steps_per_s': steps / seconds,
           'last_loss': losses[-1],
           'parameters': count, 'peak_rss_mb': peak_rss_mb(), 'torch': torch.__version__,
           'torch_threads': torch.get_num_threads()}
    print('trained %d steps: %.0f target tokens/s, loss %.3f, peak RSS %.0f MB' % (
        steps, out['target_tokens_per_s'], losses[-1], out['peak_rss_mb']))
    print(json.dumps(out), flush=True)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- translation -------------------------------------------------------------------------


class CachedTwin(CachedDecoder):
    """The twin's decoder one position at a time (decode.py's cached
    layers, pre-norm), its encoder as it is (PyTorch's fast path under
    inference_mode), <pad> sources masked out of the cross-attention."""

    def __init__(self, twin):
        super().__init__(cached_layers(twin.transformer.decoder), twin.transformer.decoder.norm,
                         linear_from(twin.embedding.weight, twin.generator_bias), max_length=0)
        self.twin = twin

    def encode(self, src):
        pad = src == PAD
        # PyTorch 1.13's fast path reads linear1.weight as a tensor, a method
        # once quantized: a zero mask (no fast path with one) takes the
        # ordinary path instead, as bench/torch/decode.py's
        quantized = not isinstance(self.twin.transformer.encoder.layers[0].linear1, nn.Linear)
        mask = torch.zeros(src.shape[1], src.shape[1]) if quantized else None
        memory = self.twin.transformer.encoder(self.twin.embed(src), mask,
                                               src_key_padding_mask=pad)
        bias = torch.zeros(pad.shape).masked_fill(pad, -math.inf).unsqueeze(1) \
            if bool(pad.any()) else None
        return memory, bias

    def embed(self, tokens, t):
        return self.twin.embedding(tokens) * math.sqrt(self.twin.d_model) + \
            self.twin.positions[t]

    def keep(self, rows):
        """Only these rows go on (the others' sources are done)."""
        self.expand(rows)


def greedy(decoder, src, limits):
    """Each source's tokens up to </s> (not included) or its limit; a
    source that is done leaves the batch."""
    rows = src.shape[0]
    decoder.max_length = int(limits.max())
    decoder.start(src)
    out = [[] for _ in range(rows)]
    alive = torch.arange(rows)          # the source of each row
    tokens = torch.full((rows,), BOS, dtype=torch.long)
    for t in range(decoder.max_length):
        logits = decoder.step(tokens)
        logits[:, NEVER] = -math.inf
        tokens = logits.argmax(dim=-1)
        for row, token in zip(alive.tolist(), tokens.tolist()):
            out[row].append(token)
        done = (tokens == EOS) | (limits[alive] <= t + 1)
        if bool(done.all()):
            break
        if bool(done.any()):
            going = (~done).nonzero().view(-1)
            decoder.keep(going)
            alive, tokens = alive[going], tokens[going]
    return [ids[:-1] if ids and ids[-1] == EOS else ids for ids in out]


def beam_search(decoder, src, limits, beam, length_penalty):
    """Each source's best hypothesis (up to </s>, not included) as libtfm
    searches (lib/decode/beam.c): each step a source keeps its best
    min(beam, beam - finished) continuations; those ending in </s> finish,
    scored by their log probability over (tokens + </s>) ** length_penalty;
    a source stops at `beam` finished, or at its limit, where its live
    hypotheses finish as they are. Sources that are done leave the batch."""
    B = src.shape[0]
    decoder.max_length = int(limits.max())
    decoder.start(src)
    finished = [[] for _ in range(B)]   # (score, tokens) per source
    sources = torch.arange(B)           # the sources still searching
    per_source = 1                      # rows per source: 1 at the first step, then beam
    scores = torch.zeros(B, 1, dtype=torch.float64)
    history = torch.full((B, 0), BOS, dtype=torch.long)
    tokens = torch.full((B,), BOS, dtype=torch.long)
    for t in range(decoder.max_length):
        logp = torch.log_softmax(decoder.step(tokens), dim=-1)
        logp[:, NEVER] = -math.inf
        V = logp.shape[-1]
        n = sources.shape[0]
        candidates = (scores.unsqueeze(-1) + logp.view(n, per_source, V)).view(n, -1)
        best, where = candidates.topk(beam, dim=-1)   # sorted, best first
        parents = torch.div(where, V, rounding_mode='floor') + \
            (torch.arange(n) * per_source).unsqueeze(1)
        tokens = where % V
        history = torch.cat([history.index_select(0, parents.view(-1)),
                             tokens.view(-1, 1)], dim=1)
        done = torch.tensor([len(finished[s]) for s in sources.tolist()])
        width = (beam - done).unsqueeze(1)
        kept = (torch.arange(beam).unsqueeze(0) < width) & (best > -math.inf)
        ended = kept & (tokens == EOS)
        for i, j in ended.nonzero().tolist():
            finished[sources[i]].append((best[i, j].item() / (t + 1) ** length_penalty,
                                         history[i * beam + j, :-1].tolist()))
        live = kept & ~ended
        at_limit = limits[sources] <= t + 1
        for i, j in (live & at_limit.unsqueeze(1)).nonzero().tolist():
            finished[sources[i]].append((best[i, j].item() / (t + 1) ** length_penalty,
                                         history[i * beam + j].tolist()))
        scores = best.masked_fill(~live, -math.inf)
        searching = ~at_limit & (done + ended.sum(1) < beam)
        if t == 0:
            decoder.expand(parents.view(-1))
            per_source = beam
        else:
            decoder.reorder(parents.view(-1))
        if not bool(searching.any()):
            break
        if not bool(searching.all()):
            going = searching.nonzero().view(-1)
            rows = (going.unsqueeze(1) * beam + torch.arange(beam)).view(-1)
            decoder.keep(rows)
            sources, scores, history = sources[going], scores[going], history[rows]
            tokens = tokens[going]
        tokens = tokens.view(-1)
    return [max(found, key=lambda f: f[0])[1] for found in finished]


def length_limits(src_lengths, a, max_tgt_len):
    """Tokens each source may generate, </s> included: a * length + b,
    within the model's positions."""
    return torch.clamp((a.max_length_a * src_lengths + a.max_length_b).long(), 1,
                       max_tgt_len - 1)


def translate_lines(decoder, vocab, lines, a, max_tgt_len):
    """(the translations of lines, the tokens generated with each </s>):
    sources sorted by length, a.batch at a time, greedy or beam a.beam."""
    hypotheses, generated = [None] * len(lines), 0
    sources = vocab.encode(lines)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    with torch.inference_mode():
        for at in range(0, len(order), a.batch):
            chosen = order[at:at + a.batch]
            lengths = torch.tensor([len(sources[i]) for i in chosen])
            src = torch.full((len(chosen), int(lengths.max())), PAD, dtype=torch.long)
            for row, i in enumerate(chosen):
                src[row, :lengths[row]] = torch.tensor(sources[i])
            limits = length_limits(lengths, a, max_tgt_len)
            found = greedy(decoder, src, limits) if a.beam == 1 else \
                beam_search(decoder, src, limits, a.beam, a.length_penalty)
            for i, ids in zip(chosen, found):
                hypotheses[i] = vocab.decode(ids)
                generated += len(ids) + 1
    return hypotheses, generated


def translate(a):
    vocab = Vocabulary.of_model(a.model, a.vocab)
    twin, options = load_libtfm(a.model)
    decoder = CachedTwin(twin).eval()
    if a.precision == 'int8':
        decoder = torch.ao.quantization.quantize_dynamic(decoder, {nn.Linear}, dtype=torch.qint8)
    lines = read_lines(os.path.join(a.data, a.split + '.en'))
    references = read_lines(os.path.join(a.data, a.split + '.fr'))
    start = time.perf_counter()
    hypotheses, generated = translate_lines(decoder, vocab, lines, a, options['max_tgt_len'])
    seconds = time.perf_counter() - start
    if a.out:
        with open(a.out, 'w', encoding='utf-8') as f:
            f.writelines(h + '\n' for h in hypotheses)
    out = {'impl': 'pytorch', 'what': 'translate', 'beam': a.beam, 'batch': a.batch,
           'precision': a.precision,
           'threads': a.threads, 'sentences': len(lines), 'seconds': seconds,
           'sentences_per_s': len(lines) / seconds, 'tokens_per_s': generated / seconds,
           'chrf': tfm.chrf(hypotheses, references), 'bleu': tfm.bleu(hypotheses, references),
           'peak_rss_mb': peak_rss_mb(), 'torch': torch.__version__,
           'torch_threads': torch.get_num_threads()}
    print('translated %d sentences (%s): %.1f sentences/s, %.0f tokens/s; chrF %.1f, BLEU %.1f'
          % (len(lines), 'greedy' if a.beam == 1 else 'beam %d' % a.beam,
             out['sentences_per_s'], out['tokens_per_s'], out['chrf'], out['bleu']))
    print(json.dumps(out), flush=True)


def decoding_flags(p):
    """The decoding's flags but the strategy (check_translate.py's too)."""
    p.add_argument('--batch', type=int, default=64, help='sources per batch')
    p.add_argument('--length-penalty', type=float, default=1.0)
    p.add_argument('--max-length-a', type=float, default=2.0)
    p.add_argument('--max-length-b', type=float, default=10.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = p.add_subparsers(dest='mode', required=True)
    t = sub.add_parser('train', help='train the twin; target tokens per second')
    t.add_argument('--vocab', required=True, help="tfm-translate's --save-vocab file")
    t.add_argument('--steps', type=int, default=0)
    t.add_argument('--minutes', type=float, default=0)
    t.add_argument('--log-every', type=int, default=50)
    t.add_argument('--precision', choices=['float32', 'bfloat16'], default='float32')
    t.add_argument('--d-model', type=int, default=256)
    t.add_argument('--heads', type=int, default=4)
    t.add_argument('--layers', type=int, default=3)
    t.add_argument('--d-ff', type=int, default=1024)
    t.add_argument('--dropout', type=float, default=0.1)
    t.add_argument('--max-len', type=int, default=128,
                   help='longest sentence in tokens (longer pairs are skipped)')
    t.add_argument('--label-smoothing', type=float, default=0.1)
    t.add_argument('--lr', type=float, default=1e-3)
    t.add_argument('--weight-decay', type=float, default=0.01)
    t.add_argument('--warmup', type=int, default=4000)
    t.add_argument('--max-tokens', type=int, default=4000)
    t.add_argument('--clip', type=float, default=1.0)
    t.add_argument('--seed', type=int, default=0)
    d = sub.add_parser('translate', help="translate the test set with libtfm's model")
    d.add_argument('--model', required=True, help="tfm-translate's --out file")
    d.add_argument('--vocab', help='the tokenizer, when the model file carries none')
    d.add_argument('--split', default='test')
    d.add_argument('--beam', type=int, default=1, help='1: greedy')
    d.add_argument('--precision', choices=['float32', 'int8'], default='float32',
                   help='int8: quantize_dynamic on every nn.Linear (the generator too)')
    decoding_flags(d)
    d.add_argument('--out', help='write the translations here')
    for q in (t, d):
        q.add_argument('--data', default='runs/translation/data')
        q.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    if a.mode == 'train' and not (a.steps or a.minutes):
        p.error('train needs --steps or --minutes')
    torch.set_num_threads(a.threads)
    train(a) if a.mode == 'train' else translate(a)


if __name__ == '__main__':
    main()
