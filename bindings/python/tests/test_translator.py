"""tfm.Translator on tests/marian (a tiny random Marian model as transformers
saves it, with what transformers' generate gives for it in expected.json):
the defaults are C's and transformers', results come back in order and
shape, requests are batched, cancelled, timed out and refused when the
queue is full, and Python threads translate at once without the GIL."""
import gc
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import tfm
from tfm import ffi, lib

FOLDER = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tests', 'marian')
EXPECTED = json.load(open(os.path.join(FOLDER, 'expected.json')))
SOURCES = [case['source'] for case in EXPECTED['cases']]


@pytest.fixture(scope='module')
def translator():
    with tfm.Translator(FOLDER) as opened:
        yield opened


def c_translate(translator, texts):
    """tfm_translate with options NULL, straight through cffi: (ids, score)
    of each text's best hypothesis."""
    kept = [ffi.new('char[]', text.encode()) for text in texts]
    out = ffi.new('tfm_translation **')
    tfm.check(lib.tfm_translate(translator._ptr(), ffi.new('char *[]', kept), len(kept),
                                ffi.NULL, out))
    try:
        count = ffi.new('int64_t *')
        found = []
        for i in range(len(texts)):
            ids = lib.tfm_translation_ids(out[0], i, 0, count)
            found.append((ffi.unpack(ids, count[0]), lib.tfm_translation_score(out[0], i, 0)))
        return found
    finally:
        lib.tfm_translation_free(out[0])


# --- the defaults -----------------------------------------------------------------------
def test_the_defaults_give_transformers_output_and_c_translates_the_same(translator):
    """No options: the folder's generation_config.json (beam 4, renormalized,
    max_length 24), as transformers' generate gave it, and tfm_translate's
    own defaults bit for bit."""
    results = translator.translate(SOURCES, return_scores=True)
    assert translator.translate(SOURCES) == [r.text for r in results]
    for case, result, (ids, score) in zip(EXPECTED['cases'], results,
                                         c_translate(translator, SOURCES)):
        want = case['beam']
        assert result.ids.tolist() == want['ids'] == ids
        assert result.text == want['text']
        assert result.score == score
        assert abs(result.score - want['score']) <= 2e-5 * (1 + abs(want['score']))


def tfm_translate_program():
    """tfm-translate beside the library the package loads: PREFIX/bin of an
    install (lib/ or lib/<multiarch>/), or a build's examples/."""
    libdir = os.path.dirname(os.path.realpath(tfm.library_path))
    for relative in ('../bin', '../../bin', '../examples'):
        program = os.path.join(libdir, relative, 'tfm-translate')
        if os.access(program, os.X_OK):
            return program
    pytest.skip('no tfm-translate beside %s' % tfm.library_path)


def test_tfm_translate_prints_what_translate_gives(translator):
    printed = subprocess.run([tfm_translate_program(), '--model', FOLDER],
                             input='\n'.join(SOURCES) + '\n', capture_output=True, text=True,
                             check=True).stdout
    assert printed.splitlines() == translator.translate(SOURCES)


def test_the_defaults_are_the_models_decoding_defaults(translator):
    """translate's ids and scores are a tfm.Decoding's with the model's own
    options (tfm_decode_options_from_model) and the translator's length."""
    model = tfm.Model.from_pretrained(FOLDER)
    defaults = translator.decode_options
    assert defaults['strategy'] == 'beam' and defaults['beam_size'] == 4
    assert defaults['max_length'] == EXPECTED['generation_config']['beam']['max_length'] - 1
    for source, result in zip(SOURCES, translator.translate(SOURCES, return_scores=True)):
        src = np.array([model.encode_text(source)], np.int32)
        decoded = tfm.Decoding(model, 1, src.shape[1],
                               max_length=defaults['max_length']).run(src)
        assert decoded.tokens[0, :decoded.lengths[0]].tolist() == result.ids.tolist()
        assert decoded.scores[0] == result.score


def test_the_defaults_given_as_options_translate_as_none(translator):
    """decode_options, passed back field by field (tfm_translate_options'
    decode set), gives what no options (decode NULL) gives."""
    given = translator.translate(SOURCES, return_scores=True, **translator.decode_options)
    for got, want in zip(given, translator.translate(SOURCES, return_scores=True)):
        assert (got.ids.tolist(), got.score) == (want.ids.tolist(), want.score)


def test_options_given_change_only_their_field(translator):
    greedy = translator.translate(SOURCES, strategy='greedy', return_scores=True)
    for case, result in zip(EXPECTED['cases'], greedy):
        assert result.ids.tolist() == case['greedy']['ids']
    short = translator.translate(SOURCES[0], max_length=3, return_scores=True)
    assert len(short.ids) <= 4 and short.ids.tolist()[:4] != EXPECTED['cases'][0]['beam']['ids']
    assert translator.translate(SOURCES[0], beam_size=4) == EXPECTED['cases'][0]['beam']['text']
    sampled = [translator.translate(SOURCES[0], strategy='sample', seed=s) for s in (1, 1, 2)]
    assert sampled[0] == sampled[1]
    plain = translator.translate(SOURCES[0], renormalize_logits=False, return_scores=True)
    assert abs(plain.score - EXPECTED['cases'][0]['beam']['score']) > 1e-4


def test_options_are_checked(translator):
    with pytest.raises(TypeError, match='unexpected keyword colour'):
        translator.translate('a', colour=1)
    with pytest.raises(TypeError, match='return_attention'):
        translator.translate('a', return_attention=1)  # return_alignments is the way
    with pytest.raises(tfm.ArgumentError):
        translator.translate('a', beam_size=0)
    with pytest.raises(ValueError, match='beam_rules'):
        translator.translate('a', beam_rules='fairseq')
    with pytest.raises(tfm.ArgumentError):
        tfm.Translator(FOLDER, max_batch=0)


# --- results ----------------------------------------------------------------------------
def test_a_str_gives_a_str_and_a_list_a_list_in_its_order(translator):
    one = [translator.translate(s) for s in SOURCES]
    assert all(isinstance(t, str) for t in one)
    mixed = SOURCES[::-1] + ['', '   '] + SOURCES
    assert translator.translate(mixed) == one[::-1] + ['', ''] + one
    assert translator.translate([]) == []
    assert translator.translate(tuple(SOURCES)) == one


def test_n_best_scores_and_alignments(translator):
    results = translator.translate(SOURCES, n_best=3, return_alignments=True)
    for result in results:
        assert isinstance(result, tfm.Translation) and len(result.hypotheses) == 3
        best = result.hypotheses[0]
        assert (best.text, best.score, best.ids.tolist()) == \
            (result.text, result.score, result.ids.tolist())
        assert best.alignment is result.alignment
        scores = [h.score for h in result.hypotheses]
        assert scores == sorted(scores, reverse=True)
        for h in result.hypotheses:
            assert h.ids.dtype == np.int32 and h.alignment.dtype == np.float32
            assert h.alignment.shape[0] == len(h.ids) - 1
            np.testing.assert_allclose(h.alignment.sum(axis=1), 1, rtol=1e-4)
        assert not result.truncated
    assert results[0].hypotheses[0].text == translator.translate(SOURCES[0])
    assert results[0]._asdict()['text'] == results[0].text


def test_alignments_do_not_depend_on_the_batch(translator):
    alone = translator.translate(SOURCES[1], return_alignments=True)
    batched = translator.translate(SOURCES, return_alignments=True)[1]
    assert alone.alignment.shape == (len(alone.ids) - 1, alone.source_tokens)
    np.testing.assert_array_equal(batched.alignment, alone.alignment)


def test_a_long_source_is_cut_and_says_so(translator):
    long = ' '.join(SOURCES * 10)
    result = translator.translate(long, return_scores=True)
    assert result.truncated and result.source_tokens == lib.tfm_model_max_src_len(
        lib.tfm_translator_model(translator._ptr()))
    assert not translator.translate(SOURCES[0], return_scores=True).truncated


# --- opening --------------------------------------------------------------------------
def test_from_model_and_int8_translate_as_the_folder(tmp_path):
    model = tfm.Model.from_pretrained(FOLDER)
    with tfm.Translator.from_model(model) as over:
        with tfm.Translator(FOLDER) as opened:
            assert over.translate(SOURCES) == opened.translate(SOURCES)
    quantized = tfm.Model.from_pretrained(FOLDER).quantize(generator=True)
    with tfm.Translator(FOLDER, int8=True) as int8:
        want = int8.translate(SOURCES, return_scores=True)
        got = tfm.Translator.from_model(quantized).translate(SOURCES, return_scores=True)
        assert [(r.ids.tolist(), r.score) for r in want] == \
            [(r.ids.tolist(), r.score) for r in got]
    translator = tfm.Translator.from_model(model)
    model.close()  # the translator reads the model: it goes first
    assert translator.closed
    with pytest.raises(tfm.ClosedError):
        translator.translate('a')


def test_opening_errors_are_the_librarys():
    with pytest.raises(tfm.FileError):
        tfm.Translator('/nonexistent/model.safetensors')
    bare = tfm.Model(src_vocab=13, tgt_vocab=11, max_src_len=6, max_tgt_len=5, d_model=16,
                     heads=2, encoder_layers=1, decoder_layers=1, d_ff=32, bos_id=1,
                     eos_id=2, pad_id=0)
    with pytest.raises(tfm.StateError, match='tokenizers'):
        tfm.Translator.from_model(bare)
    with pytest.raises(TypeError):
        tfm.Translator.from_model(FOLDER)


# --- threads ----------------------------------------------------------------------------
def test_python_threads_translate_at_once_with_the_same_results(translator):
    texts = [s + ' ' + str(i) for i in range(8) for s in SOURCES]
    alone = translator.translate(texts)
    found, errors = {}, []

    def work(k):
        try:
            found[k] = [translator.translate(texts[k::4]) for _ in range(3)]
        except BaseException as raised:  # noqa: B902 - reported below
            errors.append(raised)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for k in range(4):
        assert found[k] == [alone[k::4]] * 3


def test_translate_releases_the_gil(translator):
    """While one thread is inside tfm_translate, this one keeps running: the
    longest pause between its steps is a fraction of the call (holding the
    GIL, it would be the whole call)."""
    texts = [s + ' ' + str(i) for i in range(60) for s in SOURCES]
    span = []

    def call():
        start = time.perf_counter()
        translator.translate(texts)
        span.extend([start, time.perf_counter()])
    thread = threading.Thread(target=call)
    thread.start()
    steps = []
    while thread.is_alive():
        steps.append(time.perf_counter())
    thread.join()
    start, end = span
    inside = [t for t in steps if start <= t <= end]
    assert end - start > 0.02, 'the call is too short to tell'
    gaps = np.diff([start] + inside + [end])
    assert gaps.max() < 0.5 * (end - start), (gaps.max(), end - start)


def test_close_waits_for_the_calls_other_threads_make():
    translator = tfm.Translator(FOLDER)
    texts = [s + ' ' + str(i) for i in range(60) for s in SOURCES]
    alone = translator.translate(texts)
    found, inside = [], threading.Event()

    def call():
        inside.set()
        found.append(translator.translate(texts))
    thread = threading.Thread(target=call)
    thread.start()
    inside.wait()
    time.sleep(0.01)
    translator.close()  # freeing the translator under tfm_translate crashed
    thread.join()
    assert found == [alone]
    with pytest.raises(tfm.ClosedError):
        translator.translate('a')


# --- requests ---------------------------------------------------------------------------
def test_requests_from_threads_give_what_translate_gives():
    """Callers' requests with mixed options, batched together by the
    scheduler, give each text what translate gives it alone."""
    jobs = [(s + ' ' + str(i), options) for i in range(6) for s in SOURCES
            for options in ({}, {'strategy': 'greedy'}, {'n_best': 2})]
    with tfm.Translator(FOLDER, workers=2, max_wait_ms=20) as translator:
        alone = [translator.translate(text, **options) for text, options in jobs]
        requests = [None] * len(jobs)

        def submit(k):
            for i in range(k, len(jobs), 4):
                requests[i] = translator.submit(jobs[i][0], **jobs[i][1])
        threads = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for request, want in zip(requests, alone):
            got = request.result(timeout=60)
            if isinstance(want, tfm.Translation):
                assert [(h.text, h.ids.tolist(), h.score) for h in got.hypotheses] == \
                    [(h.text, h.ids.tolist(), h.score) for h in want.hypotheses]
            else:
                assert got == want
            assert request.done() and not request.cancelled()


def test_a_waiting_request_is_cancelled_and_times_out_its_wait():
    with tfm.Translator(FOLDER, max_wait_ms=60000) as translator:  # waits for a full batch
        request = translator.submit(SOURCES[0])
        with pytest.raises(TimeoutError):
            request.result(timeout=0.05)
        assert not request.done() and repr(request) == 'tfm.Request(pending)'
        assert request.cancel()
        assert request.done() and request.cancelled() and not request.cancel()
        with pytest.raises(tfm.CancelledError, match='cancelled'):
            request.result()
        assert isinstance(request.exception(), tfm.CancelledError)


def test_a_request_past_its_deadline_fails_with_timeout_error():
    with tfm.Translator(FOLDER, max_wait_ms=100) as translator:
        late = translator.submit(SOURCES[0], deadline_ms=1)
        in_time = translator.submit(SOURCES[1], deadline_ms=60000)
        with pytest.raises(tfm.TimeoutError, match='deadline') as raised:
            late.result()
        assert isinstance(raised.value, TimeoutError)  # the builtin's too
        assert in_time.result() == translator.translate(SOURCES[1])


def test_a_full_queue_refuses_with_busy_error_and_closing_cancels_what_waits():
    translator = tfm.Translator(FOLDER, queue_capacity=1, max_wait_ms=60000)
    waiting = translator.submit(SOURCES[0])
    with pytest.raises(tfm.BusyError, match='capacity'):
        translator.submit(SOURCES[1])
    translator.close()
    with pytest.raises(tfm.CancelledError):
        waiting.result()
    with pytest.raises(tfm.ClosedError):
        translator.submit(SOURCES[0])


def test_on_token_streams_and_stops():
    with tfm.Translator(FOLDER) as translator:
        seen = []
        request = translator.submit(SOURCES[0], strategy='greedy',
                                    on_token=lambda token, text: seen.append((token, text)))
        text = request.result()
        assert text == translator.translate(SOURCES[0], strategy='greedy')
        ids = EXPECTED['cases'][0]['greedy']['ids']
        assert [token for token, _ in seen] == ids[1:] and seen[-1][1] == text
        assert all(isinstance(t, str) for _, t in seen)

        stopped = translator.submit(SOURCES[0], strategy='greedy', return_scores=True,
                                    on_token=lambda token, text: True)
        assert len(stopped.result().ids) < len(ids)

        def broken(token, text):
            raise KeyError('from on_token')
        with pytest.raises(KeyError, match='from on_token'):
            translator.submit(SOURCES[0], on_token=broken).result()


def test_a_streaming_request_dropped_unfinished_is_safe():
    """A request dropped before it finished is cancelled; its on_token may
    still run on the scheduler's thread until then, and does no harm."""
    calls = []
    with tfm.Translator(FOLDER, max_wait_ms=1) as translator:
        for source in SOURCES * 5:
            translator.submit(source, strategy='greedy',
                              on_token=lambda token, text: calls.append(token))
            gc.collect()
        assert translator.translate(SOURCES[0])
    from tfm import _translate
    assert not _translate._streams  # every on_done has run


def test_texts_are_checked(translator):
    with pytest.raises(TypeError, match='one text'):
        translator.submit(SOURCES)
    for call in (translator.translate, translator.submit):
        with pytest.raises(ValueError, match='null byte'):
            call('a\0b')
    with pytest.raises(ValueError, match='null byte'):
        translator.translate(['a', 'b\0'])
    with pytest.raises(ValueError, match='null byte'):
        translator.translate('a', target_prefix='\0')


def test_the_models_decoders_take_encode_texts_ragged_ids():
    """model.beam(model.encode_text([a, b])): ids of different lengths are
    padded with the model's pad_id, and each source decodes as it does
    alone."""
    model = tfm.Model.from_pretrained(FOLDER)
    ragged = model.encode_text(SOURCES[:2])
    assert len(ragged[0]) != len(ragged[1])
    tokens, scores = model.beam(ragged)
    alone, alone_scores = model.beam([ragged[1]])
    assert tokens.shape[0] == 2
    assert (tokens[1] == alone[0]).all() and scores[1] == alone_scores[0]
    assert model.greedy(ragged).shape[0] == 2
    model.close()


def test_fine_tuning_with_frozen_parts():
    """A published folder fine-tuned a few steps, its embeddings and encoder
    frozen: those stay bit for bit, the decoder moves, the loss falls."""
    model = tfm.Model.from_pretrained(FOLDER).freeze('embeddings', 'encoder').train()
    assert model.frozen == ('embeddings', 'encoder')
    before = model.state_dict()
    src = np.array([model.encode_text('Hello world')], np.int32)
    target = model.target_tokenizer.encode('Bonjour le monde')
    tgt_in = np.array([[model.options['bos_id']] + target], np.int32)
    labels = np.array([target + [model.options['eos_id']]], np.int32)
    adam, tape = tfm.AdamW(model, lr=1e-2), tfm.Tape()
    causal = tfm.causal_mask(tgt_in.shape[1])
    losses = []
    for _ in range(20):
        with tape:
            loss = tfm.cross_entropy(model.forward(src, tgt_in, tgt_mask=causal), labels)
            adam.zero_grad(); loss.backward(); adam.step()
            losses.append(float(loss.numpy()))
    assert losses[-1] < 0.5 * losses[0]
    after = model.state_dict()
    for name, values in before.items():
        if name.startswith('encoder.') or 'embedding' in name:
            assert np.array_equal(values, after[name]), name
        elif name.startswith('decoder.') and values.ndim == 2:
            assert not np.array_equal(values, after[name]), name
    assert model.freeze().frozen == ()
    with pytest.raises(tfm.ArgumentError, match="'attention' is not a part"):
        model.freeze('attention')


def test_glossary_terms_are_placed(translator):
    """A glossary's target term where the text holds its source term, in
    translate and submit; a term too long for max_length is unplaced."""
    glossary = {'FILE': 'Datei', 'folder': 'Verzeichnis'}
    assert 'Datei' in translator.translate('Cannot open the file', glossary=glossary)
    assert 'Datei' in translator.submit('Cannot open the file', glossary=glossary).result()
    found = translator.translate('the folder and the file', glossary=list(glossary.items()),
                                 max_length=1, return_scores=True)
    assert 1 in found.unplaced
    assert translator.translate('the file', return_scores=True).unplaced == []
    with pytest.raises(tfm.ArgumentError):
        translator.translate('the file', glossary={'file': ''})


def test_keep_placeholders_is_an_option():
    """keep_placeholders=False opens the same model; a bad value is refused
    by C (0 or 1 only: Python passes a bool)."""
    with tfm.Translator(FOLDER, keep_placeholders=False) as plain:
        assert plain.translate(SOURCES[0]) == tfm.Translator(FOLDER).translate(SOURCES[0])


def test_literals_are_options(translator):
    """literals= reaches C (a model without placeholder pieces ignores
    them; an empty one is refused)."""
    assert translator.translate('the file', literals=['file']) == translator.translate('the file')
    with pytest.raises(tfm.ArgumentError):
        translator.translate('the file', literals=[''])
