#!/usr/bin/python3
"""tfm-translate against its PyTorch twin (bench/torch/translate.py), side by
side in one interleaved run, 2 threads each (issue 30).

  /usr/bin/python3 bench/translate.py [--build DIR] [--data DIR] [--steps N]
      [--rounds R] [--precisions float32,bfloat16] [--mpi] [--model FILE]
      [--translations R] [--libtfm-batch N] [--twin-batch N] [--log FILE]
  /usr/bin/python3 bench/translate.py --from FILE   (the lines of a logged run)

Training, R rounds: in each, for each precision, libtfm trains --steps
steps (tfm-translate --train --threads 2, OPENBLAS_NUM_THREADS=1; with
--mpi also `mpirun -np 2 ... --distributed --threads 1`), then the twin the
same steps of the same batches (float32 against float32, bfloat16 products
against torch.autocast's). Both read the vocabulary the first libtfm run
trained and saved (--save-vocab). Then translation of the 1,000 test
sentences, greedy and beam 4, in float32 and int8 (tfm-translate --int8;
the twin after quantize_dynamic), libtfm then the twin, --translations
rounds, both with the same weights: --model (a tfm-translate --out file; a model
trained for minutes gives translations of realistic length) or else the
model the last float32 libtfm run saved.

Prints per pair "training target tokens/s: libtfm X, PyTorch Y, ratio Z"
and "translation sentences/s (STRATEGY, PRECISION against PRECISION):
libtfm X, PyTorch Y, ratio Z" (each side's best over the rounds, and each
round's own ratio), then each libtfm precision against the twin's fastest
batched decoder (its faster precision), the issue's measure, with the
CPU and the load average before and after; every run's record is a JSON
line in --log. Other jobs share the machine: the ratios of runs side by
side are the figures to read, not the absolute speeds.
"""
import argparse
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import time

from run import PYTHON, cpu_has_bf16

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWIN = os.path.join(ROOT, 'bench', 'torch', 'translate.py')
THREADS = 2
BEAM = 4
# tfm-translate's output: its training summary and its translation's
TOKENS = re.compile(r'([0-9][0-9,.]*) target tokens/s')
# tfm-translate --timing: from the first line read, its loading left out as
# the twin's is
SENTENCES = re.compile(r'\(([0-9][0-9,.]*) lines/s\)')


def cpu_model():
    with open('/proc/cpuinfo') as f:
        found = re.search(r'^model name\s*:\s*(.*)$', f.read(), re.M)
    return found.group(1) if found else platform.processor()


def load_average():
    return ' '.join('%.2f' % x for x in os.getloadavg())


def twin_env(build):
    """The twin's environment: PyTorch's threads (passive: no spinning
    against other jobs), and the tfm package from the source tree over the
    build's library."""
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS), OMP_WAIT_POLICY='passive',
               TFM_LIBRARY=os.path.join(build, 'lib', 'libtfm.so.0'))
    env.setdefault('TFM_INCLUDE_DIR', os.path.join(ROOT, 'include', 'tfm'))
    env['PYTHONPATH'] = os.pathsep.join(
        [os.path.join(ROOT, 'bindings', 'python')] +
        ([env['PYTHONPATH']] if env.get('PYTHONPATH') else []))
    return env


def libtfm_env():
    """libtfm's own threads; OpenBLAS on one (tfm_set_num_threads keeps it
    there too)."""
    return dict(os.environ, OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1')


def number(text):
    return float(text.replace(',', ''))


def cpu_seconds():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(argv, env, stdin=None, stdout=None):
    """(the process, its wall time in seconds, the CPU seconds it used:
    on a shared machine, the share of the wall time it ran); the command
    line, load average and times on stderr as it goes."""
    print('  $ ' + shlex.join(argv), file=sys.stderr, flush=True)
    start, cpu = time.perf_counter(), cpu_seconds()
    with open(stdin, 'rb') if stdin else open(os.devnull, 'rb') as given:
        p = subprocess.run(argv, env=env, stdin=given, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    if stdout:
        with open(stdout, 'w', encoding='utf-8') as out:
            out.write(p.stdout)
    print('    exit %d, %.1f s, %.1f CPU s, load %s' % (p.returncode, seconds, cpu,
                                                     load_average()),
          file=sys.stderr, flush=True)
    return p, seconds, cpu


def failed(p):
    return {'error': 'exit %d: %s' % (p.returncode, p.stderr.strip()[-400:])}


def last_json(p):
    lines = [x for x in p.stdout.splitlines() if x.startswith('{')]
    return json.loads(lines[-1]) if p.returncode == 0 and lines else failed(p)


# --- training ----------------------------------------------------------------------------


def libtfm_train(a, precision, form, out_model, vocab):
    """tfm-translate --train on threads ('threads') or two MPI ranks
    ('mpi'); its figures from the last "target tokens/s" in its output."""
    program = os.path.join(a.build, 'examples', 'tfm-translate')
    # no test-set translation after training: only the steps are timed
    argv = [program, '--train', '--data', a.data, '--out', out_model, '--steps', str(a.steps),
            '--precision', precision, '--seed', str(a.seed), '--evaluate', '0',
            '--overwrite']  # each round retrains into the same file
    # the vocabulary is trained once (deterministic), then read back
    argv += ['--vocab', vocab] if os.path.exists(vocab) else ['--save-vocab', vocab]
    if form == 'mpi':
        # no --oversubscribe: with it Open MPI's waiting ranks yield the CPU,
        # which on a shared machine hands their time to other jobs
        argv = ['mpirun', '--allow-run-as-root', '-np', '2'] + argv + \
            ['--distributed', '--threads', '1']
    else:
        argv += ['--threads', str(THREADS)]
    p, seconds, cpu = run(argv, libtfm_env())
    rates = TOKENS.findall(p.stdout + p.stderr)
    if p.returncode or not rates:
        return failed(p)
    return {'target_tokens_per_s': number(rates[-1]), 'wall_s': seconds, 'cpu_s': cpu,
            'summary': (p.stdout + p.stderr).strip().splitlines()[-1]}


def twin_train(a, precision, vocab):
    argv = [PYTHON, TWIN, 'train', '--data', a.data, '--vocab', vocab, '--steps', str(a.steps),
            '--precision', precision, '--threads', str(THREADS), '--seed', str(a.seed)]
    p, seconds, cpu = run(argv, twin_env(a.build))
    out = last_json(p)
    out.update(wall_s=seconds, cpu_s=cpu)
    return out


# --- translation ---------------------------------------------------------------------------


def libtfm_translate(a, model, beam, precision, hypotheses):
    """tfm-translate --model on the test sources, --libtfm-batch lines at
    once (each batch sorted by length); sentences/s as its --timing prints
    them (from the first line read: the model's loading left out, as the
    twin's time leaves it out), else the sentences over the process's wall
    time."""
    program = os.path.join(a.build, 'examples', 'tfm-translate')
    source = os.path.join(a.data, 'test.en')
    argv = [program, '--model', model, '--beam', str(beam), '--threads', str(THREADS),
            '--batch', str(a.libtfm_batch), '--timing'] + \
        (['--int8'] if precision == 'int8' else [])
    p, seconds, cpu = run(argv, libtfm_env(), stdin=source, stdout=hypotheses)
    if p.returncode:
        return failed(p)
    with open(source, encoding='utf-8') as f:
        sentences = len(f.read().splitlines())
    printed = SENTENCES.findall(p.stderr)
    out = {'sentences': sentences, 'wall_s': seconds, 'cpu_s': cpu,
           'sentences_per_s': number(printed[-1]) if printed else sentences / seconds,
           'measured_by': 'tfm-translate' if printed else 'wall time'}
    p, _, _ = run([os.path.join(a.build, 'examples', 'tfm-translate'), '--score', hypotheses,
                '--reference', os.path.join(a.data, 'test.fr')], libtfm_env())
    scores = dict(re.findall(r'(chrF|BLEU)\D*([0-9.]+)', p.stdout))
    out.update({k.lower(): float(v) for k, v in scores.items()})
    return out


def twin_translate(a, model, beam, precision):
    argv = [PYTHON, TWIN, 'translate', '--data', a.data, '--model', model, '--beam', str(beam),
            '--threads', str(THREADS), '--batch', str(a.twin_batch), '--precision', precision]
    p, seconds, cpu = run(argv, twin_env(a.build))
    out = last_json(p)
    out.update(wall_s=seconds, cpu_s=cpu)
    return out


# --- the run --------------------------------------------------------------------------------


def ratio(x, y):
    return x / y if x and y else float('nan')


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default=os.path.join(ROOT, 'build'))
    p.add_argument('--data', default=os.path.join(ROOT, 'runs', 'translation', 'data'))
    p.add_argument('--work', default=os.path.join(ROOT, 'runs', 'translation', 'bench'),
                   help='where the vocabulary, models and translations go')
    p.add_argument('--steps', type=int, default=100)
    p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--translations', type=int, default=2, help='rounds of translation')
    p.add_argument('--precisions', default='float32,bfloat16' if cpu_has_bf16() else 'float32')
    p.add_argument('--translate-precisions', default='float32,int8',
                   help='translation: float32 (libtfm and the twin as trained), int8 '
                   '(tfm-translate --int8 and the twin after quantize_dynamic)')
    p.add_argument('--mpi', action='store_true', help="also libtfm's 2-rank form")
    p.add_argument('--model', help='translate with this tfm-translate --out file')
    p.add_argument('--libtfm-batch', type=int, default=1000,
                   help="tfm-translate's --batch: lines read, sorted and decoded at once")
    p.add_argument('--twin-batch', type=int, default=64,
                   help="the twin's sources per batch (all sorted by length first)")
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--log', default=os.path.join(ROOT, 'runs', 'translation',
                                                 'bench_translate.jsonl'))
    p.add_argument('--from', dest='from_log', metavar='LOG',
                   help="print a logged run's lines again (its records only)")
    return p.parse_args()


def run_all(a):
    if not os.path.exists(os.path.join(a.data, 'train.en')):
        sys.exit('no corpus in %s: python3 scripts/translation_data.py %s' % (a.data, a.data))
    os.makedirs(a.work, exist_ok=True)
    # trained by the first libtfm run, unless an earlier run left it (the
    # training is deterministic: the same corpus gives the same file)
    vocab = os.path.join(a.work, 'vocab.model')
    forms = ['threads', 'mpi'] if a.mpi else ['threads']
    machine = {'cpu': cpu_model(), 'load_before': load_average(), 'steps': a.steps,
               'threads': THREADS, 'build': a.build}
    print('CPU %s; load average %s' % (machine['cpu'], machine['load_before']))
    records = []
    with open(a.log, 'a') as log:
        def record(out, **fields):
            """out (a run's figures) with fields naming the run, and the machine's."""
            fields = dict(out, **fields)
            fields.update(machine)
            fields['time'] = time.strftime('%Y-%m-%dT%H:%M:%S')
            records.append(fields)
            log.write(json.dumps(fields) + '\n')
            log.flush()
            return fields

        trained = None
        for r in range(1, a.rounds + 1):
            for precision in a.precisions.split(','):
                for form in forms:
                    model = os.path.join(a.work, 'libtfm_%s_%s.safetensors' % (precision, form))
                    out = libtfm_train(a, precision, form, model, vocab)
                    record(out, impl='libtfm', form=form, what='train', precision=precision,
                           round=r)
                    if precision == 'float32' and 'error' not in out:
                        trained = model
                record(twin_train(a, precision, vocab), impl='pytorch', what='train',
                       precision=precision, round=r)
        model = a.model or trained
        for r in range(1, a.translations + 1):
            for beam in (1, BEAM):
                for precision in a.translate_precisions.split(','):
                    name = 'greedy' if beam == 1 else 'beam%d' % beam
                    hyp = os.path.join(a.work, 'libtfm_%s_%s.fr' % (name, precision))
                    record(libtfm_translate(a, model, beam, precision, hyp), impl='libtfm',
                           what='translate', strategy=name, precision=precision, round=r,
                           model=model)
                    record(twin_translate(a, model, beam, precision), impl='pytorch',
                           what='translate', strategy=name, precision=precision, round=r,
                           model=model)
    for x in records:
        x['load_after'] = load_average()
    print(summary(records, a.log))


def summary(records, log):
    """The run's lines: each pair's best figures, ratio, and per-round ratios."""
    def best(impl, what, key, **match):
        found = [x.get(key) for x in records if x['impl'] == impl and x['what'] == what and
                 all(x.get(k) == v for k, v in match.items()) and x.get(key)]
        return max(found, default=None)

    def figure(value, spec):
        return '-' if value is None else format(value, spec)

    def per_round(what, key, libtfm_match, twin_match):
        rounds = sorted({x['round'] for x in records if x['what'] == what})
        return ', '.join('%.2f' % ratio(best('libtfm', what, key, round=r, **libtfm_match),
                                        best('pytorch', what, key, round=r, **twin_match))
                         for r in rounds)

    lines = []
    trained = [x for x in records if x['what'] == 'train']
    for precision in sorted({x['precision'] for x in trained}, reverse=True):
        twin = best('pytorch', 'train', 'target_tokens_per_s', precision=precision)
        for form in sorted({x['form'] for x in trained if x['impl'] == 'libtfm'},
                           reverse=True):
            ours = best('libtfm', 'train', 'target_tokens_per_s', precision=precision,
                        form=form)
            lines.append('training target tokens/s (%s%s, against %s): libtfm %s, PyTorch %s, '
                         'ratio %.2f (rounds: %s)' % (
                             precision, '' if form == 'threads' else ' on 2 MPI ranks',
                             'autocast' if precision == 'bfloat16' else 'float32',
                             figure(ours, '.0f'), figure(twin, '.0f'), ratio(ours, twin),
                             per_round('train', 'target_tokens_per_s',
                                       {'precision': precision, 'form': form},
                                       {'precision': precision})))
    translated = [x for x in records if x['what'] == 'translate']
    for x in translated:  # runs logged before int8 translated in float32
        x.setdefault('precision', 'float32')
    for name in ('greedy', 'beam%d' % BEAM):
        precisions = sorted({x['precision'] for x in translated if x['strategy'] == name})
        for precision in precisions:
            match = {'strategy': name, 'precision': precision}
            ours = best('libtfm', 'translate', 'sentences_per_s', **match)
            twin = best('pytorch', 'translate', 'sentences_per_s', **match)
            lines.append('translation sentences/s (%s, %s against %s): libtfm %s, PyTorch %s, '
                         'ratio %.2f (rounds: %s)' % (
                             name, precision, precision, figure(ours, '.1f'),
                             figure(twin, '.1f'), ratio(ours, twin),
                             per_round('translate', 'sentences_per_s', match, match)))
            for impl in ('libtfm', 'pytorch'):
                scored = [x for x in translated if x['impl'] == impl and x['strategy'] == name
                          and x['precision'] == precision and 'chrf' in x]
                if scored:
                    lines.append('  %s %s %s: chrF %.1f, BLEU %.1f' % (
                        impl, name, precision, scored[-1]['chrf'],
                        scored[-1].get('bleu', float('nan'))))
        # the measure: libtfm against the twin's fastest batched decoder
        if len(precisions) < 2:
            continue
        twin, fastest = max((best('pytorch', 'translate', 'sentences_per_s', strategy=name,
                                  precision=p) or 0, p) for p in precisions)
        for precision in precisions:
            ours = best('libtfm', 'translate', 'sentences_per_s', strategy=name,
                        precision=precision)
            lines.append('translation sentences/s (%s, libtfm %s against the twin\'s fastest, '
                         '%s): libtfm %s, PyTorch %s, ratio %.2f' % (
                             name, precision, fastest, figure(ours, '.1f'),
                             figure(twin or None, '.1f'), ratio(ours, twin)))
    errors = [x for x in records if 'error' in x]
    for x in errors:
        lines.append('failed: %s %s %s: %s' % (x['impl'], x['what'], x.get('precision') or
                                               x.get('strategy'), x['error']))
    lines.append('CPU %s; load average %s before, %s after; records in %s' % (
        records[0]['cpu'], records[0]['load_before'], records[-1].get('load_after', '?'), log))
    return '\n'.join(lines)


def main():
    a = arguments()
    if a.from_log:
        with open(a.from_log) as f:
            print(summary([json.loads(line) for line in f if line.strip()], a.from_log))
        return
    run_all(a)


if __name__ == '__main__':
    main()
