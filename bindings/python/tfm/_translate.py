"""The translator: text in, text out, from any number of threads."""
import atexit
import collections
import threading
import time
import weakref

import numpy as np

from ._binding import ffi, lib
from ._core import (Handle, c_path, c_string, c_strings, check, check_pointer, error,
                    raise_last_error)
from ._model import (_BEAM_RULES, _CACHE_PRECISIONS, _EARLY_STOPPING, Model, _choice,
                     _token_lists, options, options_dict)
from ._text import _is_one_text

Hypothesis = collections.namedtuple('Hypothesis', 'text score ids alignment')
Hypothesis.__doc__ = """One hypothesis of a translation: its text, its score (the
decoding's: beam search's ranked score, greedy's and sampling's sum of log
probabilities), its target ids as decoding wrote them (numpy int32: the
start token, the tokens, the end token when produced) and, with
return_alignments, its alignments (numpy float32 [len(ids) - 1, source
tokens]: the last decoder layer's cross-attention weights, averaged over
its heads, that chose each token), else None."""

Translation = collections.namedtuple(
    'Translation', 'text score ids alignment hypotheses source_tokens truncated unplaced')
Translation.__doc__ = """One text's translation, with return_scores, return_alignments
or n_best: the best hypothesis' text, score, ids and alignment (see
tfm.Hypothesis); hypotheses, the n_best hypotheses best first
(hypotheses[0] is the best; CTranslate2's result.hypotheses and
result.scores); source_tokens, the ids decoded (those around the text
included: at most the model's longest source); truncated, whether the
text was cut to fit them (transformers' truncation); unplaced, the
glossary's terms (their indices) the best hypothesis could not place. _asdict() gives a dict."""

# The decoding options translate and submit take by keyword, beside their
# own arguments: tfm_decode_options' fields, except what the translator
# owns (the callback: on_token; return_attention: return_alignments; the
# arrays' counts: given as lists).
_NOT_KEYWORDS = ('struct_size', 'callback', 'callback_user', 'return_attention',
                 'n_suppress_ids', 'n_eos_ids', 'n_bad_words', 'bad_word_lengths', 'adapter')
_KEYWORDS = tuple(name for name, _ in ffi.typeof('tfm_decode_options').fields
                  if name not in _NOT_KEYWORDS)
_CHOICES = {'beam_rules': _BEAM_RULES, 'early_stopping': _EARLY_STOPPING,
            'cache_precision': _CACHE_PRECISIONS}


def _c_text(text, kept):
    """A str (or bytes) as a NUL-terminated C string kept alive in kept;
    None as NULL."""
    if text is None:
        return ffi.NULL
    kept.append(ffi.new('char[]', c_string(text)))
    return kept[-1]


def _decode_options(translator, fields):
    """The translator's (pointer's) decoding defaults with fields changed."""
    def defaults(o, size):
        lib.tfm_decode_options_init_sized(o, size)
        check(lib.tfm_translator_decode_options(translator, o))
    return options('tfm_decode_options', defaults, fields)


class _Call:
    """One translate or submit call's C options (tfm_translate_options and
    its tfm_decode_options), with everything they point to kept alive.
    decode stays NULL (the translator's defaults) unless a decoding option
    is given."""

    def __init__(self, translator, beam_size, max_length, n_best, return_alignments,
                 source_language, target_language, target_prefix, decode_options,
                 adapter=None, glossary=None, literals=None):
        """translator: the tfm_translator's pointer."""
        unknown = sorted(set(decode_options) - set(_KEYWORDS))
        if unknown:
            raise TypeError('unexpected keyword %s (the decoding options: %s)' % (
                ', '.join(unknown), ', '.join(_KEYWORDS)))
        fields = {k: v for k, v in decode_options.items() if v is not None}
        for name, choices in _CHOICES.items():
            if name in fields:
                fields[name] = _choice(name, fields[name], choices)
        if beam_size is not None:
            fields.setdefault('strategy', 'beam')
            fields['beam_size'] = beam_size
        for name, value in (('max_length', max_length), ('n_best', n_best)):
            if value is not None:
                fields[name] = value
        if return_alignments:
            fields['return_attention'] = 1
        self._kept = [_token_lists(fields)]
        self.options = options('tfm_translate_options', lib.tfm_translate_options_init_sized, {})
        if fields:
            self.decode = _decode_options(translator, fields)
            self.options.decode = self.decode
        self.options.source_language = _c_text(source_language, self._kept)
        self.options.target_language = _c_text(target_language, self._kept)
        self.options.target_prefix = _c_text(target_prefix, self._kept)
        self.options.adapter = _c_text(adapter, self._kept)
        if glossary:
            pairs = list(glossary.items() if hasattr(glossary, 'items') else glossary)
            terms = [_c_text(term, self._kept) for pair in pairs for term in pair]
            if len(terms) != 2 * len(pairs):
                raise TypeError('glossary: (source term, target term) pairs, or a dict')
            self._kept.append(ffi.new('const char *[]', terms))
            self.options.glossary = self._kept[-1]
            self.options.n_glossary = len(pairs)
        if literals:
            spans = [_c_text(literal, self._kept) for literal in literals]
            self._kept.append(ffi.new('const char *[]', spans))
            self.options.literals = self._kept[-1]
            self.options.n_literals = len(spans)


def _hypothesis(result, i, h):
    text = check_pointer(lib.tfm_translation_text(result, i, h))
    count = ffi.new('int64_t *')
    ids = lib.tfm_translation_ids(result, i, h, count)
    if ids == ffi.NULL and count[0] != 0:
        raise_last_error()
    score = lib.tfm_translation_score(result, i, h)
    sizes = ffi.new('int64_t[2]')
    weights = lib.tfm_translation_alignment(result, i, h, sizes, sizes + 1)
    if weights == ffi.NULL:  # not asked for (TFM_ERR_STATE)
        lib.tfm_clear_error()
        alignment = None
    else:
        alignment = np.frombuffer(ffi.buffer(weights, 4 * sizes[0] * sizes[1]),
                                  np.float32).reshape(sizes[0], sizes[1]).copy()
    return Hypothesis(ffi.string(text).decode('utf-8', errors='replace'), float(score),
                      np.frombuffer(ffi.buffer(ids, 4 * count[0]), np.int32).copy()
                      if count[0] else np.zeros(0, np.int32), alignment)


def _translations(result, rich):
    """A tfm_translation's texts as str, or as Translations when rich."""
    count = lib.tfm_translation_count(result)
    if not rich:
        return [ffi.string(check_pointer(lib.tfm_translation_text(result, i, 0)))
                .decode('utf-8', errors='replace') for i in range(count)]
    n_best = lib.tfm_translation_n_best(result)
    out, tokens, truncated = [], ffi.new('int64_t *'), ffi.new('int32_t *')
    for i in range(count):
        hypotheses = [_hypothesis(result, i, h) for h in range(n_best)]
        check(lib.tfm_translation_source_tokens(result, i, tokens, truncated))
        terms, count = ffi.new('const int32_t **'), ffi.new('int32_t *')
        check(lib.tfm_translation_unplaced(result, i, 0, terms, count))
        out.append(Translation(*hypotheses[0], hypotheses, int(tokens[0]), bool(truncated[0]),
                               [terms[0][k] for k in range(count[0])]))
    return out


# --- streaming --------------------------------------------------------------------------
# A request's on_token runs on a scheduler thread, possibly after the
# Python request was collected: its function waits here, under a cffi
# handle, until the request's on_done (called once, last) lets it go. The
# two C callbacks are made once and never freed.
_streams = {}
_streams_lock = threading.Lock()


class _Stream:
    def __init__(self, function):
        self.function, self.error = function, None
        self.handle = ffi.new_handle(self)
        self.key = _key(self.handle)


def _key(handle):
    return int(ffi.cast('uintptr_t', handle))


@ffi.callback('tfm_translate_token_fn')
def _on_token(user, token, text, length):
    stream = ffi.from_handle(user)
    try:
        return 1 if stream.function(int(token), ffi.unpack(text, length).decode(
            'utf-8', errors='replace')) else 0
    except BaseException as raised:  # noqa: B902 - raised again by result()
        if stream.error is None:
            stream.error = raised
        return 1


@ffi.callback('tfm_request_done_fn')
def _on_done(user, request):
    with _streams_lock:
        _streams.pop(_key(user), None)


# Translators still open when the interpreter exits are closed first, so
# that no scheduler thread calls into Python once it has gone.
_open = weakref.WeakSet()


@atexit.register
def _close_all():
    for translator in list(_open):
        translator.close()


# --- the translator ---------------------------------------------------------------------
def _translator_options(kept, int8=False, source_language=None, target_language=None,
                        **fields):
    """tfm_translator_options with the fields given (None: the default's);
    its strings kept alive in kept."""
    o = options('tfm_translator_options', lib.tfm_translator_options_init_sized,
                {k: v for k, v in fields.items() if v is not None})
    o.int8 = int(int8)
    o.source_language = _c_text(source_language, kept)
    o.target_language = _c_text(target_language, kept)
    return o


class Translator(Handle):
    """Text in, text out (tfm_translator), from any number of threads:

        translator = tfm.Translator('opus-mt-en-de')  # a folder save_pretrained wrote
        translator.translate('Hello world')           # a str: 'Hallo Welt'
        translator.translate(texts, beam_size=5, return_scores=True)  # Translations

    (transformers' pipeline('translation')(text)[0]['translation_text'] and
    CTranslate2's translate_batch(tokens)[0].hypotheses[0] are
    translate(text); Translation.hypotheses and their scores are
    CTranslate2's n-best.) Opened from path: a model file
    (tfm.Model.save, tfm-translate) or a published model's folder
    (tfm.Model.from_pretrained's), float32, or int8 with int8=True (a
    quantized file is int8 anyway); a multilingual model's
    source_language and target_language by their codes ('en_XX',
    'eng_Latn', 'en'). max_batch_tokens (source tokens in one decoding
    run, padding included; default 4096), max_batch (sources in one run;
    64), workers (submit's scheduler threads; 0: one per libtfm thread), max_wait_ms (how long
    the scheduler waits for a batch to fill; 5) and queue_capacity
    (requests waiting, at most; 1024): None keeps the default.
    keep_placeholders (default True): on a model trained with placeholder
    pieces (tfm-translate --train), printf directives, Python and shell
    fields, tags and entities pass through unchanged, each exactly as
    often as the source holds it (unnumbered printf directives in order);
    False translates them as text. translate
    and submit may be called from any number of Python threads at once
    (libtfm runs them without the GIL, over one copy of the weights); a
    translation never depends on what it was batched with."""
    _free = lib.tfm_translator_free
    _copy_advice = 'open another tfm.Translator'

    def __init__(self, path, int8=False, source_language=None, target_language=None,
                 max_batch_tokens=None, max_batch=None, workers=None, max_wait_ms=None,
                 queue_capacity=None, keep_placeholders=True):
        kept = []
        o = _translator_options(kept, int8, source_language, target_language,
                                max_batch_tokens=max_batch_tokens, max_batch=max_batch,
                                workers=workers, max_wait_ms=max_wait_ms,
                                queue_capacity=queue_capacity,
                                keep_placeholders=int(bool(keep_placeholders)))
        self._made(lib.tfm_translator_open(c_path(path), o))

    def _made(self, pointer, model=None):
        super().__init__(check_pointer(pointer), model)
        # close() waits for the calls other threads are making
        self._calls, self._idle = 0, threading.Condition()
        _open.add(self)

    def _enter(self):
        with self._idle:
            pointer = self._ptr()
            self._calls += 1
        return pointer

    def _leave(self):
        with self._idle:
            self._calls -= 1
            self._idle.notify_all()

    @classmethod
    def from_model(cls, model, max_batch_tokens=None, max_batch=None, workers=None,
                   max_wait_ms=None, queue_capacity=None, keep_placeholders=True):
        """A translator over a tfm.Model that holds its tokenizers (a
        published folder's, or set_tokenizers'), quantized and with its
        languages chosen beforehand if at all. The translator keeps the
        model alive, and closing the model closes it; the model must not
        be trained, loaded into or quantized while the translator lives."""
        if not isinstance(model, Model):
            raise TypeError('from_model takes a tfm.Model, not %s' % type(model).__name__)
        o = _translator_options([], max_batch_tokens=max_batch_tokens, max_batch=max_batch,
                                workers=workers, max_wait_ms=max_wait_ms,
                                queue_capacity=queue_capacity,
                                keep_placeholders=int(bool(keep_placeholders)))
        translator = cls.__new__(cls)
        translator._made(lib.tfm_translator_create(model._ptr(), o), model)
        return translator

    def close(self):
        """Waits for the translate and submit calls other threads are
        making, stops the scheduler (requests not yet decoded end with
        CancelledError, those being decoded are finished), then frees the
        translator; requests keep their results."""
        _open.discard(self)
        with self._idle:
            while self._calls:
                self._idle.wait()
            super().close()

    @property
    def decode_options(self):
        """The decoding options a translation uses when given none
        (tfm_translator_decode_options: the model's special tokens and
        published defaults, max_length at most the model's max_tgt_len - 1,
        the ids that are never text suppressed), by field name as
        translate takes them (translate(texts, **decode_options) is
        translate(texts)); the same in C, Python and tfm-translate."""
        pointer = self._enter()
        try:  # the arrays are the translator's
            o = _decode_options(pointer, {})
            found = options_dict('tfm_decode_options', o)
            for name in ('suppress_ids', 'eos_ids'):
                count = getattr(o, 'n_' + name)
                found[name] = ffi.unpack(getattr(o, name), count) if count else []
                del found['n_' + name]
            lengths = ffi.unpack(o.bad_word_lengths, o.n_bad_words) if o.n_bad_words else []
            flat = ffi.unpack(o.bad_words, sum(lengths)) if lengths else []
            found['bad_words'] = [flat[sum(lengths[:i]):sum(lengths[:i + 1])]
                                  for i in range(len(lengths))]
            for name in ('bad_word_lengths', 'n_bad_words', 'callback', 'callback_user',
                         'return_attention', 'adapter'):  # adapter: translate's own
                del found[name]
            for name, choices in _CHOICES.items():
                names = {getattr(lib, constant): key for key, constant in choices.items()}
                found[name] = names.get(found[name], found[name])
        finally:
            self._leave()
        return found

    def translate(self, texts, beam_size=None, max_length=None, n_best=None,
                  return_scores=False, return_alignments=False, source_language=None,
                  target_language=None, target_prefix=None, adapter=None, glossary=None,
                  literals=None, **decode_options):
        """Translates a str (giving a str) or a list of str (giving a list,
        in the input order), on the calling thread without the GIL; sources
        longer than the model's are cut (Translation.truncated), a blank
        text gives ''. Every option None is the translator's
        (decode_options): without any, C, Python and tfm-translate give the
        same output. beam_size: beam search with that many hypotheses (1:
        greedy's tokens); max_length: tokens generated at most; n_best:
        hypotheses kept (beam search). With return_scores,
        return_alignments or n_best, each text gives a tfm.Translation
        (text, score, ids, alignment, hypotheses, source_tokens, truncated)
        instead of its str. source_language, target_language: a
        multilingual model's, for this call. target_prefix: text every
        translation starts with (forced). adapter: the model's adapter
        (Model.add_adapter, load_adapter) this call applies, by name; None:
        none. glossary: {source term: target term} (or a list of pairs):
        where a text holds a source term (a whole word, any ASCII case), its
        translation holds the target term (Translation.unplaced names those
        that did not fit). literals: strings that pass through unchanged
        like printf directives do (a model with placeholders: see
        keep_placeholders). decode_options:
        tfm_decode_options' fields by keyword (strategy 'greedy', 'sample'
        or 'beam', temperature, top_k, top_p, seed, length_penalty,
        patience, min_length, repetition_penalty, no_repeat_ngram_size,
        suppress_ids, eos_ids and bad_words as lists (each replacing the
        default's), max_length_a, max_length_b, forced_bos_id,
        forced_eos_id, beam_rules, early_stopping, renormalize_logits,
        cache_precision, ...), each replacing that default."""
        one = _is_one_text(texts)
        texts = [texts] if one else list(texts)
        array, kept = c_strings(texts)
        out = ffi.new('tfm_translation **')
        pointer = self._enter()
        try:
            call = _Call(pointer, beam_size, max_length, n_best, return_alignments,
                         source_language, target_language, target_prefix, decode_options,
                         adapter, glossary, literals)
            check(lib.tfm_translate(pointer, array, len(kept),
                                    call.options, out))
        finally:
            self._leave()
        try:
            found = _translations(out[0], return_scores or return_alignments or
                                  n_best is not None)
        finally:
            lib.tfm_translation_free(out[0])
        return found[0] if one else found

    def submit(self, text, beam_size=None, max_length=None, n_best=None, return_scores=False,
               return_alignments=False, source_language=None, target_language=None,
               target_prefix=None, deadline_ms=None, on_token=None, adapter=None,
               glossary=None, literals=None, **decode_options):
        """Queues one text (str) with its own options (translate's) for the
        translator's scheduler, which batches the pending requests of every
        caller by tokens, and returns at once with a tfm.Request (result(),
        done(), cancel()); BusyError when queue_capacity requests wait.
        deadline_ms: the request fails with tfm.TimeoutError when not
        finished that long after its submission. on_token(token, text): called
        with each token as it is chosen (greedy and sampling: at each step;
        beam search: once the search has ended) and the translation so far,
        ON A LIBTFM SCHEDULER THREAD (holding the GIL while it runs: keep it
        short); a true result stops the translation there, and an exception
        it raises stops it and is raised by result()."""
        if not _is_one_text(text):
            raise TypeError('submit takes one text (str), not %s: submit each, or translate '
                            'a list' % type(text).__name__)
        translator, stream = self._enter(), None
        try:
            call = _Call(translator, beam_size, max_length, n_best, return_alignments,
                         source_language, target_language, target_prefix, decode_options,
                         adapter, glossary, literals)
            if deadline_ms is not None:
                call.options.deadline_ms = deadline_ms
            if on_token is not None:
                stream = _Stream(on_token)
                call.options.on_token, call.options.on_done = _on_token, _on_done
                call.options.user = stream.handle
                with _streams_lock:
                    _streams[stream.key] = stream
            pointer = lib.tfm_translator_submit(translator, ffi.new('char[]', c_string(text)),
                                                call.options)
            if pointer == ffi.NULL:
                if stream is not None:
                    with _streams_lock:
                        del _streams[stream.key]
                raise_last_error()
        finally:
            self._leave()
        return Request(pointer, self, stream,
                       return_scores or return_alignments or n_best is not None)

    def __repr__(self):
        return 'tfm.Translator(<closed>)' if self.closed else 'tfm.Translator()'


class Request(Handle):
    """One text submitted to a translator (tfm_request; made by
    Translator.submit), as a concurrent.futures.Future: result(timeout=None), done(), cancel(),
    cancelled(), exception(timeout=None). close() (or collection) frees it,
    cancelling it if it has not finished."""
    _free = lib.tfm_request_free
    _copy_advice = 'submit the text again'

    def __init__(self, pointer, translator, stream, rich):
        super().__init__(pointer)
        # kept alive (not closed) while the request lives; C lets a finished
        # request outlive its translator
        self._translator = translator
        self._stream, self._rich = stream, rich

    def done(self):
        """Whether the request has finished (translated, failed, cancelled
        or past its deadline)."""
        return bool(lib.tfm_request_done(self._ptr()))

    def cancel(self):
        """Asks the request to stop: one waiting ends at once, one being
        decoded after its current step (result() then raises
        tfm.CancelledError). False when it had already finished."""
        if self.done():
            return False
        lib.tfm_request_cancel(self._ptr())
        return True

    def cancelled(self):
        """Whether the request ended cancelled."""
        return self.done() and lib.tfm_request_result(self._ptr(), ffi.NULL) == \
            lib.TFM_ERR_CANCELLED

    def _wait(self, timeout):
        pointer = self._ptr()
        if timeout is None:
            lib.tfm_request_wait(pointer)  # without the GIL
            return
        # tfm_request_wait has no timeout: poll, at most 10 ms late
        deadline, pause = time.monotonic() + timeout, 0.0005
        while not lib.tfm_request_done(pointer):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError('the request has not finished after %g s' % timeout)
            time.sleep(min(pause, left))
            pause = min(2 * pause, 0.01)

    def exception(self, timeout=None):
        """The exception result() would raise, or None, once the request
        has finished (waiting as result() does)."""
        try:
            self.result(timeout)
        except TimeoutError:
            if not self.done():
                raise
            return self._error()
        except BaseException as raised:  # noqa: B902 - returned, as Future.exception
            return raised
        return None

    def _error(self):
        status = lib.tfm_request_result(self._ptr(), ffi.NULL)
        return error(status, ffi.string(lib.tfm_request_error(self._ptr())).decode(
            'utf-8', errors='replace')) if status != lib.TFM_OK else None

    def result(self, timeout=None):
        """Waits for the translation (at most timeout seconds: then the
        builtin TimeoutError, and the request goes on) and returns it as
        translate would for its text: a str, or a tfm.Translation. Raises
        tfm.CancelledError, tfm.TimeoutError (its deadline passed: also a
        builtin TimeoutError), on_token's exception, or the decoding's
        error."""
        self._wait(timeout)
        if self._stream is not None and self._stream.error is not None:
            raise self._stream.error
        found = ffi.new('const tfm_translation **')
        status = lib.tfm_request_result(self._ptr(), found)
        if status != lib.TFM_OK:
            raise self._error()
        return _translations(found[0], self._rich)[0]

    def __repr__(self):
        if self.closed:
            return 'tfm.Request(<closed>)'
        return 'tfm.Request(%s)' % ('finished' if self.done() else 'pending')
