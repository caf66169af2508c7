"""Text from Python: tokenizers against the ids spm_encode and GPT-2's
encoder gave on the committed fixtures (tests/fixtures/text, the C suite's),
and against python3-sentencepiece when it is installed; scores against the
C suite's Python reference; batches against numpy."""
import copy
import importlib.util
import os
import pickle
import resource
import signal

import numpy as np
import pytest

import tfm

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tests', 'fixtures')
TEXT = os.path.join(FIXTURES, 'text')


def text_lines(name):
    """The fixture's lines as bytes, without their newlines."""
    with open(os.path.join(TEXT, name), 'rb') as f:
        return f.read().split(b'\n')[:-1]


def expected(model, text):
    """(ids per line, decoded text per line) as the fixtures record them."""
    ids = [[int(i) for i in line.split()] for line in text_lines('%s.%s.ids' % (model, text))]
    decoded = [line.decode('utf-8', 'replace') for line in text_lines(text + '.txt')]
    for line in text_lines('%s.%s.decoded' % (model, text)):
        number, back = line.split(b'\t', 1)
        decoded[int(number)] = back.decode('utf-8')
    return ids, decoded


def load(model):
    if model == 'byte_bpe':
        return tfm.Tokenizer.from_byte_bpe(os.path.join(TEXT, 'byte_bpe.vocab.json'),
                                           os.path.join(TEXT, 'byte_bpe.merges.txt'))
    return tfm.Tokenizer.load(os.path.join(TEXT, model + '.model'))


CASES = [('unigram', 'lines'), ('unigram', 'edge'), ('bpe', 'lines'), ('bpe', 'edge'),
         ('bytes', 'heldout'), ('bytes', 'edge'), ('char', 'heldout'), ('word', 'heldout'),
         ('byte_bpe', 'heldout'), ('byte_bpe', 'edge')]


@pytest.mark.parametrize('model, text', CASES)
def test_encode_and_decode_give_the_references_ids_and_text(model, text):
    tok = load(model)
    ids, decoded = expected(model, text)
    lines = text_lines(text + '.txt')
    assert tok.encode(lines) == ids
    assert tok.decode(ids) == decoded
    valid = [i for i, line in enumerate(lines) if line.decode('utf-8', 'replace').encode() == line]
    assert [tok.encode(lines[i].decode()) for i in valid] == [ids[i] for i in valid]  # str too
    assert tok.decode(np.array(ids[0], np.int64)) == decoded[0]



@pytest.mark.parametrize('model', ['unigram', 'byte_bpe'])
def test_max_length_gives_the_first_ids(model):
    """encode(max_length=n): the whole text's first n ids, however long
    the text (it is encoded only as far as they need)."""
    tok = load(model)
    text = b' '.join(text_lines('lines.txt'))
    whole = tok.encode(text)
    assert tok.encode(text, max_length=100) == whole[:100]
    assert tok.encode([text], max_length=len(whole) + 3) == [whole]
    assert tok.encode(text, max_length=0) == []
    with pytest.raises(tfm.ArgumentError):
        tok.encode(text, max_length=-1)

@pytest.mark.parametrize('model', ['unigram', 'bpe', 'bytes', 'char', 'word'])
def test_python_sentencepiece_gives_the_same_ids_and_pieces(model):
    spm = pytest.importorskip('sentencepiece')
    processor = spm.SentencePieceProcessor(model_file=os.path.join(TEXT, model + '.model'))
    tok = load(model)
    lines = [line.decode() for line in text_lines('heldout.txt')]
    assert tok.encode(lines) == processor.encode(lines)
    assert tok.vocab_size == processor.get_piece_size()
    assert [tok.id_to_piece(i) for i in range(tok.vocab_size)] == \
        [processor.id_to_piece(i) for i in range(tok.vocab_size)]
    assert (tok.unk_id, tok.bos_id, tok.eos_id) == \
        (processor.unk_id(), processor.bos_id(), processor.eos_id())


def test_pieces_special_ids_and_repr():
    tok = load('bytes')  # trained with --pad_id=3
    assert (tok.unk_id, tok.bos_id, tok.eos_id, tok.pad_id) == (0, 1, 2, 3)
    assert repr(tok) == 'tfm.Tokenizer(vocab_size=%d, unk_id=0, bos_id=1, eos_id=2, pad_id=3)' \
        % tok.vocab_size == 'tfm.Tokenizer(vocab_size=%d, unk_id=0, bos_id=1, eos_id=2, ' \
        'pad_id=3)' % len(tok)
    assert load('bpe').pad_id is None
    unigram = load('unigram')
    for piece in ['%s', '%d', '--', '\u2581de']:
        assert unigram.id_to_piece(unigram.piece_to_id(piece)) == piece
    assert unigram.piece_to_id('no such piece, surely') is None
    assert unigram.encode('') == [] and unigram.decode([]) == ''
    byte_bpe = load('byte_bpe')
    assert byte_bpe.id_to_piece(byte_bpe.piece_to_id('\u0120the')) == '\u0120the'
    assert (byte_bpe.bos_id, byte_bpe.pad_id, byte_bpe.eos_id, byte_bpe.unk_id) == (0, 1, 2, 3)


def test_bytes_copies_pickles_and_files_give_independent_equal_tokenizers(tmp_path):
    lines = text_lines('heldout.txt')
    for model in ['unigram', 'byte_bpe']:
        tok = load(model)
        ids = tok.encode(lines)
        twins = [copy.copy(tok), copy.deepcopy(tok), pickle.loads(pickle.dumps(tok)),
                 tfm.Tokenizer.from_bytes(tok.to_bytes())]
        tok.close()
        with pytest.raises(tfm.ClosedError):
            tok.encode('x')
        assert repr(tok) == 'tfm.Tokenizer(<closed>)'
        for twin in twins:
            assert twin.encode(lines) == ids
    bpe = load('bpe')
    with open(os.path.join(TEXT, 'bpe.model'), 'rb') as f:
        assert bpe.to_bytes() == f.read()  # a SentencePiece model's bytes are its file
    bpe.save(tmp_path / 'saved.model')
    assert tfm.Tokenizer.load(tmp_path / 'saved.model').encode(lines) == bpe.encode(lines)


def test_a_failed_save_leaves_the_file_there_as_it_was(tmp_path):
    path = tmp_path / 'kept.model'
    load('bpe').save(path)
    before = path.read_bytes()
    closed = load('char')
    closed.close()
    with pytest.raises(tfm.ClosedError):
        closed.save(path)
    assert path.read_bytes() == before  # refused before the file was touched
    with pytest.raises(tfm.FileError, match='tfm_tokenizer_save'):
        load('char').save(tmp_path)  # a folder: never replaced
    # the file size limit reached while writing (EFBIG): the save is
    # written beside the file, which stays whole
    bigger = load('unigram')
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before), limits[1]))
    try:
        with pytest.raises(tfm.FileError, match='File too large'):
            bigger.save(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ['kept.model']  # no temporary left


def test_a_nul_inside_a_string_is_refused_as_open_refuses_it(tmp_path):
    good = tmp_path / 'good.model'
    load('bpe').save(good)
    model = tfm.Model(src_vocab=5, tgt_vocab=5, max_src_len=4, max_tgt_len=4, d_model=4,
                      heads=1, encoder_layers=1, decoder_layers=1, d_ff=4)
    model.save(tmp_path / 'model.safetensors')
    cut = str(good) + '\0junk'
    for call in [lambda: tfm.Tokenizer.load(cut),  # would open good.model
                 lambda: tfm.Tokenizer.load(os.fsencode(cut)),
                 lambda: tfm.Tokenizer.from_byte_bpe(cut, cut),
                 lambda: load('bpe').save(cut),
                 lambda: tfm.chrf('same\0one', 'same\0two'),  # would score 100
                 lambda: tfm.bleu(['a b\0c'], ['a b']),
                 lambda: tfm.Model.load(str(tmp_path / 'model.safetensors') + '\0x'),
                 lambda: tfm.Model.from_pretrained(str(tmp_path) + '\0x'),
                 lambda: model.save(tmp_path / 'x\0y'),
                 lambda: model.save(tmp_path / 'meta.safetensors', {'key\0': 'value'}),
                 lambda: model.save(tmp_path / 'meta.safetensors', {'key': 'val\0ue'}),
                 lambda: tfm.metadata(str(tmp_path / 'model.safetensors') + '\0x'),
                 lambda: model.set_languages('en\0x'),
                 lambda: tfm.Params().add('w\0x', [2])]:
        with pytest.raises(ValueError, match='embedded null byte'):
            call()
    assert not os.path.exists(tmp_path / 'x') and not os.path.exists(tmp_path / 'meta.safetensors')
    assert tfm.chrf('same one', 'same two') < 100  # as the texts without NULs
    assert tfm.Tokenizer.load(good).encode('x\0y') == load('bpe').encode(b'x\0y')  # a length


def test_training_is_deterministic_from_lines_or_a_file_and_round_trips(tmp_path):
    lines = [line for i, line in enumerate(text_lines('lines.txt')[:1500]) if i % 10]
    heldout = [line.decode() for line in text_lines('heldout.txt')[:150]]
    tok = tfm.Tokenizer.train_bpe([line.decode() for line in lines], vocab_size=700)
    assert tok.vocab_size == 700 and (tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    (tmp_path / 'train.txt').write_bytes(b''.join(line + b'\n' for line in lines))
    from_file = tfm.Tokenizer.train_bpe(tmp_path / 'train.txt', vocab_size=700)
    assert from_file.to_bytes() == tok.to_bytes()
    assert tfm.Tokenizer.from_bytes(tok.to_bytes()).encode(heldout) == tok.encode(heldout)
    simple = [line for line in heldout if '  ' not in line and line.strip() == line]
    decoded = tok.decode(tok.encode(simple))
    kept = [back == line for back, line in zip(decoded, simple) if '\u2047' not in back]
    assert len(kept) > len(simple) // 2 and all(kept)
    # byte fallback: no unknown id, every line comes back
    with_bytes = tfm.Tokenizer.train_bpe(lines, vocab_size=700, byte_fallback=True,
                                         character_coverage=0.99, max_piece_length=8)
    assert with_bytes.unk_id not in sum(with_bytes.encode(simple), [])
    assert with_bytes.decode(with_bytes.encode(simple)) == simple
    assert with_bytes.to_bytes() != tfm.Tokenizer.train_bpe(lines, vocab_size=700,
                                                            byte_fallback=True).to_bytes()


def test_a_model_keeps_its_tokenizers_through_files_copies_and_pickles(tmp_path):
    lines = ['the black cat sleeps', 'le chat noir dort', 'the red dog eats']
    tok = tfm.Tokenizer.train_bpe(lines, vocab_size=40, pad_piece=1, character_coverage=1.0)
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (3, 1, 2)
    other = tfm.Tokenizer.train_bpe(lines[1:], vocab_size=30, character_coverage=1.0)
    model = tfm.Model(src_vocab=40, tgt_vocab=40, max_src_len=8, max_tgt_len=8, d_model=8,
                      heads=2, d_ff=8, encoder_layers=1, decoder_layers=1)
    assert model.tokenizer is None and model.target_tokenizer is None
    model.set_tokenizers(tok)
    assert model.tokenizer.to_bytes() == model.target_tokenizer.to_bytes() == tok.to_bytes()
    model.save(tmp_path / 'one.safetensors')
    model.set_tokenizers(tok, other)
    model.save(tmp_path / 'two.safetensors')
    one, two = (tfm.Model.load(tmp_path / name) for name in ('one.safetensors', 'two.safetensors'))
    for twin in (one, copy.copy(one), copy.deepcopy(one), pickle.loads(pickle.dumps(one))):
        assert twin.tokenizer.encode(lines[0]) == tok.encode(lines[0])
        assert twin._tokenizer_bytes() == (tok.to_bytes(), None)  # one for both sides
    for twin in (two, copy.copy(model), pickle.loads(pickle.dumps(model))):
        assert twin._tokenizer_bytes() == (tok.to_bytes(), other.to_bytes())
        assert twin.target_tokenizer.decode(other.encode(lines[1])) == lines[1]
    kept = model.tokenizer  # a copy: it outlives the model
    model.close()
    assert kept.encode(lines[2]) == tok.encode(lines[2])
    # too many ids, a target alone: refused, nothing changed; None removes
    small = tfm.Model(src_vocab=39, tgt_vocab=40, max_src_len=8, max_tgt_len=8, d_model=8,
                      heads=2, d_ff=8, encoder_layers=1, decoder_layers=1)
    with pytest.raises(tfm.ArgumentError, match='tfm_model_set_tokenizers'):
        small.set_tokenizers(tok)
    with pytest.raises(tfm.NullError):
        one.set_tokenizers(None, other)
    assert one.tokenizer.to_bytes() == tok.to_bytes()
    one.set_tokenizers(None)
    assert one.tokenizer is None and pickle.loads(pickle.dumps(one)).tokenizer is None


def test_tokenizer_errors_carry_libtfms_messages(tmp_path):
    with pytest.raises(tfm.FileError, match='tfm_tokenizer_load_sentencepiece'):
        tfm.Tokenizer.load(tmp_path / 'missing.model')
    with pytest.raises(tfm.FormatError):
        tfm.Tokenizer.load(os.path.join(TEXT, 'byte_bpe.vocab.json'))
    with pytest.raises(tfm.FormatError):
        tfm.Tokenizer.from_byte_bpe(os.path.join(TEXT, 'byte_bpe.merges.txt'),
                                    os.path.join(TEXT, 'byte_bpe.merges.txt'))
    with pytest.raises(tfm.FormatError):
        tfm.Tokenizer.from_bytes(b'not a model')
    tok = load('bpe')
    with pytest.raises(tfm.RangeError, match='tfm_tokenizer_decode'):
        tok.decode([5, tok.vocab_size])
    with pytest.raises(tfm.RangeError, match='tfm_tokenizer_id_to_piece'):
        tok.id_to_piece(-1)
    with pytest.raises(TypeError):
        tok.decode([1.5])
    with pytest.raises(TypeError, match='no field'):
        tfm.Tokenizer.train_bpe(['a b c'], vocab_size=10, merges=3)
    with pytest.raises(tfm.Error, match='tfm_tokenizer_train_bpe'):
        tfm.Tokenizer.train_bpe(['a b c'], vocab_size=2)
    assert tfm.lib.tfm_last_status() == tfm.lib.TFM_OK  # each error was taken, then cleared


def test_texts_and_pieces_longer_than_the_first_guess_are_asked_again():
    word = load('word')  # whole words: pieces longer than the buffers first tried
    longest = max(range(word.vocab_size), key=lambda i: len(word.id_to_piece(i).encode()))
    piece = word.id_to_piece(longest)
    assert piece == '\u2581--target-directory=DIRECTORIO'  # 32 bytes
    assert word.piece_to_id(piece) == longest
    assert word.decode([longest] * 3) == ' '.join([piece[1:]] * 3)
    assert word.encode(' '.join([piece[1:]] * 3)) == [longest] * 3


# --- scores --------------------------------------------------------------------------
def score_reference():
    spec = importlib.util.spec_from_file_location(
        'score_reference', os.path.join(FIXTURES, 'score_reference.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chrf_and_bleu_equal_the_c_suites_sacrebleu_reference():
    reference = score_reference()
    refs = ['The cat sat on the mat.', 'Il fait beau aujourd\'hui !', 'a b c d e f',
            'Erreur : fichier « x » introuvable', '日本語のテキスト']
    hyps = ['The cat sat on a mat .', 'Il fait très beau aujourd\'hui!', 'a b c',
            'Erreur: le fichier « x » est introuvable', '日本語テキスト']
    assert tfm.chrf(hyps, refs) == pytest.approx(reference.chrf(hyps, refs), abs=1e-9)
    assert tfm.bleu(hyps, refs) == pytest.approx(reference.bleu(hyps, refs), abs=1e-9)
    assert tfm.chrf(hyps[0], refs[0]) == pytest.approx(reference.chrf(hyps[:1], refs[:1]))
    assert tfm.bleu(refs, refs) == pytest.approx(100.0)
    assert tfm.chrf(tuple(hyps), iter(refs)) == tfm.chrf(hyps, refs)


def test_scores_refuse_what_is_not_one_utf8_reference_each():
    with pytest.raises(tfm.ArgumentError, match='2 hypotheses but 1 references'):
        tfm.bleu(['a', 'b'], ['a'])
    with pytest.raises(tfm.ArgumentError, match='tfm_score_chrf'):
        tfm.chrf(['fine', b'\xff'], ['fine', 'fine'])


# --- batches --------------------------------------------------------------------------
def test_batch_plan_covers_every_example_within_the_limits():
    rng = np.random.default_rng(0)
    sources, targets = rng.integers(1, 30, 200), rng.integers(1, 30, 200)
    plan = tfm.batch_plan(sources, targets, max_tokens=120, max_rows=8)
    assert sorted(np.concatenate(plan).tolist()) == list(range(200))
    for batch in plan:
        assert 1 <= len(batch) <= 8
        assert np.maximum(sources, targets)[batch].max() * len(batch) <= 120
    assert [b.tolist() for b in plan] == [b.tolist() for b in tfm.batch_plan(
        sources, targets, 120, 8)]
    seeded = [b.tolist() for b in tfm.batch_plan(sources, targets, 120, 8, rng=5)]
    assert seeded == [b.tolist() for b in tfm.batch_plan(sources, targets, 120, 8,
                                                          rng=tfm.Rng(5))]
    assert seeded != [b.tolist() for b in plan]
    carried = tfm.Rng(5)
    first = tfm.batch_plan(sources, targets, 120, 8, rng=carried)
    second = tfm.batch_plan(sources, targets, 120, 8, rng=carried)
    assert [b.tolist() for b in first] == seeded and \
        [b.tolist() for b in second] != seeded  # each epoch its own
    assert [len(b) for b in tfm.batch_plan([300, 2, 2], None, 100)] == [2, 1]  # alone
    with pytest.raises(tfm.ArgumentError, match='tfm_batch_plan'):
        tfm.batch_plan([3, 0, 2], None, 10)
    with pytest.raises(tfm.ArgumentError, match='3 source lengths but 2'):
        tfm.batch_plan([3, 1, 2], [1, 2], 10)


def test_pad_shift_targets_and_masks_equal_numpy():
    tok = load('bpe')
    examples = tok.encode(['Bonjour le monde', 'Fichier', 'Le fichier est introuvable'])
    corpus = tfm.Corpus(examples)
    assert len(corpus) == 3 and corpus.lengths.tolist() == [len(e) for e in examples]
    rows, width = [2, 0], max(len(examples[2]), len(examples[0]))
    padded = np.full((2, width), 7, np.int32)
    for r, i in enumerate(rows):
        padded[r, :len(examples[i])] = examples[i]
    assert np.array_equal(tfm.pad(corpus, rows, pad_id=7).numpy(), padded)
    assert np.array_equal(tfm.pad(examples, rows, pad_id=7).numpy(), padded)
    decoder_input, labels = tfm.shift_targets(corpus, rows, bos_id=1, eos_id=2, pad_id=7)
    wanted_input = np.full((2, width + 1), 7, np.int32)
    wanted_labels = np.full((2, width + 1), 7, np.int32)
    for r, i in enumerate(rows):
        wanted_input[r, :len(examples[i]) + 1] = [1] + examples[i]
        wanted_labels[r, :len(examples[i]) + 1] = examples[i] + [2]
    assert np.array_equal(decoder_input.numpy(), wanted_input)
    assert np.array_equal(labels.numpy(), wanted_labels)
    assert tok.decode(labels.numpy()) == ['Le fichier est introuvable', 'Bonjour le monde']
    lengths = corpus.lengths[rows]
    keep = tfm.mask_from_lengths(lengths)
    assert np.array_equal(keep.numpy(), (np.arange(width) < lengths[:, None]).astype(np.int32))
    assert np.array_equal(keep.numpy(), tfm.padding_mask(padded, 7).numpy()[:, 0, 0])
    additive = tfm.mask_from_lengths(lengths + 1, width + 1, additive=True).numpy()
    assert np.array_equal(additive == 0, wanted_input != 7) and additive.dtype == np.float32
    assert tfm.pad(corpus).shape == (3, max(map(len, examples)))
    with pytest.raises(tfm.RangeError, match='tfm_batch_pad'):
        tfm.pad(corpus, [0, 3])
    with pytest.raises(tfm.ArgumentError, match='all empty'):
        tfm.pad([[], []])
    with pytest.raises(tfm.RangeError, match='tfm_batch_shift_targets'):
        tfm.shift_targets(corpus, [-1])
    with pytest.raises(tfm.RangeError, match='tfm_mask_from_lengths'):
        tfm.mask_from_lengths([2, 5], width=4)
