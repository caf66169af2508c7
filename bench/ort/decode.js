#!/usr/bin/env node
// ONNX Runtime decoding the graphs of bench/ort/export.py (Optimum's layout)
// with onnxruntime-node, the anchor of bench/run.py's "decode ratio against
// ONNX Runtime" lines.
//
//   node bench/ort/decode.js --graphs runs/ort/CONFIG [--precision float32|int8]
//       [--beam 1|4] [--sources N] [--decode-batch 250] [--threads 2]
//   node bench/ort/decode.js --graphs runs/ort/CONFIG --check
//
// Decoding as transformers.js runs a seq2seq model: the encoder once per
// batch, the decoder (no past) for the first token, then decoder-with-past
// one token per call, its present keys and values fed back as the next
// call's past (the cross-attention's from the first call, kept). Greedy runs
// the batch's rows together and takes each row's argmax (transformers.js 3's
// generate); beam search keeps beam hypotheses per source as rows of one
// batch, [sources * beam], scored by summed log-softmax, each step's best
// beam of beam * vocab continuations per source, the past's rows gathered
// after their parents (transformers' beam search; transformers.js 2 ran the
// same search one beam per call, batch 1, which is slower). As tfm-bench's
// decode job: random sources (tokens in [1, vocab)), no end token, every
// source generates the configuration's max_length tokens; one call warms up
// untimed, then all calls are timed. Sessions: intraOpNumThreads --threads,
// interOpNumThreads 1, sequential, all graph optimizations (fusing the int8
// graphs' DynamicQuantizeLinear/MatMulInteger into MatMulIntegerToFloat).
//
// Prints one JSON line (tokens_per_s, median_ms for all sources, peak RSS).
// --check: greedy and beam 4 in float32 on check.json's sources, tokens held
// to libtfm's (written by export.py); exits 1 on a difference.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const GRAPHS = ['encoder_model', 'decoder_model', 'decoder_with_past_model'];

function parseArgs(argv) {
  const a = {graphs: null, precision: 'float32', beam: 1, sources: 250, decodeBatch: 250,
             threads: 2, seed: 7, check: false};
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i], value = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    if (flag === '--graphs') a.graphs = value();
    else if (flag === '--precision') a.precision = value();
    else if (flag === '--beam') a.beam = Number(value());
    else if (flag === '--sources') a.sources = Number(value());
    else if (flag === '--decode-batch') a.decodeBatch = Number(value());
    else if (flag === '--threads') a.threads = Number(value());
    else if (flag === '--seed') a.seed = Number(value());
    else if (flag === '--check') a.check = true;
    else throw new Error(`unknown argument ${flag}`);
  }
  if (!a.graphs || !['float32', 'int8'].includes(a.precision) ||
      ![a.beam, a.sources, a.decodeBatch, a.threads].every(x => Number.isInteger(x) && x >= 1))
    throw new Error('usage: decode.js --graphs DIR [--precision float32|int8] [--beam N] ' +
                    '[--sources N] [--decode-batch N] [--threads N] [--check]');
  return a;
}

async function openSessions(dir, precision, threads) {
  const options = {intraOpNumThreads: threads, interOpNumThreads: 1,
                   executionMode: 'sequential', graphOptimizationLevel: 'all'};
  const suffix = precision === 'int8' ? '_quantized' : '';
  const s = {};
  for (const name of GRAPHS)
    s[name] = await ort.InferenceSession.create(path.join(dir, `${name}${suffix}.onnx`), options);
  return s;
}

function int64Tensor(values, dims) {
  return new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
}

// rows [B, ...] of a float32 tensor picked by index (a beam's parents)
function gatherRows(t, index) {
  const row = t.data.length / t.dims[0];
  const out = new Float32Array(index.length * row);
  index.forEach((r, i) => out.set(t.data.subarray(r * row, (r + 1) * row), i * row));
  return new ort.Tensor('float32', out, [index.length, ...t.dims.slice(1)]);
}

function argmax(logits, rows, vocab) {
  const out = new Array(rows);
  for (let r = 0; r < rows; r++) {
    let best = 0, at = r * vocab;
    for (let v = 1; v < vocab; v++) if (logits[at + v] > logits[at + best]) best = v;
    out[r] = best;
  }
  return out;
}

function logSoftmaxRow(logits, at, vocab) {
  let max = -Infinity;
  for (let v = 0; v < vocab; v++) max = Math.max(max, logits[at + v]);
  let sum = 0;
  for (let v = 0; v < vocab; v++) sum += Math.exp(logits[at + v] - max);
  return max + Math.log(sum);
}

class Decoder {
  constructor(sessions, config) {
    this.s = sessions;
    this.layers = config.decoder_layers;
    this.bos = config.bos_id;
  }

  // encoder, then the first decoder call on bos: (logits, past)
  async start(src, rows, srcLen) {
    const mask = int64Tensor(new Array(rows * srcLen).fill(1), [rows, srcLen]);
    const ids = int64Tensor(src, [rows, srcLen]);
    const enc = await this.s.encoder_model.run({input_ids: ids, attention_mask: mask});
    const out = await this.s.decoder_model.run({
      input_ids: int64Tensor(new Array(rows).fill(this.bos), [rows, 1]),
      encoder_attention_mask: mask, encoder_hidden_states: enc.last_hidden_state});
    this.mask = mask;
    const past = {};
    for (let n = 0; n < this.layers; n++)
      for (const side of ['decoder', 'encoder'])
        for (const kind of ['key', 'value'])
          past[`past_key_values.${n}.${side}.${kind}`] = out[`present.${n}.${side}.${kind}`];
    this.past = past;
    return out.logits;
  }

  async step(tokens) {
    const out = await this.s.decoder_with_past_model.run({
      input_ids: int64Tensor(tokens, [tokens.length, 1]), encoder_attention_mask: this.mask,
      ...this.past});
    for (let n = 0; n < this.layers; n++)
      for (const kind of ['key', 'value'])
        this.past[`past_key_values.${n}.decoder.${kind}`] = out[`present.${n}.decoder.${kind}`];
    return out.logits;
  }

  // row i continues row index[i] (its source's memory and mask too when all)
  reorder(index, all) {
    for (const name of Object.keys(this.past))
      if (all || name.includes('.decoder.')) this.past[name] = gatherRows(this.past[name], index);
    if (all) {
      const srcLen = this.mask.dims[1];
      this.mask = int64Tensor(new Array(index.length * srcLen).fill(1), [index.length, srcLen]);
    }
  }
}

async function greedy(decoder, src, rows, srcLen, maxLength) {
  let logits = await decoder.start(src, rows, srcLen);
  const vocab = logits.dims[2];
  const out = Array.from({length: rows}, () => []);
  for (let t = 0; t < maxLength; t++) {
    if (t > 0) logits = await decoder.step(out.map(o => o[t - 1]));
    argmax(logits.data, rows, vocab).forEach((token, r) => out[r].push(token));
  }
  return out;
}

// the `beam` best (score, row, token) of a source's rows' continuations
function bestContinuations(logits, rows, vocab, scores, beam) {
  const best = [];  // ascending by score, at most beam
  for (const row of rows) {
    const at = row * vocab, norm = logSoftmaxRow(logits, at, vocab);
    for (let v = 0; v < vocab; v++) {
      const score = scores[row] + logits[at + v] - norm;
      if (best.length === beam && score <= best[0].score) continue;
      let i = 0;
      while (i < best.length && best[i].score < score) i++;
      best.splice(i, 0, {score, row, token: v});
      if (best.length > beam) best.shift();
    }
  }
  return best.reverse();  // the best first
}

async function beamSearch(decoder, src, sources, srcLen, maxLength, beam) {
  let logits = await decoder.start(src, sources, srcLen);
  const vocab = logits.dims[2];
  let scores = new Float64Array(sources), history = Array.from({length: sources}, () => []);
  for (let t = 0; t < maxLength; t++) {
    if (t > 0) logits = await decoder.step(history.map(h => h[h.length - 1]));
    const rowsPerSource = t === 0 ? 1 : beam;
    const parents = [], nextScores = new Float64Array(sources * beam), nextHistory = [];
    for (let s = 0; s < sources; s++) {
      const rows = Array.from({length: rowsPerSource}, (_, i) => s * rowsPerSource + i);
      bestContinuations(logits.data, rows, vocab, scores, beam).forEach((c, i) => {
        parents.push(c.row);
        nextScores[s * beam + i] = c.score;
        nextHistory.push([...history[c.row], c.token]);
      });
    }
    decoder.reorder(parents, t === 0);
    scores = nextScores;
    history = nextHistory;
  }
  return Array.from({length: sources}, (_, s) => history[s * beam]);
}

function decode(decoder, src, rows, config, beam) {
  return beam === 1 ? greedy(decoder, src, rows, config.src_len, config.max_length)
                    : beamSearch(decoder, src, rows, config.src_len, config.max_length, beam);
}

function randomSources(n, config, seed) {
  let x = BigInt(seed) || 1n;  // xorshift64
  const mask = (1n << 64n) - 1n, out = new Array(n * config.src_len);
  for (let i = 0; i < out.length; i++) {
    x ^= (x << 13n) & mask; x ^= x >> 7n; x ^= (x << 17n) & mask;
    out[i] = 1 + Number(x % BigInt(config.src_vocab - 1));
  }
  return out;
}

async function check(a, config, decoder) {
  const c = JSON.parse(fs.readFileSync(path.join(a.graphs, 'check.json'), 'utf8'));
  const rows = c.sources.length, results = {};
  let same = true;
  for (const [name, beam] of [['greedy', 1], ['beam4', 4]]) {
    const got = await decode(decoder, c.sources.flat(), rows, config, beam);
    const equal = got.filter((t, i) => JSON.stringify(t) === JSON.stringify(c[name][i])).length;
    results[name] = `${equal}/${rows} sources' tokens equal to libtfm's`;
    same = same && equal === rows;
  }
  console.log(JSON.stringify({impl: 'onnxruntime', config: config.config, check: results,
                              ok: same}));
  return same ? 0 : 1;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const config = JSON.parse(fs.readFileSync(path.join(a.graphs, 'config.json'), 'utf8'));
  const decoder = new Decoder(await openSessions(a.graphs, a.check ? 'float32' : a.precision,
                                                 a.threads), config);
  if (a.check) return check(a, config, decoder);
  const all = randomSources(a.sources, config, a.seed), perCall = Math.min(a.decodeBatch, a.sources);
  const chunks = [];
  for (let first = 0; first < a.sources; first += perCall) {
    const rows = Math.min(perCall, a.sources - first);
    chunks.push([all.slice(first * config.src_len, (first + rows) * config.src_len), rows]);
  }
  await decode(decoder, chunks[0][0], chunks[0][1], config, a.beam);  // warm-up
  const start = process.hrtime.bigint();
  for (const [src, rows] of chunks) await decode(decoder, src, rows, config, a.beam);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(JSON.stringify({
    impl: 'onnxruntime', config: config.config, what: 'decode', threads: a.threads,
    precision: a.precision, steps: 1, sources: a.sources, batch: perCall,
    max_length: config.max_length, beam: a.beam, median_ms: ms, min_ms: ms,
    tokens_per_s: a.sources * config.max_length / (ms / 1e3),
    peak_rss_mb: process.resourceUsage().maxRSS / 1024, onnxruntime: ort.env.versions.common}));
  return 0;
}

main().then(code => { process.exitCode = code; },
            e => { console.error(`decode.js: ${e.message}`); process.exitCode = 1; });
