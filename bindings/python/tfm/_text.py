"""Text: tokenizers, translation scores, and batches of token ids."""
import os

import numpy as np

from ._binding import ffi, lib
from ._core import (ArgumentError, Handle, Rng, Tensor, as_array, c_path, c_strings, check,
                    check_pointer, to_numpy)
from ._model import options


def _utf8(text):
    """str as UTF-8; bytes (any bytes, even invalid UTF-8) as they are."""
    return text if isinstance(text, bytes) else text.encode('utf-8')


def _sized(call, ctype, guess, terminated=False):
    """Runs libtfm's "ask for the size" protocol: call(buffer, capacity,
    size) into a buffer of guess items, and once more with the size it asked
    for when that was too small (TFM_ERR_SIZE). (buffer, size)."""
    size = ffi.new('int64_t *')
    buffer = ffi.new(ctype, guess)
    status = call(buffer, guess, size)
    if status == lib.TFM_ERR_SIZE:
        lib.tfm_clear_error()
        capacity = size[0] + terminated
        buffer = ffi.new(ctype, capacity)
        status = call(buffer, capacity, size)
    check(status)
    return buffer, size[0]


def _bytes_of(pointer):
    """tfm_tokenizer_save_bytes of a C tokenizer, as bytes."""
    buffer, size = _sized(lambda out, capacity, size:
                          lib.tfm_tokenizer_save_bytes(pointer, out, capacity, size),
                          'char[]', 0)
    return bytes(ffi.buffer(buffer, size))


def _is_one_text(text):
    return isinstance(text, (str, bytes))


def _special_id(which, doc):
    """A read-only property: the tokenizer's special id `which`, or None."""
    def get(self):
        found = lib.tfm_tokenizer_special_id(self._ptr(), which)
        return None if found < 0 else found
    return property(get, doc=doc)


class Tokenizer(Handle):
    """Text to token ids and back (tfm_tokenizer): SentencePiece models
    (unigram, BPE, word, char, as spm_train writes them; the ids spm_encode
    gives), GPT-2/BART byte-level BPE, or BPE trained here. Text is str, or
    bytes taken as they are (invalid UTF-8 reads as SentencePiece reads it).
    A tokenizer never changes once made: copies and pickles carry its bytes
    (to_bytes) into an independent tokenizer."""
    _free = lib.tfm_tokenizer_free

    def __init__(self, pointer):
        """Made by load, from_byte_bpe, from_bytes or train_bpe (pointer:
        the C handle they made, which this tokenizer then owns)."""
        super().__init__(pointer)

    @classmethod
    def load(cls, path):
        """Reads a SentencePiece model file (spm_train's `.model`)."""
        return cls(check_pointer(lib.tfm_tokenizer_load_sentencepiece(c_path(path))))

    @classmethod
    def from_byte_bpe(cls, vocab_json, merges_txt):
        """Reads a GPT-2/BART byte-level BPE tokenizer from its two files:
        `vocab.json` (piece to id) and `merges.txt` (one merge a line, best
        first). Special ids: `<unk>`, `<s>` (else `<|endoftext|>`), `</s>`
        (else `<|endoftext|>`) and `<pad>` when the vocabulary has them."""
        return cls(check_pointer(lib.tfm_tokenizer_load_byte_bpe(c_path(vocab_json),
                                                                 c_path(merges_txt))))

    @classmethod
    def from_bytes(cls, data):
        """The tokenizer to_bytes() wrote (or a SentencePiece `.model`
        file's bytes)."""
        data = bytes(data)
        return cls(check_pointer(lib.tfm_tokenizer_from_bytes(ffi.from_buffer(data), len(data))))

    @classmethod
    def train_bpe(cls, lines, vocab_size=8000, **fields):
        """Trains a SentencePiece BPE model (identity normalisation) on lines:
        a list of str or bytes, or the path of a text file (its lines).
        vocab_size counts every piece (`<unk>`, `<s>`, `</s>` are 0, 1, 2);
        fields as tfm_bpe_train_options': byte_fallback (unknown characters
        as their bytes' pieces), character_coverage (default 0.9995),
        max_piece_length (default 16), pad_piece (1: a `<pad>` control
        piece at id 3, for padding batches with an id that is never text).
        The result depends on nothing but the lines and options."""
        if isinstance(lines, (str, os.PathLike)):
            with open(lines, 'rb') as text:
                lines = text.read().splitlines()
        lines = [_utf8(line) for line in lines]
        o = options('tfm_bpe_train_options', lib.tfm_bpe_train_options_init_sized,
                    dict(fields, vocab_size=vocab_size))
        buffers = [ffi.from_buffer(line) for line in lines]
        made = ffi.new('tfm_tokenizer **')
        check(lib.tfm_tokenizer_train_bpe(ffi.new('char *[]', buffers),
                                          ffi.new('int64_t[]', [len(line) for line in lines]),
                                          len(lines), o, made))
        return cls(made[0])

    @classmethod
    def _copy_of(cls, pointer):
        """An independent tokenizer from a C tokenizer another handle owns
        (a model's)."""
        return cls.from_bytes(_bytes_of(pointer))

    def to_bytes(self):
        """The tokenizer as bytes that from_bytes reads back: a SentencePiece
        tokenizer's are a `.model` file (spm_encode reads it too), a
        byte-level BPE one's both of its files."""
        return _bytes_of(self._ptr())

    def save(self, path):
        """Writes to_bytes() to path, atomically (tfm_tokenizer_save: a
        failed save leaves the file there as it was): for a SentencePiece
        tokenizer a `.model` file (Tokenizer.load reads it back), for
        byte-level BPE a file that Tokenizer.from_bytes reads back from its
        bytes."""
        check(lib.tfm_tokenizer_save(self._ptr(), c_path(path)))

    def _encode_one(self, text, max_length):
        data = _utf8(text)
        pointer = self._ptr()
        if max_length is not None:
            ids, count = ffi.new('int32_t[]', max(max_length, 1)), ffi.new('int64_t *')
            check(lib.tfm_tokenizer_encode_truncated(pointer, data, len(data), ids, max_length,
                                                     count, ffi.NULL))
            return list(ffi.unpack(ids, count[0]))
        # Rarely more ids than bytes (a dummy prefix's own piece): one try.
        ids, count = _sized(lambda out, capacity, size: lib.tfm_tokenizer_encode(
            pointer, data, len(data), out, capacity, size), 'int32_t[]', len(data) + 2)
        return list(ffi.unpack(ids, count))

    def encode(self, text, max_length=None):
        """The ids of text (str or bytes) as a list of ints, no beginning or
        end id added; a list of texts gives a list of such lists.
        max_length: the first that many ids at most, the text encoded only
        as far as they need (tfm_tokenizer_encode_truncated)."""
        if _is_one_text(text):
            return self._encode_one(text, max_length)
        return [self._encode_one(one, max_length) for one in text]

    def _decode_one(self, ids):
        if ids.size == 0:
            return ''
        ids = as_array(ids, np.int32)
        pointer = self._ptr()
        text, length = _sized(lambda out, capacity, size: lib.tfm_tokenizer_decode(
            pointer, ffi.from_buffer('int32_t[]', ids), ids.size, out, capacity, size),
            'char[]', 8 * ids.size + 1, terminated=True)
        return ffi.unpack(text, length).decode('utf-8', errors='replace')

    def decode(self, ids):
        """The text of ids (a sequence of ints), as spm_decode gives it:
        control ids (bos, eos, pad) give nothing. A list of sequences (or a
        2-D array) gives a list of texts. RangeError for an id outside the
        vocabulary."""
        if isinstance(ids, (list, tuple)) and ids and np.ndim(ids[0]) > 0:
            return [self._decode_one(to_numpy(one)) for one in ids]
        array = to_numpy(ids)
        if array.ndim == 2:
            return [self._decode_one(row) for row in array]
        return self._decode_one(array)

    @property
    def vocab_size(self):
        """The number of ids (pieces)."""
        return lib.tfm_tokenizer_vocab_size(self._ptr())

    def __len__(self):
        return self.vocab_size

    def piece_to_id(self, piece):
        """The id of the piece spelled so, or None when there is none."""
        data = _utf8(piece)
        found = lib.tfm_tokenizer_piece_to_id(self._ptr(), data, len(data))
        return None if found < 0 else found

    def id_to_piece(self, id):  # noqa: A002 (sentencepiece's name)
        """The piece of id (byte-level BPE pieces in GPT-2's byte-to-unicode
        alphabet, as in vocab.json); RangeError outside the vocabulary."""
        pointer = self._ptr()
        piece, length = _sized(lambda out, capacity, size: lib.tfm_tokenizer_id_to_piece(
            pointer, id, out, capacity, size), 'char[]', 16, terminated=True)
        return ffi.unpack(piece, length).decode('utf-8', errors='replace')

    unk_id = _special_id(lib.TFM_TOKEN_UNK, "The unknown piece's id, or None.")
    bos_id = _special_id(lib.TFM_TOKEN_BOS, 'The beginning-of-sequence id, or None.')
    eos_id = _special_id(lib.TFM_TOKEN_EOS, 'The end-of-sequence id, or None.')
    pad_id = _special_id(lib.TFM_TOKEN_PAD, 'The padding id, or None.')

    def __copy__(self):
        """An independent tokenizer from this one's bytes."""
        return Tokenizer.from_bytes(self.to_bytes())

    def __reduce__(self):
        return Tokenizer.from_bytes, (self.to_bytes(),)

    def __repr__(self):
        if self.closed:
            return 'tfm.Tokenizer(<closed>)'
        special = ''.join(', %s=%d' % (name, getattr(self, name))
                          for name in ('unk_id', 'bos_id', 'eos_id', 'pad_id')
                          if getattr(self, name) is not None)
        return 'tfm.Tokenizer(vocab_size=%d%s)' % (self.vocab_size, special)


# --- translation scores ---------------------------------------------------------------
def _score(function, name, hypotheses, references):
    if _is_one_text(hypotheses) and _is_one_text(references):
        hypotheses, references = [hypotheses], [references]
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ArgumentError('%s: %d hypotheses but %d references (one reference each)' % (
            name, len(hypotheses), len(references)))
    hypothesis_strings, _kept = c_strings(hypotheses)
    reference_strings, _also_kept = c_strings(references)
    score = ffi.new('double *')
    check(function(hypothesis_strings, reference_strings, len(hypotheses), score))
    return score[0]


def chrf(hypotheses, references):
    """Corpus chrF of hypotheses against one reference each (lists of
    str; two str: one segment's score), as sacrebleu 2's CHRF() with its
    defaults, 0 to 100. ArgumentError for a string that is not UTF-8."""
    return _score(lib.tfm_score_chrf, 'chrf', hypotheses, references)


def bleu(hypotheses, references):
    """Corpus BLEU of hypotheses against one reference each (lists of
    str; two str: one segment's score), as sacrebleu 2's BLEU() with its
    defaults (13a tokenisation, exp smoothing), 0 to 100."""
    return _score(lib.tfm_score_bleu, 'bleu', hypotheses, references)


# --- batches ----------------------------------------------------------------------
class Corpus:
    """Examples of token ids as libtfm's batches take them: one int32 array
    `ids` and int64 `offsets`, example i being ids[offsets[i]:offsets[i + 1]].
    Made from a list of id sequences (Tokenizer.encode's lists)."""

    def __init__(self, examples):
        examples = [as_array(e, np.int32).reshape(-1) if len(e) else np.zeros(0, np.int32)
                    for e in examples]
        self.offsets = np.zeros(len(examples) + 1, np.int64)
        np.cumsum([e.size for e in examples], out=self.offsets[1:])
        self.ids = np.concatenate(examples) if examples else np.zeros(0, np.int32)

    def __len__(self):
        return self.offsets.size - 1

    @property
    def lengths(self):
        """Each example's length, int64."""
        return np.diff(self.offsets)

    def __repr__(self):
        return 'tfm.Corpus(%d examples, %d ids)' % (len(self), self.ids.size)


def _int64s(values):
    array = np.ascontiguousarray(to_numpy(values))
    if array.size and array.dtype.kind not in 'iu':
        raise TypeError('integers wanted, got an array of %s' % array.dtype)
    return np.ascontiguousarray(array, dtype=np.int64)


def batch_plan(source_lengths, target_lengths, max_tokens, max_rows=0, rng=None):
    """An epoch's batches as fairseq plans them by size (tfm_batch_plan): a
    list of arrays of example indices, each batch's padded size (its longest
    example, the longer of source and target, times its rows) within
    max_tokens and its rows within max_rows (0: no limit). target_lengths
    may be None. rng (a tfm.Rng, carried from epoch to epoch, or an int
    seed) breaks ties and shuffles the batches; None: ties in index order,
    shortest batches first (for evaluation)."""
    sources = _int64s(source_lengths)
    targets = None if target_lengths is None else _int64s(target_lengths)
    if targets is not None and targets.size != sources.size:
        raise ArgumentError('batch_plan: %d source lengths but %d target lengths' % (
            sources.size, targets.size))
    if rng is not None and not isinstance(rng, Rng):
        rng = Rng(rng)
    count = sources.size
    order = np.empty(count, np.int64)
    starts = np.empty(count + 1, np.int64)
    batches = ffi.new('int64_t *')
    check(lib.tfm_batch_plan(
        ffi.from_buffer('int64_t[]', sources),
        ffi.NULL if targets is None else ffi.from_buffer('int64_t[]', targets), count,
        max_tokens, max_rows, ffi.NULL if rng is None else rng._ptr(),
        ffi.from_buffer('int64_t[]', order), count, ffi.from_buffer('int64_t[]', starts),
        count + 1, batches))
    return [order[starts[b]:starts[b + 1]] for b in range(batches[0])]


def _corpus_call(function, corpus, indices, *args):
    """function(NULL tape, the corpus's arrays, the indices, *args)."""
    if not isinstance(corpus, Corpus):
        corpus = Corpus(corpus)
    indices = np.arange(len(corpus), dtype=np.int64) if indices is None else _int64s(indices)
    return function(ffi.NULL, ffi.from_buffer('int32_t[]', corpus.ids), corpus.ids.size,
                    ffi.from_buffer('int64_t[]', corpus.offsets), len(corpus),
                    ffi.from_buffer('int64_t[]', indices), indices.size, *args)


def pad(corpus, indices=None, pad_id=0):
    """The examples indices (default: all) of corpus (a tfm.Corpus or a list
    of id sequences) as a caller-owned int32 tensor [rows, T], T their
    longest length, each row padded with pad_id after its ids."""
    return Tensor(check_pointer(_corpus_call(lib.tfm_batch_pad, corpus, indices, pad_id)))


def shift_targets(corpus, indices=None, bos_id=1, eos_id=2, pad_id=0):
    """A decoder's teacher-forcing pair for the target examples indices
    (default: all) of corpus: (decoder_input = bos_id then the ids,
    labels = the ids then eos_id), caller-owned int32 tensors [rows, T + 1]
    padded with pad_id (the loss's ignore_index); row b's length is its
    example's + 1 (for mask_from_lengths)."""
    decoder_input, labels = ffi.new('tfm_tensor **'), ffi.new('tfm_tensor **')
    check(_corpus_call(lib.tfm_batch_shift_targets, corpus, indices, bos_id, eos_id, pad_id,
                       decoder_input, labels))
    return Tensor(decoder_input[0]), Tensor(labels[0])
