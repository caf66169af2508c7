"""tfm-serve as LibreTranslate's clients call it, on loopback, with the
standard library only: every answer equals tfm-translate's offline
translation of its text (tests/marian, a model file trained here, and a
multilingual folder, tests/mbart); 64 clients x 20 requests with none lost
or wrong (latency and rate printed); each fault or bad input answered with
LibreTranslate's error and followed by a request answered right; 400
connections at once; the queue's 429 and the deadline's 503; SIGTERM under
load answering what is in flight, exit 0. Ends with "N passed, N failed".

    usage: check_serve.py TFM_SERVE TFM_TRANSLATE TESTS_DIR
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

serve, translate, tests = sys.argv[1:4]
passed = failed = 0


def step(name, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print('FAILED: ' + name)


class Server:
    """tfm-serve started on a free port, its log kept."""

    def __init__(self, *args):
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([serve, '--port', '0', '--log'] + list(args),
                                        stdout=subprocess.PIPE, stderr=self.log, text=True)
        first = self.process.stdout.readline()
        if 'listening on' not in first:
            self.stop()
            raise SystemExit('tfm-serve did not start: ' + first + self.errors())
        self.port = int(first.rsplit(':', 1)[1])
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True).start()

    def errors(self):
        self.log.seek(0)
        return self.log.read().decode(errors='replace')

    def stop(self, timeout=30):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None


def call(port, method, path, body=None, headers=None, timeout=60):
    """(status, the JSON answer or None, headers)."""
    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = dict({'Content-Type': 'application/json'}, **(headers or {}))
        connection.request(method, path, body, headers or {})
        answer = connection.getresponse()
        data = answer.read()
        try:
            value = json.loads(data) if data else None
        except ValueError:
            value = None
        return answer.status, value, answer
    finally:
        connection.close()


def translate_offline(model, lines, *flags):
    done = subprocess.run([translate, '--model', model] + list(flags),
                          input='\n'.join(lines) + '\n', capture_output=True, text=True,
                          check=True)
    return done.stdout.split('\n')[:len(lines)]


words = ('alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike '
         'november oscar papa quebec romeo sierra tango').split()
sentences = [' '.join(words[(i * 7 + j * 13) % 20] for j in range(1 + i % 6)) for i in range(40)]
sentences += ['Cannot open the file %s', 'Save changes before closing?', 'Größe ändern — «ça»',
              'tab\there', '   ']

scratch = tempfile.mkdtemp()
# A model file of one pair, trained for a few steps on the words and
# their reversals: nonsense, deterministic.
data = os.path.join(scratch, 'data')
os.mkdir(data)
for part, first, count in (('train', 0, 200), ('validation', 200, 20), ('test', 220, 20)):
    with open(os.path.join(data, part + '.en'), 'w') as en, \
            open(os.path.join(data, part + '.fr'), 'w') as fr:
        for i in range(first, first + count):
            line = [words[(i * 7 + j * 13) % 20] for j in range(2 + i % 3)]
            en.write(' '.join(line) + '\n')
            fr.write(' '.join(w[::-1] for w in line) + '\n')
model_file = os.path.join(scratch, 'model.safetensors')
subprocess.run([translate, '--train', '--data', data, '--out', model_file, '--steps', '20',
                '--validate-every', '20', '--vocab-size', '316', '--max-len', '32',
                '--d-model', '32', '--heads', '2', '--layers', '1', '--d-ff', '64',
                '--max-tokens', '400', '--warmup', '5', '--evaluate', '0'],
               check=True, capture_output=True)

marian = os.path.join(tests, 'marian')
mbart = os.path.join(tests, 'mbart')
expected = {
    ('en', 'fr'): translate_offline(marian, sentences),
    ('de', 'en'): translate_offline(model_file, sentences),
    ('es', 'it'): translate_offline(mbart, sentences, '--source-language', 'es_XX',
                                    '--target-language', 'it_IT'),
}
server = Server('--model', 'en:fr=' + marian, '--model', 'de:en=' + model_file,
                '--model', 'es/es_XX,it/it_IT=' + mbart, '--timeout', '2',
                '--threads', '2')
port = server.port


def ask(q, source='en', target='fr', **fields):
    return call(port, 'POST', '/translate', dict(q=q, source=source, target=target, **fields))


def answered_right(i=3, pair=('en', 'fr')):
    status, value, _ = ask(sentences[i], *pair)
    return status == 200 and value == {'translatedText': expected[pair][i]}


# --- the API and correctness ---------------------------------------------------------
status, value, _ = call(port, 'GET', '/languages')
step('GET /languages lists every pair the models serve', status == 200 and sorted(
    (l['code'], t) for l in value for t in l['targets']) == sorted(
    [('en', 'fr'), ('de', 'en'), ('es', 'it'), ('it', 'es')]) and
    {l['code']: l['name'] for l in value}['fr'] == 'French')
for pair, texts in expected.items():
    right = all(ask(s, *pair)[1] == {'translatedText': texts[i]}
                for i, s in enumerate(sentences))
    step('%s -> %s: every text alone is answered as tfm-translate translates it' % pair, right)
    status, value, _ = ask(sentences, *pair)
    step('%s -> %s: q as a list is answered as a list, in order' % pair,
         status == 200 and value == {'translatedText': texts})
form = urllib.parse.urlencode({'q': sentences[5], 'source': 'en', 'target': 'fr',
                               'format': 'text'}).encode()
status, value, _ = call(port, 'POST', '/translate', form,
                        {'Content-Type': 'application/x-www-form-urlencoded'})
step('a form body is read as LibreTranslate reads it',
     status == 200 and value == {'translatedText': expected['en', 'fr'][5]})
status, value, _ = ask(sentences[5], 'auto', 'en')
step('source "auto" takes the one language translated to the target, and says so',
     status == 200 and value == {'translatedText': expected['de', 'en'][5],
                                 'detectedLanguage': {'confidence': 100, 'language': 'de'}})
status, value, _ = ask(sentences[7], alternatives=2)
step('alternatives: up to that many others, as a list',
     status == 200 and isinstance(value['translatedText'], str) and
     isinstance(value['alternatives'], list) and 1 <= len(value['alternatives']) <= 2 and
     value['translatedText'] not in value['alternatives'])
status, value, _ = ask(sentences[:3], alternatives=1)
step('alternatives of a list: a list for each text',
     status == 200 and len(value['translatedText']) == 3 and len(value['alternatives']) == 3)

# --- load -------------------------------------------------------------------------------
def load(clients, each, pair=('en', 'fr')):
    """(lost, wrong, latencies, seconds) of clients x each requests."""
    lost, wrong, latencies = [], [], []

    def client(k):
        for r in range(each):
            i = (k * 31 + r * 7) % len(sentences)
            start = time.monotonic()
            try:
                status, value, _ = ask(sentences[i], *pair)
            except OSError as error:
                lost.append(repr(error))
                continue
            latencies.append(time.monotonic() - start)
            if status != 200 or value != {'translatedText': expected[pair][i]}:
                wrong.append((status, value))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lost, wrong, sorted(latencies), time.monotonic() - start


lost, wrong, latencies, seconds = load(64, 20)
if latencies:
    print('load: 64 clients x 20 requests: %d answered in %.2f s, %.0f requests/s, '
          'latency p50 %.1f ms, p99 %.1f ms' % (
              len(latencies), seconds, len(latencies) / seconds,
              1e3 * latencies[len(latencies) // 2], 1e3 * latencies[int(len(latencies) * 0.99)]))
step('load: 64 clients x 20 requests, none lost (%d), none wrong (%d)' % (len(lost), len(wrong)),
     not lost and not wrong and len(latencies) == 1280)

# --- faults and bad input, each followed by a request answered right ----------------------
def refused(name, status_wanted, message, method='POST', path='/translate', body=None,
            headers=None):
    status, value, _ = call(port, method, path, body, headers)
    ok = status in status_wanted and isinstance(value, dict) and \
        isinstance(value.get('error'), str) and message in value['error']
    if not ok:
        print('  %s: %s %r' % (name, status, value))
    step(name + ': %s {"error": ...}' % '/'.join(map(str, status_wanted)), ok)
    step(name + ': then a request is answered right', answered_right())


json_type = {'Content-Type': 'application/json'}
refused('malformed JSON', [400], 'malformed JSON', body=b'{"q": "a", "source": "en",',
        headers=json_type)
refused('a trailing comma', [400], 'malformed JSON',
        body=b'{"q": "a", "source": "en", "target": "fr",}', headers=json_type)
refused('a JSON list, not an object', [400], 'not a JSON object', body=[1, 2])
refused('q a number', [400], 'q must be a string', body={'q': 5, 'source': 'en', 'target': 'fr'})
refused('q a list holding a number', [400], 'q must be a string',
        body={'q': ['a', 3], 'source': 'en', 'target': 'fr'})
refused('source a number', [400], 'source must be a string',
        body={'q': 'a', 'source': 1, 'target': 'fr'})
refused('alternatives a string', [400], 'alternatives must be',
        body={'q': 'a', 'source': 'en', 'target': 'fr', 'alternatives': 'two'})
refused('missing q', [400], 'Invalid request: missing q parameter',
        body={'source': 'en', 'target': 'fr'})
refused('missing source', [400], 'Invalid request: missing source parameter',
        body={'q': 'a', 'target': 'fr'})
refused('missing target', [400], 'Invalid request: missing target parameter',
        body={'q': 'a', 'source': 'en'})
refused('an unknown target language', [400], 'zz is not supported',
        body={'q': 'a', 'source': 'en', 'target': 'zz'})
refused('an unknown source language', [400], 'xx is not supported',
        body={'q': 'a', 'source': 'xx', 'target': 'fr'})
refused('format html', [400], 'html format is not supported',
        body={'q': 'a', 'source': 'en', 'target': 'fr', 'format': 'html'})
refused('invalid UTF-8', [400], 'not UTF-8',
        body=b'{"q": "caf\xe9 \xff", "source": "en", "target": "fr"}', headers=json_type)
refused('a lone surrogate', [400], 'not UTF-8',
        body=b'{"q": "a\\ud800b", "source": "en", "target": "fr"}', headers=json_type)
refused('an 8 MB body', [413], 'larger than', body=b'{"q": "' + b'a' * (8 << 20) + b'"}',
        headers=json_type)
refused('a list of 100,000 items', [400, 413], '',
        body={'q': ['a'] * 100000, 'source': 'en', 'target': 'fr'})
refused('a list of 129 items (--max-items 128)', [400], 'Request (129) exceeds text limit (128)',
        body={'q': ['a'] * 129, 'source': 'en', 'target': 'fr'})
refused('20,001 characters (--max-chars 20000)', [400],
        'Request (20001) exceeds character limit (20000)',
        body={'q': ['a' * 20000, 'b'], 'source': 'en', 'target': 'fr'})
refused('nesting 100,000 deep', [400], 'malformed JSON',
        body=b'{"x": ' + b'[' * 100000 + b'}', headers=json_type)
refused('an unknown path', [404], 'Not Found', path='/translate/x', body={'q': 'a'})
refused('GET /translate', [405], 'Method Not Allowed', method='GET')
refused('DELETE /languages', [405], 'Method Not Allowed', method='DELETE', path='/languages')


def raw(data, linger=0.0):
    """Sends data on a connection, waits linger seconds, and hangs up."""
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(data)
    time.sleep(linger)
    s.close()


start = time.monotonic()
stalled = socket.create_connection(('127.0.0.1', port))
stalled.sendall(b'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Ty')
step('a client stalled after half its headers: others are answered meanwhile', answered_right())
stalled.settimeout(10)
try:
    stalled.recv(100)  # b'' or an error status: the server has closed it
    closed = True
except socket.timeout:
    closed = False
except OSError:
    closed = True
step('a client stalled after half its headers is closed after --timeout (%.1f s)' % (
    time.monotonic() - start), closed and time.monotonic() - start < 8)
stalled.close()
step('... then a request is answered right', answered_right())
raw(b'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
    b'Content-Length: 1000\r\n\r\n{"q": "alpha bravo", "sou', 0.2)
step('a client that hangs up mid-body: then a request is answered right', answered_right())
raw(b'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
    b'Content-Length: 1000\r\n\r\n')
raw(b'\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03' + os.urandom(200), 0.2)
step('a TLS hello and a hang-up after the headers: then a request is answered right',
     answered_right())

# 400 connections at once, each sending a request: answered (or refused
# with 429/503), none dropped.
outcomes = []


def one(k):
    try:
        status, value, _ = ask(sentences[k % 40])
        outcomes.append('right' if status == 200 and
                        value == {'translatedText': expected['en', 'fr'][k % 40]} else
                        'busy' if status in (429, 503) else 'wrong %s' % status)
    except OSError as error:
        outcomes.append('dropped: %r' % error)


threads = [threading.Thread(target=one, args=(k,)) for k in range(400)]
for t in threads:
    t.start()
for t in threads:
    t.join()
counts = {o: outcomes.count(o) for o in set(outcomes)}
print('400 connections at once: %s' % counts)
step('400 connections at once: each answered right or refused with 429/503, none dropped',
     len(outcomes) == 400 and set(outcomes) <= {'right', 'busy'})
step('... then a request is answered right', answered_right())

# The queue and the deadline, on a server of their own.
small = Server('--model', 'en:fr=' + marian, '--queue', '4', '--deadline-ms', '1')
status, value, answer = call(small.port, 'POST', '/translate',
                             {'q': sentences[:20], 'source': 'en', 'target': 'fr'})
step('more texts than --queue: 429 with Retry-After', status == 429 and
     answer.getheader('Retry-After') == '1' and 'Slowdown' in value['error'])
status, value, answer = call(small.port, 'POST', '/translate',
                             {'q': sentences[3], 'source': 'en', 'target': 'fr'})
step('past --deadline-ms: 503 with Retry-After', status == 503 and
     answer.getheader('Retry-After') == '1' and 'deadline' in value['error'])
step('the small server exits 0 on SIGTERM', small.stop() == 0)

# --- SIGTERM under load -------------------------------------------------------------------
sent, after = [], []
signalled = []


def busy(k):
    while not signalled:
        i = (k * 13) % 40
        connection = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
        was_before = False
        try:
            connection.request('POST', '/translate',
                               json.dumps({'q': sentences[i:i + 5], 'source': 'en',
                                           'target': 'fr'}),
                               {'Content-Type': 'application/json'})
            was_before = not signalled
            answer = connection.getresponse()
            value = json.loads(answer.read())
            (sent if was_before else after).append(
                answer.status == 200 and value['translatedText'] == expected['en', 'fr'][i:i + 5])
        except OSError:  # refused once stopped; lost when it was sent before
            (sent if was_before else after).append(False)
        finally:
            connection.close()


threads = [threading.Thread(target=busy, args=(k,)) for k in range(32)]
for t in threads:
    t.start()
time.sleep(1.0)
signalled.append(time.monotonic())
server.process.send_signal(signal.SIGTERM)
code = server.stop(30)
for t in threads:
    t.join()
print('SIGTERM under load: %d requests sent before it, %d answered right' % (
    len(sent), sum(sent)))
step('SIGTERM under load: every request sent before it is answered right',
     sent and all(sent))
step('SIGTERM under load: exit 0', code == 0)
if code != 0 or not all(sent):
    print('the server exited with %s and said:\n' % code + '\n'.join(l for l in server.errors().splitlines()
                                             if ' ms' not in l)[-3000:])
log = server.errors().splitlines()
step('--log: one line a request', sum(' POST /translate ' in l for l in log) > 1280 and
     all(' ms' in l for l in log if ' POST ' in l))
print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
