#!/usr/bin/python3
"""tfm-serve against tfm-translate on the same sentences (issue 41), one
interleaved run, 2 threads each, the standard library only.

  python3 bench/serve.py [--build DIR] [--model FILE] [--data FILE]
      [--clients N] [--rounds R] [--int8]

Each round: tfm-translate --model translates the lines offline in one batch
(--batch N), then tfm-serve on the same model answers them sent one
sentence a request by --clients concurrent clients (default 32). Prints
sentences/s of each and their ratio (the best of each side, and each
round's), the CPU, the load average; then the server's peak memory
(VmHWM) idle and after 64 clients. --model defaults to the model the
README trains (runs/translation/model.safetensors) and --data to its 1,000
test sources; without them, tests/marian and made-up sentences.
"""
import argparse
import http.client
import json
import os
import signal
import subprocess
import threading
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument('--build', default=os.path.join(root, 'build'))
parser.add_argument('--model', default=os.path.join(root, 'runs/translation/model.safetensors'))
parser.add_argument('--data', default=os.path.join(root, 'runs/translation/data/test.en'))
parser.add_argument('--clients', type=int, default=32)
parser.add_argument('--rounds', type=int, default=1)
parser.add_argument('--int8', action='store_true')
parser.add_argument('--workers', type=int, default=0,
                    help="the server's decoding workers, which share its 2 threads (0: one "
                         "per thread, the default)")
args = parser.parse_args()
serve = os.path.join(args.build, 'examples/tfm-serve')
translate = os.path.join(args.build, 'examples/tfm-translate')
if os.path.exists(args.model) and os.path.exists(args.data):
    model = args.model
    lines = [l.rstrip('\n') for l in open(args.data, encoding='utf-8')]
else:
    model = os.path.join(root, 'tests/marian')
    lines = ['alpha bravo charlie %d delta echo' % i for i in range(1000)]
    print('note: %s or %s missing: tests/marian (random weights) on made-up lines' % (
        args.model, args.data))
flags = ['--threads', '2'] + (['--int8'] if args.int8 else [])
env = dict(os.environ, OPENBLAS_NUM_THREADS='1')


def cpu():
    for line in open('/proc/cpuinfo'):
        if line.startswith('model name'):
            return line.split(':', 1)[1].strip()
    return 'unknown CPU'


def offline(batch):
    """Sentences/s from the first line read (tfm-translate --timing: the
    model's loading left out), the translations, the peak memory (KiB)."""
    process = subprocess.Popen([translate, '--model', model, '--batch', str(batch), '--timing']
                               + flags, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    out, err = process.communicate('\n'.join(lines) + '\n')
    timing = [l for l in err.splitlines() if 'lines/s' in l]
    if process.returncode or not timing:
        raise SystemExit('tfm-translate failed: ' + err)
    rate = float(timing[0].rsplit('(', 1)[1].split()[0])
    return rate, out.split('\n')[:len(lines)]


def peak_of(command, text):
    """A command's peak memory (KiB) reading text."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env)
    process.stdin.write(text.encode())
    process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    return usage.ru_maxrss


def peak_kib(pid):
    for line in open('/proc/%d/status' % pid):
        if line.startswith('VmHWM:'):
            return int(line.split()[1])
    return 0


class Server:
    def __init__(self):
        threads = ['--workers', str(args.workers)]
        self.process = subprocess.Popen([serve, '--model', model, '--port', '0',
                                         '--max-items', '1024'] + flags + threads,
                                        stdout=subprocess.PIPE, text=True, env=env)
        self.port = int(self.process.stdout.readline().rsplit(':', 1)[1])

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


def ask(port, text):
    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=600)
    try:
        connection.request('POST', '/translate',
                           json.dumps({'q': text, 'source': 'en', 'target': 'fr'}),
                           {'Content-Type': 'application/json'})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def through_server(server, clients):
    """Sentences/s of the lines, clients at once, and their answers."""
    answers = [None] * len(lines)
    next_line = iter(range(len(lines)))
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                i = next(next_line, None)
            if i is None:
                return
            status, value = ask(server.port, lines[i])
            answers[i] = value.get('translatedText') if status == 200 else None

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(lines) / (time.monotonic() - start), answers


print('tfm-serve against tfm-translate: %d sentences of %s, 2 threads, %s' % (
    len(lines), model, cpu()))
print('load average before: %s' % open('/proc/loadavg').read().split()[:3])
best_offline = best_served = 0.0
for r in range(args.rounds):
    rate_offline, expected = offline(len(lines))
    server = Server()
    rate_served, answers = through_server(server, args.clients)
    server.stop()
    wrong = sum(a != e for a, e in zip(answers, expected))
    print('round %d: offline (one batch) %.1f sentences/s, served (%d clients, one sentence '
          'a request) %.1f sentences/s: %.0f%%; %d answers differ from offline' % (
              r + 1, rate_offline, args.clients, rate_served, 100 * rate_served / rate_offline,
              wrong))
    best_offline = max(best_offline, rate_offline)
    best_served = max(best_served, rate_served)
print('sentences/s: tfm-translate %.1f, tfm-serve %.1f, ratio %.0f%%' % (
    best_offline, best_served, 100 * best_served / best_offline))

server = Server()
idle = peak_kib(server.process.pid)
through_server(server, 64)
loaded = peak_kib(server.process.pid)
server.stop()
# One decoding's buffers: tfm-translate decoding batches of 64 (the
# scheduler's largest, max_batch) less tfm-translate with the model loaded
# and nothing to translate. The server decodes as many batches at once as
# it has workers (by default one per thread: 2).
reference = peak_of([translate, '--model', model, '--batch', '64'] + flags,
                    '\n'.join(lines[:256]) + '\n')
loaded_only = peak_of([translate, '--model', model] + flags, '')
workers = args.workers or 2
buffers = max(reference - loaded_only, 0)
bound = idle + workers * buffers
print('peak memory (VmHWM): idle server %.1f MiB, after 64 clients %.1f MiB; one decoding\'s '
      'buffers %.1f MiB (tfm-translate decoding batches of 64, %.1f MiB, less loaded alone, '
      '%.1f MiB); idle + %d decodings %.1f MiB (+10%%: %.1f MiB): %s' % (
          idle / 1024, loaded / 1024, buffers / 1024, reference / 1024, loaded_only / 1024,
          workers, bound / 1024, 1.1 * bound / 1024,
          'within' if loaded <= 1.1 * bound else 'over'))
print('load average after: %s' % open('/proc/loadavg').read().split()[:3])
