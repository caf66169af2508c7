#!/usr/bin/python3
"""A published model's size: a random model in Helsinki-NLP/opus-mt-en-de's
folder layout and sizes (d_model 512, 6 + 6 layers, 8 heads, FFN 2048, a
shared vocabulary of 58,101), translating 500 English sentences with
`tfm-translate --model FOLDER` and with the Marian twin
(tests/pretrained/twins) decoding its fastest way, 2 threads each (issue 32).

  /usr/bin/python3 bench/pretrained.py [--build build] [--folder runs/opus-mt-en-de-size]
      [--rounds 2] [--max-new-tokens 64] [--batch 32] [--strategies greedy,beam]
      [--log FILE]
  /usr/bin/python3 bench/pretrained.py make [--folder F]   # the folder alone
  /usr/bin/python3 bench/pretrained.py check [--folder F] [--build build]

The folder (about 300 MB, made once, seeded, under runs/ so the repository
never holds it): config.json and generation_config.json with the published
fields (num_beams 4, max_length 512, bad_words_ids [[58100]], decoding
starting at <pad> 58100 ...), model.safetensors by the published names with
transformers' initialisation (N(0, init_std 0.02) weights, zero biases, unit
norms, the pad row zero), source.spm and target.spm trained by
python3-sentencepiece on the English and French gettext catalogs, and a
vocab.json of their pieces filled up to 58,101 with filler pieces.

The twin side is a Marian twin whose decoder keeps keys and values per layer
(past_key_values, as modeling_marian.py's MarianAttention: self-attention's
grown each step, cross-attention's computed once), batched, with
torch.inference_mode and torch.set_num_threads(2). `check` holds its tokens
to the twin's own generate(), which reruns the whole prefix each step, on a
few sentences, and libtfm's logits (the Python binding) to the twin's.

Random weights never end a sentence by themselves, so both sides generate
--max-new-tokens tokens (the last one the forced eos): transformers'
max_length is that plus the start token, tfm-translate's --max-length that.
Each run is a process of its own, libtfm and twin interleaved, started with
`echo -20 > /proc/self/autogroup` so that it gets the larger share of a
machine other jobs use; tokens/s counts the generated tokens (eos included)
over the translation's time (tfm-translate --timing's, the twin's own,
loading excluded); peak RSS by GNU time. tfm-translate prints text, and a
random model's pieces are mostly fillers target.spm cannot spell, so
libtfm's ids come from the same decoding through the Python binding (the
same batches and options; its texts are checked equal to tfm-translate's
lines): they give libtfm's token count and the greedy agreement with the
twin on the sentences whose every step had a clear top-2 margin. Prints one
line per strategy.
"""
import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRETRAINED = os.path.join(ROOT, "tests", "pretrained")
sys.path[:0] = [PRETRAINED, os.path.join(PRETRAINED, "twins"), os.path.join(ROOT, "bench")]

import make_fixtures  # noqa: E402
import marian  # noqa: E402
import seq2seq  # noqa: E402
from common import linear, merge_heads, padding_mask, process_scores, save_safetensors  # noqa: E402
from common import Hypotheses, smallest_finite  # noqa: E402
from translate import THREADS, cpu_model, libtfm_env, load_average, twin_env  # noqa: E402

SIZES = {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6, "num_hidden_layers": 6,
         "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
         "decoder_ffn_dim": 2048, "max_position_embeddings": 512, "init_std": 0.02}
VOCAB_SIZE = 58101
SPM_PIECES = 8000  # asked of each SentencePiece model; the catalogs' text holds fewer
SENTENCES = 500
# tfm-translate --timing's line
TIMING = re.compile(r"loaded the model in ([0-9.]+) s; translated [0-9]+ lines in ([0-9.]+) s")
SEED = 32
# a tie in a random model's logits can go either way in float32
CLEAR_MARGIN = 1e-3


# ---- the folder ----

def transformers_init(shapes, std, seed, pad):
    """MarianPreTrainedModel._init_weights: linear and embedding weights
    N(0, std), biases zero, the embedding's padding row zero; layer norms
    and final_logits_bias as constructed (ones, zeros)."""
    generator = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in shapes:
        if "norm" in name:
            weights[name] = torch.ones(shape) if name.endswith(".weight") else torch.zeros(shape)
        elif name.endswith(".bias") or name == "final_logits_bias":
            weights[name] = torch.zeros(shape)
        else:
            weights[name] = torch.randn(shape, generator=generator) * std
    weights["model.shared.weight"][pad] = 0
    return weights


def make_folder(folder):
    """The folder, unless one made with these settings is there already."""
    stamp = os.path.join(folder, "made.json")
    settings = {"sizes": SIZES, "vocab": VOCAB_SIZE, "spm": SPM_PIECES, "seed": SEED}
    if os.path.exists(stamp) and make_fixtures.read_json(folder, "made.json") == settings:
        return
    os.makedirs(folder, exist_ok=True)
    pairs = make_fixtures.catalog_pairs()
    with tempfile.TemporaryDirectory() as workdir:
        source = make_fixtures.train_spm(workdir, [en for en, _ in pairs], "source", SPM_PIECES,
                                         hard_vocab_limit=False)
        target = make_fixtures.train_spm(workdir, [fr for _, fr in pairs], "target", SPM_PIECES,
                                         hard_vocab_limit=False)
        vocab = make_fixtures.marian_tokenizer(folder, source, target, "de", VOCAB_SIZE)
    # opus-mt-en-de's generation_config.json: beam 4, max_length 512
    config = make_fixtures.marian_config(folder, vocab, "Helsinki-NLP/opus-mt-en-de", 4, 512, **SIZES)
    # no tied copies (encoder/decoder embed_tokens, lm_head): one table,
    # as the published file's 298 MB hold
    shapes = seq2seq.parameter_shapes(config, marian.LAYOUT)
    weights = transformers_init(shapes, config["init_std"], SEED, vocab["<pad>"])
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})
    make_fixtures.write_json(folder, "made.json", settings)


def benchmark_sentences():
    """The catalogs' first 500 distinct English messages of 3 to 25 words
    that start with a letter and hold no format directive."""
    chosen = []
    for en, _ in make_fixtures.catalog_pairs():
        words = en.split()
        if 3 <= len(words) <= 25 and en[0].isalpha() and "%" not in en and en not in chosen:
            chosen.append(en)
    return chosen[:SENTENCES]


# ---- the twin, cached ----

class CachedDecoder:
    """The Marian twin's decoder one token a step, written from
    modeling_marian.py's past_key_values (MarianAttention,
    00b676f8f0489b88652a31d70751cc540dd06305): each layer's self-attention
    keys and values of the tokens so far are kept (here in buffers a step
    fills, not concatenated), the cross-attention's computed once from the
    encoder output; beam search reorders the kept ones with the beams
    (_reorder_cache). The query is scaled before the product, as there."""

    def __init__(self, model):
        self.model = model
        self.w = model.weights
        config = model.config
        self.layers = config["decoder_layers"]
        self.heads = config["decoder_attention_heads"]
        self.head_dim = config["d_model"] // self.heads
        self.scaling = self.head_dim ** -0.5
        # the three self-attention projections as one product
        self.qkv = []
        for i in range(self.layers):
            name = "model.decoder.layers.%d.self_attn." % i
            self.qkv.append((torch.cat([self.w[name + p + ".weight"] for p in ["q_proj", "k_proj", "v_proj"]]),
                             torch.cat([self.w[name + p + ".bias"] for p in ["q_proj", "k_proj", "v_proj"]])))

    def heads_of(self, x):
        """[N, T, d] -> [N, heads, T, head_dim]"""
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def start(self, encoder_out, input_ids, rows_per_source, max_steps):
        """The state of a batch: the cross-attention keys and values of
        each source (its beams share them), the padding mask, empty
        self-attention buffers."""
        self.mask = padding_mask(input_ids.ne(self.model.pad), 1).repeat_interleave(rows_per_source, dim=0)
        self.cross = []
        for i in range(self.layers):
            name = "model.decoder.layers.%d.encoder_attn." % i
            k = self.heads_of(linear(self.w, name + "k_proj", encoder_out))
            v = self.heads_of(linear(self.w, name + "v_proj", encoder_out))
            self.cross.append((k.repeat_interleave(rows_per_source, dim=0),
                               v.repeat_interleave(rows_per_source, dim=0)))
        rows = encoder_out.shape[0] * rows_per_source
        shape = (rows, self.heads, max_steps, self.head_dim)
        self.keys = [torch.empty(shape) for _ in range(self.layers)]
        self.values = [torch.empty(shape) for _ in range(self.layers)]

    def attend(self, q, k, v, mask=None):
        scores = torch.matmul(q, k.transpose(2, 3))
        if mask is not None:
            scores = scores + mask
        return merge_heads(torch.matmul(scores.softmax(dim=-1), v))

    def step(self, tokens, position):
        """Logits [N, vocab] for the next token after tokens [N] at
        position (the start token's is 0)."""
        model, w = self.model, self.w
        x = torch.nn.functional.embedding(tokens[:, None], w["model.shared.weight"]) * model.scale
        x = x + model.sinusoids[position]
        for i in range(self.layers):
            layer = "model.decoder.layers.%d." % i

            def self_attention(h):
                q, k, v = torch.nn.functional.linear(h, *self.qkv[i]).chunk(3, dim=-1)
                self.keys[i][:, :, position] = self.heads_of(k)[:, :, 0]
                self.values[i][:, :, position] = self.heads_of(v)[:, :, 0]
                return linear(w, layer + "self_attn.out_proj", self.attend(
                    self.heads_of(q * self.scaling), self.keys[i][:, :, :position + 1],
                    self.values[i][:, :, :position + 1]))

            def cross_attention(h):
                q = self.heads_of(linear(w, layer + "encoder_attn.q_proj", h) * self.scaling)
                return linear(w, layer + "encoder_attn.out_proj", self.attend(q, *self.cross[i], self.mask))

            x = model.sublayer(layer + "self_attn_layer_norm", x, self_attention)
            x = model.sublayer(layer + "encoder_attn_layer_norm", x, cross_attention)
            x = model.sublayer(layer + "final_layer_norm", x, lambda h: model.feed_forward(layer, h))
        return torch.matmul(x[:, 0], w["model.shared.weight"].t()) + w["final_logits_bias"][0]

    def reorder(self, rows, filled):
        for cache in self.keys + self.values:
            cache[:, :, :filled] = cache[rows, :, :filled]


def cached_greedy(decoder, config, input_ids):
    """greedy_search over a padded batch [B, S]: per source its ids (start
    token first, eos last when it ended by one) and the smallest gap
    between its best and second-best processed score."""
    batch = input_ids.shape[0]
    decoder.start(decoder.model.encode(input_ids), input_ids, 1, config.max_length)
    ids = torch.full((batch, 1), config.decoder_start_token_id, dtype=torch.long)
    eos = torch.tensor(config.eos_ids())
    running = torch.ones(batch, dtype=torch.bool)
    margins = [[] for _ in range(batch)]
    for position in range(config.max_length - 1):
        scores = process_scores(config, ids, decoder.step(ids[:, -1], position))
        top = scores.topk(2, dim=-1).values
        for row in running.nonzero()[:, 0].tolist():
            margins[row].append(float(top[row, 0] - top[row, 1]))
        tokens = torch.where(running, scores.argmax(dim=-1), torch.full((batch,), config.pad_token_id))
        ids = torch.cat([ids, tokens[:, None]], dim=-1)
        running &= ~torch.isin(tokens, eos)
        if not running.any():
            break
    out = []
    for row in range(batch):
        sequence = ids[row].tolist()
        ended = [i for i, token in enumerate(sequence[1:], 1) if token in config.eos_ids()]
        out.append((sequence[:ended[0] + 1] if ended else sequence, smallest_finite(margins[row])))
    return out


def cached_beam(decoder, config, input_ids):
    """beam_search over a padded batch [B, S] (BeamSearchScorer with B
    sources, as common.beam does for one): per source the best sequence."""
    beams, batch = config.num_beams, input_ids.shape[0]
    decoder.start(decoder.model.encode(input_ids), input_ids, beams, config.max_length)
    ids = torch.full((batch * beams, 1), config.decoder_start_token_id, dtype=torch.long)
    beam_scores = torch.zeros(batch, beams)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view(-1)
    hypotheses = [Hypotheses(config) for _ in range(batch)]
    done = [False] * batch
    eos_ids = config.eos_ids()
    for position in range(config.max_length - 1):
        logits = decoder.model.adjust_logits_during_generation(decoder.step(ids[:, -1], position))
        scores = process_scores(config, ids, logits.log_softmax(dim=-1)) + beam_scores[:, None]
        vocab = scores.shape[-1]
        top_scores, top_tokens = scores.view(batch, beams * vocab).topk(2 * beams, dim=1)
        # a finished source's rows go on with pad and score 0, as there
        next_scores = torch.zeros(batch, beams)
        next_tokens = torch.full((batch, beams), config.pad_token_id, dtype=torch.long)
        next_rows = torch.arange(batch)[:, None].repeat(1, beams) * beams
        for source in range(batch):
            if done[source]:
                continue
            taken = 0
            for rank, (score, flat) in enumerate(zip(top_scores[source].tolist(), top_tokens[source].tolist())):
                row, token = source * beams + flat // vocab, flat % vocab
                if token in eos_ids:
                    if rank < beams:
                        hypotheses[source].add(ids[row].tolist(), score)
                else:
                    next_scores[source, taken], next_tokens[source, taken] = score, token
                    next_rows[source, taken] = row
                    taken += 1
                if taken == beams:
                    break
            done[source] = hypotheses[source].is_done(float(top_scores[source].max()), ids.shape[-1])
        beam_scores, rows = next_scores.view(-1), next_rows.view(-1)
        ids = torch.cat([ids[rows], next_tokens.view(-1, 1)], dim=-1)
        decoder.reorder(rows, position + 1)
        if all(done) or ids.shape[-1] >= config.max_length:
            break
    out = []
    for source in range(batch):
        if not done[source]:
            for row in range(source * beams, (source + 1) * beams):
                hypotheses[source].add(ids[row].tolist(), float(beam_scores[row]))
        _, best = sorted(hypotheses[source].beams, key=lambda entry: entry[0])[-1]
        out.append((best + [eos_ids[0]] if len(best) < config.max_length else best, None))
    return out


def twin_translate(twin, sentences, strategy, batch, max_new_tokens):
    """[(ids, text, margin)] per sentence, batch by batch in the given order."""
    config = twin.generation_config(max_length=max_new_tokens + 1, num_beams=1 if strategy == "greedy" else 4)
    decoder = CachedDecoder(twin.model)
    search = cached_greedy if strategy == "greedy" else cached_beam
    out = []
    for first in range(0, len(sentences), batch):
        encoded = [twin.tokenizer.encode(text) for text in sentences[first:first + batch]]
        width = max(map(len, encoded))
        input_ids = torch.tensor([ids + [twin.model.pad] * (width - len(ids)) for ids in encoded])
        out += [(ids, twin.decode(ids), margin) for ids, margin in search(decoder, config, input_ids)]
    return out


def run_twin(a):
    """The twin's process: loads the folder, translates the sentences file,
    writes one JSON line with the ids, texts and times."""
    torch.set_num_threads(THREADS)
    start = time.perf_counter()
    twin = marian.load(a.folder)
    loaded = time.perf_counter()
    with open(a.sentences, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    with torch.inference_mode():
        out = twin_translate(twin, sentences, a.strategy, a.batch, a.max_new_tokens)
    seconds = time.perf_counter() - loaded
    print(json.dumps({"load_s": loaded - start, "translate_s": seconds,
                      "tokens": sum(len(ids) - 1 for ids, _, _ in out),
                      "ids": [ids for ids, _, _ in out], "texts": [text for _, text, _ in out],
                      "margins": [margin for _, _, margin in out]}))


# ---- checks ----

def check(a):
    """The cached twin against the twin's own generate() on a few
    sentences (greedy and beam 4, batched with padding), and libtfm's
    logits and greedy ids (Python binding) against the twin's."""
    make_folder(a.folder)
    torch.set_num_threads(THREADS)
    twin = marian.load(a.folder)
    sentences = sorted(benchmark_sentences()[:6], key=len)
    steps = 12
    failures = 0
    with torch.inference_mode():
        for strategy in ["greedy", "beam"]:
            cached = twin_translate(twin, sentences, strategy, 3, steps)
            for text, (ids, _, _) in zip(sentences, cached):
                plain, _, _ = twin.generate(twin.tokenizer.encode(text), max_length=steps + 1,
                                            num_beams=1 if strategy == "greedy" else 4)
                same = plain == ids
                failures += not same
                print("%s cached %s %s" % ("ok  " if same else "FAIL", strategy, text))
    if a.build:
        failures += check_libtfm(a, twin, sentences, steps)
    return 1 if failures else 0


def libtfm_binding(build):
    """The tfm package of the source tree over the build's library."""
    os.environ.update({k: v for k, v in twin_env(build).items() if k.startswith("TFM_")})
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import tfm
    return tfm


def check_libtfm(a, twin, sentences, steps):
    import numpy as np
    tfm = libtfm_binding(a.build)
    model = tfm.Model.from_pretrained(a.folder)
    text = sentences[-1]
    input_ids = twin.tokenizer.encode(text)
    decoder_ids, _, _ = twin.generate(input_ids, max_length=steps + 1, num_beams=1)
    with torch.inference_mode():
        expected = twin.logits(input_ids, decoder_ids).numpy()
    with tfm.Tape(recording=False):
        got = model.forward(np.array([input_ids]), np.array([decoder_ids]),
                            tgt_mask=tfm.causal_mask(len(decoder_ids))).numpy()[0]
    gap = float(np.abs(got - expected).max())
    ok = gap <= 1e-4
    print("%s libtfm logits within 1e-4 of the twin's: largest gap %.2e" % ("ok  " if ok else "FAIL", gap))
    tokens = model.greedy(np.array([input_ids]), max_length=steps)[0]
    same = tokens[tokens >= 0].tolist() == decoder_ids
    print("%s libtfm greedy ids equal the twin's" % ("ok  " if same else "FAIL"))
    return (not ok) + (not same)


def libtfm_ids(a, strategy, sentences):
    """libtfm's ids (without the start token) and texts for the sentences,
    decoded through the Python binding batch by batch as tfm-translate
    decodes them (the same batches, the model's own options), the twin's
    tokenizer encoding them: tfm-translate prints text only, and a random
    model's pieces are mostly fillers target.spm cannot spell."""
    import numpy as np
    tfm = libtfm_binding(a.build)
    tfm.set_num_threads(THREADS)
    model = tfm.Model.from_pretrained(a.folder)
    tokenizer = marian.MarianTokenizer(a.folder)
    special = {tokenizer.eos, tokenizer.pad}
    ids = []
    for first in range(0, len(sentences), a.batch):
        encoded = [tokenizer.encode(text) for text in sentences[first:first + a.batch]]
        width = max(map(len, encoded))
        src = np.array([row + [tokenizer.pad] * (width - len(row)) for row in encoded])
        if strategy == "greedy":
            tokens = model.greedy(src, max_length=a.max_new_tokens)
        else:
            tokens = model.beam(src, beam_size=4, max_length=a.max_new_tokens)[0][:, 0]
        ids += [[int(token) for token in row[1:] if token >= 0] for row in tokens]
    texts = [model.target_tokenizer.decode([i for i in row if i not in special]).strip() for row in ids]
    model.close()
    return ids, texts


# ---- the side-by-side run ----

def run_timed(argv, env, stdin):
    """(exit status, stdout, stderr, wall seconds, peak RSS in MB) of argv
    run at autogroup nice -20, stdin from a file. GNU time gives the peak
    RSS: a process forked from this one (which holds torch) and its exec
    would report this one's too."""
    print("  $ " + shlex.join(argv), file=sys.stderr, flush=True)
    wrapped = ["/bin/sh", "-c", 'echo -20 > /proc/self/autogroup && exec /usr/bin/time -f "peak-rss-kb %M" "$@"',
               "sh"] + argv
    with open(stdin, "rb") as given:
        start = time.perf_counter()
        p = subprocess.run(wrapped, env=env, stdin=given, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    peak = re.findall(r"^peak-rss-kb ([0-9]+)$", p.stderr, re.M)
    rss = int(peak[-1]) / 1024 if peak else math.nan
    print("    exit %d, %.1f s, peak RSS %.0f MB, load %s" % (p.returncode, seconds, rss, load_average()),
          file=sys.stderr, flush=True)
    return p.returncode, p.stdout, p.stderr, seconds, rss


def twin_run(a, strategy, sentences_file):
    argv = [sys.executable, os.path.abspath(__file__), "twin", "--folder", a.folder, "--sentences", sentences_file,
            "--strategy", strategy, "--batch", str(a.batch), "--max-new-tokens", str(a.max_new_tokens)]
    env = dict(twin_env(a.build), OMP_NUM_THREADS=str(THREADS))
    status, stdout, stderr, seconds, rss = run_timed(argv, env, os.devnull)
    if status:
        raise RuntimeError("the twin failed: " + stderr[-2000:])
    out = json.loads(stdout.splitlines()[-1])
    out.update(wall_s=seconds, rss_mb=rss, tokens_per_s=out["tokens"] / out["translate_s"])
    return out


def libtfm_run(a, strategy, sentences_file, binding_texts):
    argv = [os.path.join(a.build, "examples", "tfm-translate"), "--model", a.folder, "--timing",
            "--threads", str(THREADS), "--batch", str(a.batch), "--beam", "1" if strategy == "greedy" else "4",
            "--max-length", str(a.max_new_tokens)]
    status, stdout, stderr, seconds, rss = run_timed(argv, libtfm_env(), sentences_file)
    timing = TIMING.search(stderr)
    if status or not timing:
        raise RuntimeError("tfm-translate failed: " + stderr[-2000:])
    same = sum(line.strip() == text for line, text in zip(stdout.splitlines(), binding_texts))
    return {"load_s": float(timing.group(1)), "translate_s": float(timing.group(2)), "wall_s": seconds,
            "rss_mb": rss, "lines_as_binding": same, "timing": timing.group(0)}


def agreement(libtfm_ids, twin):
    """(agreeing, clear): of the sentences whose every greedy step had a
    clear top-2 margin in the twin, how many libtfm's ids equal."""
    clear = [i for i, margin in enumerate(twin["margins"]) if margin is not None and margin >= CLEAR_MARGIN]
    agreeing = sum(libtfm_ids[i] == twin["ids"][i][1:] for i in clear)
    return agreeing, len(clear)


def best(runs):
    return max(runs, key=lambda run: run["tokens_per_s"])


def main(a):
    make_folder(a.folder)
    sentences = benchmark_sentences()
    # the same order for both sides: by length, so a batch holds sources alike
    source = marian.load_sentencepiece(a.folder, "source.spm")
    sentences.sort(key=lambda text: (len(source.encode(text)), text))
    sentences_file = os.path.join(a.folder, "sentences.en")
    with open(sentences_file, "w", encoding="utf-8") as f:
        f.write("".join(text + "\n" for text in sentences))
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print("start: %s" % uptime, file=sys.stderr)
    results = {}
    for strategy in a.strategies.split(","):
        runs = {"libtfm": [], "twin": []}
        ids, texts = libtfm_ids(a, strategy, sentences)
        tokens = sum(map(len, ids))
        for _ in range(a.rounds):
            run = libtfm_run(a, strategy, sentences_file, texts)
            run.update(tokens=tokens, tokens_per_s=tokens / run["translate_s"], ids=ids)
            runs["libtfm"].append(run)
            runs["twin"].append(twin_run(a, strategy, sentences_file))
        results[strategy] = runs
        if a.log:
            with open(a.log, "a", encoding="utf-8") as log:
                for side, side_runs in runs.items():
                    for run in side_runs:
                        log.write(json.dumps(dict({k: v for k, v in run.items() if k not in ("ids", "texts")},
                                                  side=side, strategy=strategy, uptime=uptime)) + "\n")
    end = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    cpu = "%s, load %s at the start, %s at the end" % (cpu_model(), uptime.split("load average: ")[-1],
                                                       end.split("load average: ")[-1])
    for strategy, runs in results.items():
        libtfm, twin = best(runs["libtfm"]), best(runs["twin"])
        name = "greedy" if strategy == "greedy" else "beam 4"
        print("opus-mt-en-de size, %s: libtfm %.0f tokens/s, twin %.0f tokens/s, ratio %.2f "
              "(%d threads each, CPU %s); peak RSS libtfm %.0f MB, twin %.0f MB; tokens libtfm %d, twin %d; %d sentences; "
              "each round's ratio %s" % (
                  name, libtfm["tokens_per_s"], twin["tokens_per_s"], libtfm["tokens_per_s"] / twin["tokens_per_s"],
                  THREADS, cpu, max(r["rss_mb"] for r in runs["libtfm"]), max(r["rss_mb"] for r in runs["twin"]),
                  libtfm["tokens"], twin["tokens"], len(sentences),
                  ", ".join("%.2f" % (l["tokens_per_s"] / t["tokens_per_s"])
                            for l, t in zip(runs["libtfm"], runs["twin"]))))
        print("tfm-translate's lines equal the binding's decoded ids: %s of %d" % (
            ", ".join(str(r["lines_as_binding"]) for r in runs["libtfm"]), len(sentences)))
        if strategy == "greedy":
            agreeing, clear = agreement(libtfm["ids"], twin)
            print("greedy agreement: libtfm's ids equal the twin's on %d of the %d sentences whose every step's "
                  "top-2 margin is at least %g (%d sentences in all)" % (agreeing, clear, CLEAR_MARGIN,
                                                                         len(sentences)))


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="run", choices=["run", "make", "check", "twin"])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--folder", default=os.path.join(ROOT, "runs", "opus-mt-en-de-size"))
    parser.add_argument("--rounds", type=int, default=2, help="libtfm then the twin, this many times")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens each sentence generates")
    parser.add_argument("--batch", type=int, default=32, help="sentences a batch, both sides")
    parser.add_argument("--strategies", default="greedy,beam")
    parser.add_argument("--log", help="append every run's figures here as JSON lines")
    # the twin's process
    parser.add_argument("--sentences", help=argparse.SUPPRESS)
    parser.add_argument("--strategy", choices=["greedy", "beam"], help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    args = arguments()
    if args.command == "make":
        make_folder(args.folder)
    elif args.command == "check":
        sys.exit(check(args))
    elif args.command == "twin":
        run_twin(args)
    else:
        main(args)
