"""The Python package against the C library: round trips, every exception
path, lifetimes, and gradients equal to PyTorch's (the fixture the C suite
uses) and to the C library's own calls."""
import copy
import gc
import json
import os
import pickle
import re

import numpy as np
import pytest

import tfm
from tfm import ffi, lib

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tests', 'fixtures')
MODEL_FIXTURE = os.path.join(FIXTURES, 'model.safetensors')


def small_model(**changes):
    fields = dict(src_vocab=13, tgt_vocab=11, max_src_len=6, max_tgt_len=5, d_model=16,
                  heads=2, encoder_layers=2, decoder_layers=2, d_ff=32, dropout=0.0,
                  embedding_scale='sqrt_d', seed=11, bos_id=1, eos_id=2, pad_id=0)
    fields.update(changes)
    return tfm.Model(**fields)


# --- round trips --------------------------------------------------------------------
def test_tensor_round_trip_keeps_values_shape_and_dtype():
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = tfm.tensor(values)
    assert t.shape == (2, 3, 4) and t.dtype == np.float32
    np.testing.assert_array_equal(t.numpy(), values)
    ids = tfm.tensor(np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(ids), [[1, 2], [3, 4]])


def test_int64_ids_are_converted_when_they_fit_and_refused_when_not():
    t = tfm.tensor(np.array([0, 5, 2**31 - 1], dtype=np.int64))
    np.testing.assert_array_equal(t.numpy(), [0, 5, 2**31 - 1])
    with pytest.raises(OverflowError):
        tfm.tensor(np.array([2**31], dtype=np.int64))
    with pytest.raises(OverflowError):
        tfm.tensor(np.array([-2**31 - 1], dtype=np.int64))


def test_other_dtypes_are_refused_or_converted_explicitly():
    with pytest.raises(TypeError):
        tfm.tensor(np.array(['a', 'b']))
    with pytest.raises(TypeError):
        tfm.as_array(np.array([0.5]), np.int32)  # floats are never read as ids
    np.testing.assert_array_equal(tfm.tensor(np.array([0.25, 1.5])).numpy(), [0.25, 1.5])


def test_model_file_round_trip_with_metadata(tmp_path):
    model = small_model()
    path = tmp_path / 'model.safetensors'
    model.save(path, {'vocabulary': 'a b c'})
    again = tfm.Model.load(path)
    assert again.options == model.options
    assert tfm.metadata(path)['vocabulary'] == 'a b c'
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(again.state_dict()[name], value)


def test_quantized_model_decodes_saves_and_loads(tmp_path):
    model = small_model(d_model=32, d_ff=64).eval()
    src = np.array([[3, 7, 12, 5, 9, 1], [4, 11, 2, 1, 1, 1]])
    logits = model.greedy(src, max_length=4, return_logits=True).logits
    assert model.quantize() is model and model.quantized == 'layers'
    assert not model.training
    with pytest.raises(tfm.StateError, match="quantized"):
        model.train()
    quantized = model.greedy(src, max_length=4, return_logits=True)
    # the int8 products, or the int8 values times their scales where this
    # CPU multiplies faster in float32
    assert not np.array_equal(quantized.logits, logits)
    np.testing.assert_allclose(quantized.logits, logits, atol=0.1)
    path = tmp_path / 'int8.safetensors'
    model.save(path)
    again = tfm.Model.load(path)
    assert again.quantized == 'layers' and not again.training
    np.testing.assert_array_equal(again.greedy(src, max_length=4), quantized.tokens)
    import copy
    assert copy.copy(again).quantized == 'layers'
    with pytest.raises(tfm.StateError, match='quantized'):
        again.load_state_dict(small_model(d_model=32, d_ff=64).state_dict())


def test_tied_generator_quantizes_through_a_copy(tmp_path):
    model = small_model(d_model=32, d_ff=64, src_vocab=13, tgt_vocab=13,
                        share_embeddings=True, tie_generator=True).eval()
    table = model.state_dict()['src_embedding.weight']
    src = np.array([[3, 7, 12, 5, 9, 1], [4, 11, 2, 1, 1, 1]])
    layers = small_model(d_model=32, d_ff=64, src_vocab=13, tgt_vocab=13,
                         share_embeddings=True, tie_generator=True).eval().quantize()
    assert model.quantize(generator=True).quantized == 'layers,generator'
    np.testing.assert_array_equal(model.state_dict()['src_embedding.weight'], table)
    # the generator's products move by int8's error where its int8 copy
    # pays on this CPU (tests/test_int8_model.c forces it), else read the
    # table itself
    quantized = model.greedy(src, max_length=4, return_logits=True)
    np.testing.assert_allclose(quantized.logits,
                               layers.greedy(src, max_length=4, return_logits=True).logits,
                               atol=0.1)
    path = tmp_path / 'tied.safetensors'
    model.save(path)
    again = tfm.Model.load(path)
    assert again.quantized == 'layers,generator'
    np.testing.assert_array_equal(again.state_dict()['src_embedding.weight'], table)
    np.testing.assert_array_equal(again.greedy(src, max_length=4, return_logits=True).logits,
                                  quantized.logits)


def test_caches_in_bfloat16_by_keyword():
    """cache_precision='bfloat16' rounds the cached keys and values (2^-9 of
    themselves at most: the logits move, by about as much, here within
    1e-2 of 1 + their size); 'auto' is float32 for a float32 model and,
    once it is quantized, bfloat16 where its products run in int8 on this
    CPU, else float32 (tests/test_decode.c sets that choice); other values
    are a ValueError naming the keyword."""
    model = small_model().eval()
    src = np.array([[3, 7, 12, 5, 9, 1], [4, 11, 2, 1, 1, 1]])

    def greedy(precision, prefix=None):
        return model.greedy(src, max_length=4, eos_id=-1, return_logits=True, prefix=prefix,
                            cache_precision=precision)
    exact = greedy('float32')
    rounded = greedy('bfloat16', prefix=exact.tokens[:, 1:])  # the same steps as float32's
    assert not np.array_equal(rounded.logits, exact.logits)
    np.testing.assert_allclose(rounded.logits, exact.logits, rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(greedy('auto').logits, exact.logits)
    tokens, scores = model.beam(src, max_length=4, beam_size=3, n_best=2,
                                cache_precision='bfloat16')
    assert tokens.shape == (2, 2, 5) and np.isfinite(scores).all()
    assert model.sample(src, max_length=4, seed=3, cache_precision='bfloat16').shape == (2, 5)
    model.quantize()
    auto, bf16, f32 = greedy('auto').logits, greedy('bfloat16').logits, greedy('float32').logits
    assert not np.array_equal(bf16, f32)
    assert np.array_equal(auto, bf16) or np.array_equal(auto, f32)
    for wrong in ('float16', 2, True):
        with pytest.raises(ValueError, match='cache_precision'):
            model.greedy(src, cache_precision=wrong)
    with pytest.raises(ValueError, match='cache_precision'):
        model.beam(src, cache_precision='half')


def test_state_dict_moves_between_models_and_is_checked_before_writing():
    a, b = small_model(seed=1), small_model(seed=2)
    before = b.state_dict()
    state = a.state_dict()
    state['generator.bias'] = np.zeros(3, np.float32)  # wrong shape
    with pytest.raises(ValueError, match='generator.bias'):
        b.load_state_dict(state)
    for name, value in b.state_dict().items():  # nothing was written
        np.testing.assert_array_equal(value, before[name])
    with pytest.raises(KeyError):
        b.load_state_dict({'nope': np.zeros(1)})
    b.load_state_dict(a.state_dict())
    for name, value in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[name], value)


def fit(model, adam, sources):
    """A training step per source batch [2, 6], on targets made from it."""
    tape = tfm.Tape()
    for src in sources:
        tgt = src[:, :5] % 11
        with tape:
            loss = tfm.cross_entropy(model.forward(src, tgt, tgt_mask=tfm.causal_mask(5)), tgt)
            adam.zero_grad()
            loss.backward()
            adam.step()


def test_recomputing_in_the_backward_changes_no_bit():
    def trained(**recompute):
        model = small_model(dropout=0.1).recompute(**recompute)
        fit(model, tfm.Adam(model, lr=1e-2), [np.arange(12, dtype=np.int32).reshape(2, 6) % 13] * 3)
        return model.state_dict()
    kept = trained()
    recomputed = trained(attention_weights=True, feed_forward_hidden=True, norm_outputs=True,
                         attention_context=True)
    for name, value in kept.items():
        np.testing.assert_array_equal(recomputed[name], value)


def test_bfloat16_products_where_the_cpu_has_them():
    assert tfm.get_matmul_precision() == 'float32'
    with pytest.raises(tfm.ArgumentError):
        tfm.set_matmul_precision('float16')
    x = tfm.tensor(np.linspace(-1, 1, 64 * 48, dtype=np.float32).reshape(64, 48))

    def product():
        with tfm.Tape():
            return tfm.matmul(x, x, False, True).numpy()
    single = product()
    try:
        tfm.set_matmul_precision('bfloat16')
    except tfm.StateError as e:
        assert 'bfloat16 products' in str(e)
        assert tfm.get_matmul_precision() == 'float32'
        return
    try:
        assert tfm.get_matmul_precision() == 'bfloat16'
        half = product()
    finally:
        tfm.set_matmul_precision('float32')
    assert not np.array_equal(half, single)
    np.testing.assert_allclose(half, single, rtol=0, atol=1e-2 * np.abs(single).max())


def test_training_state_resumes_bit_for_bit(tmp_path):
    def run(model, adam, rng, steps):
        fit(model, adam, (np.frombuffer(bytes(int(rng.uniform() * 13) for _ in range(12)),
                                        np.uint8).reshape(2, 6) for _ in range(steps)))

    straight = small_model(dropout=0.1)
    adam = tfm.Adam(straight, lr=1e-2)
    data = tfm.Rng(5)
    run(straight, adam, data, 6)

    first = small_model(dropout=0.1)
    adam1 = tfm.Adam(first, lr=1e-2)
    data1 = tfm.Rng(5)
    run(first, adam1, data1, 3)
    tfm.save_training(tmp_path / 'state.safetensors', first, adam1, [data1])
    resumed = tfm.Model.load(tmp_path / 'state.safetensors')
    adam2 = tfm.Adam(resumed, lr=1e-2)
    data2 = tfm.Rng(0)
    tfm.load_training(tmp_path / 'state.safetensors', resumed, adam2, [data2])
    run(resumed, adam2, data2, 3)
    for name, value in straight.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name], value)


def test_decoding_greedy_beam_and_sampling():
    model = small_model().eval()
    src = np.array([[3, 7, 12, 5, 9, 1], [4, 11, 2, 1, 1, 1]])
    greedy = model.greedy(src, max_length=4)
    assert greedy.shape == (2, 5) and (greedy[:, 0] == 1).all()
    tokens, scores = model.beam(src, beam_size=3, n_best=2, max_length=4)
    assert tokens.shape == (2, 2, 5) and scores.shape == (2, 2)
    assert (scores[:, 0] >= scores[:, 1]).all()
    one = model.sample(src, temperature=0.7, top_k=5, seed=3, max_length=4)
    again = model.sample(src, temperature=0.7, top_k=5, seed=3, max_length=4)
    np.testing.assert_array_equal(one, again)


def test_decoding_takes_the_processors_by_keyword():
    model = small_model(max_tgt_len=12).eval()
    src = np.array([[3, 7, 12, 5, 9, 4], [4, 11, 2, 6, 0, 0]])
    plain = model.greedy(src, max_length=8)
    chosen = sorted(set(plain[:, 1:].ravel()) - {-1})
    for decode in (model.greedy, model.sample, model.beam):
        out = decode(src, max_length=8, suppress_ids=chosen[:2])
        tokens = np.asarray(out[0] if isinstance(out, tuple) else out)
        assert not np.isin(tokens[..., 1:], chosen[:2]).any()
        decode(src, max_length=8, min_length=2, repetition_penalty=1.5, no_repeat_ngram_size=2,
               eos_ids=[3], bad_words=[[4, 5], [6]], max_length_a=1.0, max_length_b=2,
               forced_bos_id=7, suppress_ids=[])
    forced = model.greedy(src, max_length=8, forced_bos_id=7)
    assert (forced[:, 1] == 7).all()
    limited = model.greedy(src, max_length=8, max_length_a=0.0, max_length_b=3, eos_id=-1)
    assert (limited[:, 4:] == -1).all() and (limited[:, 3] != -1).all()
    ended = model.greedy(src, max_length=8, eos_ids=[plain[0, 1]], return_scores=True)
    assert ended.lengths[0] == 2
    tokens, _ = model.beam(src, max_length=8, beam_size=2, n_best=2, patience=2.0)
    assert tokens.shape == (2, 2, 9)
    ended = model.greedy(src, max_length=4, eos_id=2, forced_eos_id=2, return_scores=True)
    for row, length in zip(ended.tokens, ended.lengths):  # lengths count bos_id
        assert row[length - 1] == 2 and 2 not in row[1:length - 1]
    for rules, stopping in (('transformers', True), ('transformers', 'never'),
                            ('ctranslate2', None)):
        tokens, scores = model.beam(src, max_length=8, beam_size=2, beam_rules=rules,
                                    early_stopping=stopping)
        assert tokens.shape == (2, 1, 9) and np.isfinite(scores).all()
    with pytest.raises(ValueError, match='beam_rules'):
        model.beam(src, beam_rules='fairseq')
    with pytest.raises(ValueError, match='early_stopping'):
        model.beam(src, early_stopping=1)
    with pytest.raises(TypeError, match='strategy'):
        model.greedy(src, strategy='beam')
    with pytest.raises(tfm.ArgumentError, match='repetition_penalty'):
        model.greedy(src, repetition_penalty=0.0)


def test_encoder_layer_as_tutorial_004():
    params = tfm.Params()
    layer = tfm.EncoderLayer(params, 'layer', rng=tfm.Rng(0), d_model=128, heads=8, d_ff=512,
                             dropout=0.0).eval()
    positions = tfm.SinusoidalPositions(5000, 128)
    with tfm.Tape(recording=False):
        out = layer(positions(np.zeros((2, 10, 128), np.float32)))
        assert out.shape == (2, 10, 128)


def test_decoders_take_the_special_tokens_from_the_model_or_refuse(tmp_path):
    model = small_model().eval()  # bos 1, eos 2, pad 0
    src = np.array([[3, 7, 12, 5], [4, 11, 9, 6]])
    padded = np.hstack([src, np.zeros((2, 2), int)])
    alone = model.greedy(src, max_length=4, return_scores=True)
    together = model.greedy(padded, max_length=4, return_scores=True)
    np.testing.assert_array_equal(together.tokens, alone.tokens)
    np.testing.assert_allclose(together.scores, alone.scores, rtol=1e-5)
    unmasked = model.greedy(padded, max_length=4, src_pad_id=-1, return_scores=True)
    assert not np.allclose(unmasked.scores, alone.scores, rtol=1e-5)
    np.testing.assert_array_equal(model.beam(padded, max_length=4)[0],
                                  model.beam(src, max_length=4)[0])
    model.save(tmp_path / 'model.safetensors')
    loaded = tfm.Model.load(tmp_path / 'model.safetensors').eval()
    assert (loaded.options['bos_id'], loaded.options['eos_id'], loaded.options['pad_id']) == \
        (1, 2, 0)
    np.testing.assert_array_equal(loaded.greedy(padded, max_length=4), alone.tokens)
    bare = small_model(bos_id=-1, eos_id=-1, pad_id=-1).eval()
    for decode in (bare.greedy, bare.sample, bare.beam):
        with pytest.raises(tfm.ArgumentError, match='bos_id, eos_id, src_pad_id'):
            decode(src, max_length=4)
    with pytest.raises(tfm.ArgumentError, match='src_pad_id'):
        bare.greedy(src, max_length=4, bos_id=1, eos_id=-1)
    assert (bare.greedy(src, max_length=4, bos_id=5, eos_id=-1, src_pad_id=-1)[:, 0] == 5).all()


# --- every exception path -----------------------------------------------------------
def test_statuses_become_exceptions_with_libtfm_messages(tmp_path):
    tape = tfm.Tape()
    with tape:
        with pytest.raises(tfm.ShapeError, match='tfm_add') as caught:
            tfm.add(np.ones((2, 3)), np.ones((4, 5)))
        assert caught.value.status == lib.TFM_ERR_SHAPE
        assert caught.value.status_name == 'TFM_ERR_SHAPE'
        with pytest.raises(tfm.DtypeError):
            tfm.embedding(tfm.tensor(np.ones((4, 2))), tfm.tensor(np.ones(3, np.float32)))
        with pytest.raises(tfm.RangeError):
            tfm.embedding(tfm.tensor(np.ones((4, 2))), np.array([7]))
    with pytest.raises(tfm.ArgumentError, match='heads'):
        small_model(heads=3)
    with pytest.raises(tfm.SizeError):
        tfm.Params().add('huge', [2**40, 2**40])
    with pytest.raises(tfm.FileError):
        tfm.Model.load(tmp_path / 'absent.safetensors')
    corrupt = tmp_path / 'corrupt.safetensors'
    corrupt.write_bytes(b'\x10' + b'\0' * 7 + b'{"x": not json} ')
    with pytest.raises(tfm.FormatError):
        tfm.Model.load(corrupt)
    with pytest.raises(tfm.NullError):
        tfm.Tensor(ffi.NULL).numpy()  # a NULL handle reaches C's own check
    with pytest.raises(TypeError, match='no_such_field'):
        small_model(no_such_field=1)
    with pytest.raises(ValueError, match='positions'):
        small_model(positions='spiral')
    # cffi's own words ("an integer is required") name no field
    with pytest.raises(TypeError, match="d_model='16' .* int64_t"):
        small_model(d_model='16')
    with pytest.raises(OverflowError, match='seed=-1 .* uint64_t'):
        small_model(seed=-1)
    with pytest.raises(OverflowError, match='max_length=1099511627776'):
        small_model().greedy([[3, 4]], max_length=2**40)
    with pytest.raises(tfm.StateError, match='no current tape'):
        tfm.relu(np.ones(3))
    assert lib.tfm_last_status() == lib.TFM_OK  # every error was taken


def test_non_finite_gradient_refuses_the_step():
    params = tfm.Params()
    w = params.add('w', [2])
    adam = tfm.Adam(params, lr=0.1)
    with tfm.Tape():
        loss = tfm.sum(tfm.scale(w, float('inf')))
        loss.backward()
    before = w.numpy()
    with pytest.raises(tfm.NumericError):
        adam.step()
    np.testing.assert_array_equal(w.numpy(), before)
    assert adam.step_count == 0


# --- lifetimes ----------------------------------------------------------------------
def test_tape_owned_tensors_end_at_reset_and_close():
    tape = tfm.Tape()
    with tape:
        y = tfm.relu(np.array([-1.0, 2.0]))
        kept = y.clone()
    with pytest.raises(tfm.StaleError):
        y.numpy()
    np.testing.assert_array_equal(kept.numpy(), [0.0, 2.0])
    with tape:
        z = tfm.relu(np.array([1.0]))
    tape.close()
    with pytest.raises(tfm.ClosedError):
        z.numpy()
    with pytest.raises(tfm.ClosedError):
        with tape:
            pass


def test_a_decoding_made_directly_decodes_as_far_as_the_model_allows():
    # tfm_decode_options' own max_length (100) is past most models' targets
    model = small_model().eval()
    src = np.array([[3, 4, 5, 0], [6, 7, 0, 0]])
    with tfm.Decoding(model, 2, 4) as decoding:
        decoded = decoding.run(src)
    np.testing.assert_array_equal(decoded.tokens, model.greedy(src))
    assert decoded.tokens.shape == (2, model.options['max_tgt_len'])


def test_closing_a_model_closes_what_depends_on_it():
    model = small_model()
    adam = tfm.Adam(model)
    weight = model.params['generator.weight']
    decoding = tfm.Decoding(model, 2, 6, max_length=3)
    model.close()
    for handle in (adam, weight, decoding):
        with pytest.raises(tfm.ClosedError):
            handle._ptr()
    with pytest.raises(tfm.ClosedError):
        adam.step()
    with pytest.raises(tfm.ClosedError):
        weight.numpy()
    model.close()  # twice is harmless


def test_owners_stay_alive_while_used_and_collection_does_not_crash():
    adam = tfm.Adam(small_model())  # the only reference to the model is the optimizer's
    gc.collect()
    adam.step()
    with tfm.Tape() as tape:
        y = tfm.relu(np.ones(2))
    del tape
    gc.collect()
    with pytest.raises(tfm.StaleError):
        y.numpy()
    with small_model() as model:
        assert model.parameter_count() > 0
    assert model.closed


def test_closing_a_stream_closes_the_layers_that_draw_from_it():
    # The C layers keep the tfm_rng: a layer over a freed stream would draw
    # from freed memory (a crash at collection, found by drawing once).
    rng, store = tfm.Rng(1), tfm.Params()
    layers = [tfm.Dropout(0.5, rng=rng), tfm.FeedForward(store, 'ff', 3, 8, rng=rng)]
    rng.close()
    for layer in layers:
        assert layer.closed
        with tfm.Tape(), pytest.raises(tfm.ClosedError):
            layer(np.ones((2, 3), np.float32))
    kept = tfm.Dropout(0.5, rng=tfm.Rng(2))  # its only reference to the stream
    gc.collect()
    with tfm.Tape():
        assert kept(np.ones((2, 3), np.float32)).shape == (2, 3)


# --- gradients ----------------------------------------------------------------------
def fixture_model():
    model = small_model()
    outcome = model.params.load(MODEL_FIXTURE, strip_prefix='param.', allow_unexpected=True)
    assert outcome['missing'] == [] and len(outcome['loaded']) == len(model.params)
    return model


def fixture(name):
    with open(MODEL_FIXTURE, 'rb'):
        pass
    pointer = lib.tfm_safetensors_open(MODEL_FIXTURE.encode())
    try:
        return tfm.Tensor(tfm._core.check_pointer(lib.tfm_safetensors_get(pointer, name.encode())))
    finally:
        lib.tfm_safetensors_close(pointer)


def test_gradients_equal_pytorchs_and_the_c_librarys():
    model = fixture_model()
    src, tgt, targets = fixture('input.src'), fixture('input.tgt'), fixture('input.targets')
    src_keep, tgt_additive = fixture('mask.src'), fixture('mask.tgt')
    with tfm.Tape():
        logits = model.forward(src, tgt, src_mask=src_keep, tgt_mask=tgt_additive,
                               memory_mask=src_keep)
        np.testing.assert_allclose(logits.numpy(), fixture('output.logits').numpy(), atol=1e-5)
        loss = tfm.cross_entropy(logits, targets, ignore_index=0, label_smoothing=0.1)
        loss.backward()
    python_grads = {n: model.params[n].grad for n in model.params.names()}
    for name, grad in python_grads.items():
        np.testing.assert_allclose(grad, fixture('grad.param.' + name).numpy(), atol=1e-5,
                                   err_msg=name)

    # The same step through the C calls alone gives the same bits.
    model.params.zero_grad()
    tape = lib.tfm_tape_create()
    p = model._ptr()
    logits = lib.tfm_model_forward(tape, p, src._ptr(), tgt._ptr(), src_keep._ptr(),
                                   tgt_additive._ptr(), src_keep._ptr(), ffi.NULL, ffi.NULL,
                                   ffi.NULL)
    loss = lib.tfm_cross_entropy(tape, logits, targets._ptr(), 0, 0.1)
    assert lib.tfm_tape_backward(tape, loss) == lib.TFM_OK
    lib.tfm_tape_free(tape)
    for name, grad in python_grads.items():
        np.testing.assert_array_equal(model.params[name].grad, grad, err_msg=name)


def test_pytorch_boolean_masks_are_converted_not_misread():
    model = fixture_model().eval()
    src, tgt = fixture('input.src').numpy(), fixture('input.tgt').numpy()
    padded = src == 0  # PyTorch's src_key_padding_mask: True = ignore
    with tfm.Tape(recording=False):
        by_bool = model.forward(src, tgt, tgt_mask=tfm.causal_mask(tgt.shape[1]),
                                src_key_padding_mask=padded,
                                memory_key_padding_mask=padded).numpy()
        by_keep = model.forward(src, tgt, src_mask=tfm.padding_mask(src, 0),
                                tgt_mask=tfm.causal_mask(tgt.shape[1]),
                                memory_mask=tfm.padding_mask(src, 0)).numpy()
    np.testing.assert_allclose(by_bool, by_keep, atol=1e-6)
    # PyTorch reads its deprecated byte masks as bool ones (non-zero =
    # ignore), a keep-mask the other way round: refused, not misread.
    with tfm.Tape(recording=False):
        for bytes_mask in ({'src_key_padding_mask': padded.astype(np.uint8)},
                           {'tgt_mask': np.triu(np.ones((tgt.shape[1],) * 2, np.uint8), 1)}):
            with pytest.raises(TypeError, match='uint8'):
                model.forward(src, tgt, **bytes_mask)
        with pytest.raises(TypeError, match='uint8'):
            tfm.softmax(np.ones((2, 2)), np.eye(2, dtype=np.uint8))


def test_inputs_live_until_backward_even_without_python_references():
    w = tfm.tensor(np.ones(4096, np.float32), requires_grad=True)
    with tfm.Tape():
        y = tfm.mul(w, tfm.tensor(np.full(4096, 3.0)))  # no reference kept to the factor
        gc.collect()
        clutter = [tfm.tensor(np.full(4096, -7.0)) for _ in range(8)]  # reuse freed memory
        tfm.sum(y).backward()
        del clutter
    np.testing.assert_array_equal(w.grad, np.full(4096, 3.0, np.float32))


# --- copies and pickles -------------------------------------------------------------
def test_copies_and_pickles_of_a_model_are_independent_models():
    import copy
    import pickle
    model = small_model(dropout=0.1).eval()
    model.recompute(attention_weights=True)
    src, tgt = np.arange(12).reshape(2, 6) % 13, np.arange(10).reshape(2, 5) % 11
    with tfm.Tape(recording=False):
        expected = model.forward(src, tgt).numpy()
    copies = [copy.copy(model), copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    model.params['generator.bias'].write(np.full(11, 5.0))  # only the original changes
    model.close()
    for twin in copies:
        assert not twin.training and twin.options['seed'] == 11
        with tfm.Tape(recording=False):
            np.testing.assert_array_equal(twin.forward(src, tgt).numpy(), expected)
    adam = tfm.Adam(copies[0], lr=1e-2)  # each copy trains on its own
    fit(copies[0].train(), adam, [src])
    assert not np.array_equal(copies[0].state_dict()['generator.bias'],
                              copies[1].state_dict()['generator.bias'])


def test_copies_and_pickles_of_tensors_hold_their_own_values():
    import copy
    import pickle
    w = tfm.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    ids = tfm.tensor(np.array([[1, 2]]))
    copies = [copy.copy(w), copy.deepcopy(w), pickle.loads(pickle.dumps(w))]
    w.write(np.zeros(6))
    del w
    gc.collect()
    for twin in copies:
        assert twin.requires_grad and twin.shape == (2, 3)
        np.testing.assert_array_equal(twin.numpy(), np.arange(6.0).reshape(2, 3))
    again = pickle.loads(pickle.dumps(ids))
    assert again.dtype == np.int32 and again.tolist() == [[1, 2]]
    parameter = small_model().params['generator.bias']
    kept = copy.copy(parameter)  # a caller-owned copy, not a second owner
    parameter.write(np.ones(11))
    assert not (kept.numpy() == 1).all()
    with tfm.Tape():
        y = tfm.relu(np.ones(3))
    for copier in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(tfm.StaleError, match='reset'):
            copier(y)


def test_optimizer_copies_carry_the_state_and_other_handles_refuse_cleanly():
    import copy
    import pickle
    model = small_model()
    adam = tfm.Adam(model, lr=1e-2, betas=(0.8, 0.99))
    batches = [np.arange(12).reshape(2, 6) % 13, (np.arange(12).reshape(2, 6) * 5) % 13]
    fit(model, adam, batches)
    same_params = copy.copy(adam)
    assert same_params.step_count == 2
    for name, value in adam.state_dict().items():
        np.testing.assert_array_equal(same_params.state_dict()[name], value)
    twin_model, twin_adam = copy.deepcopy((model, adam))  # one memo: the copy's own model
    fit(twin_model, twin_adam, batches)
    fit(model, adam, batches)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(twin_model.state_dict()[name], value)
    assert twin_adam.step_count == adam.step_count == 4 and same_params.step_count == 2
    for handle, advice in ((tfm.Tape(), 'new tfm.Tape'), (tfm.Decoding(model, 1, 6, max_length=3), 'another'),
                           (tfm.Linear(tfm.Params(), 'l', 2, 2, rng=tfm.Rng(0)), 'deepcopy\\(params\\)')):
        with pytest.raises(TypeError, match=advice):
            copy.copy(handle)
        with pytest.raises(TypeError, match=advice):
            pickle.dumps(handle)
    with pytest.raises(TypeError, match='state_dict'):
        pickle.dumps(adam)
    stream = tfm.Rng(3)
    stream.uniform()
    assert copy.copy(stream).uniform() == stream.uniform()
    params = model.params
    alone = copy.deepcopy(params)
    assert alone.names() == params.names() and alone._owner is None


# --- what PyTorch users pass ---------------------------------------------------------
class TorchLike:
    """What torch.Tensor offers the package (detach, cpu, numpy), without torch."""

    def __init__(self, array):
        self.array = np.asarray(array)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.array


def test_pytorchs_mask_pair_float_causal_beside_bool_padding():
    model = fixture_model().eval()
    src, tgt = fixture('input.src').numpy(), fixture('input.tgt').numpy()
    padded = src == 0
    t = tgt.shape[1]
    square = np.triu(np.full((t, t), -np.inf, np.float32), 1)  # generate_square_subsequent_mask
    with tfm.Tape(recording=False):
        expected = model.forward(src, tgt, src_mask=tfm.padding_mask(src, 0),
                                 tgt_mask=tfm.causal_mask(t, additive=False),
                                 memory_mask=tfm.padding_mask(src, 0)).numpy()
        for causal, pad in ((square, padded), (TorchLike(square), TorchLike(padded)),
                            (tfm.causal_mask(t), padded),
                            (square, (~padded).astype(np.int32))):  # an int keep-mask
            got = model.forward(src, tgt, tgt_mask=causal, src_key_padding_mask=pad,
                                tgt_key_padding_mask=np.zeros(tgt.shape, bool),
                                memory_key_padding_mask=pad).numpy()
            np.testing.assert_allclose(got, expected, atol=1e-6)


def test_torch_tensors_and_array_likes_are_taken_wherever_a_tensor_is():
    logits = np.linspace(-1, 1, 2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    targets = np.array([[0, 1, 4], [2, 3, 3]])

    class ArrayLike:
        def __array__(self, dtype=None):
            return logits

    with tfm.Tape():
        expected = tfm.cross_entropy(logits, targets).item()
        assert tfm.cross_entropy(TorchLike(logits), TorchLike(targets)).item() == expected
        assert tfm.cross_entropy(ArrayLike(), targets).item() == expected
        np.testing.assert_array_equal(tfm.softmax(TorchLike(logits)).numpy(),
                                      tfm.softmax(logits).numpy())
        np.testing.assert_array_equal(
            tfm.softmax(logits, mask=np.array([False, False, True, False, True])).numpy(),
            tfm.softmax(logits, mask=np.array([1, 1, 0, 1, 0], np.int32)).numpy())
        with pytest.raises(TypeError, match='torch tensors'):
            tfm.softmax({'not': 'a tensor'})


# --- what PyTorch users reach for ----------------------------------------------------
def test_encode_then_decode_is_forward():
    model = small_model().eval()
    src, tgt = np.arange(12).reshape(2, 6) % 13, np.arange(10).reshape(2, 5) % 11
    padded = np.zeros((2, 6), bool)
    padded[1, 4:] = True
    with tfm.Tape(recording=False):
        expected = model.forward(src, tgt, tgt_mask=tfm.causal_mask(5),
                                 src_key_padding_mask=padded,
                                 memory_key_padding_mask=padded).numpy()
        memory = model.encode(src, src_key_padding_mask=padded)
        assert memory.shape == (2, 6, 16)
        got = model.decode(tgt, memory, tgt_mask=tfm.causal_mask(5),
                           memory_key_padding_mask=padded).numpy()
    np.testing.assert_array_equal(got, expected)


def test_greedy_gives_scores_lengths_and_each_steps_logits():
    model = small_model().eval()
    src = np.array([[3, 7, 12, 5, 9, 1], [4, 11, 2, 1, 1, 1]])
    plain = model.greedy(src, max_length=4, eos_id=-1)
    result = model.greedy(src, max_length=4, eos_id=-1, return_logits=True)
    np.testing.assert_array_equal(result.tokens, plain)
    assert result.lengths.tolist() == [5, 5] and result.logits.shape == (2, 4, 11)
    np.testing.assert_array_equal(result.logits.argmax(-1), plain[:, 1:])  # greedy: the argmax
    log_probs = result.logits - np.log(np.exp(result.logits).sum(-1, keepdims=True))
    chosen = np.take_along_axis(log_probs, plain[:, 1:, None], -1)[..., 0].sum(-1)
    np.testing.assert_allclose(result.scores, chosen, rtol=1e-5)
    scored = model.greedy(src, max_length=4, return_scores=True)
    assert scored.logits is None and scored.scores.shape == (2,)
    drawn = model.sample(src, max_length=4, eos_id=-1, seed=1, return_logits=True)
    np.testing.assert_allclose(drawn.probs.sum(-1), 1, rtol=1e-5)


def test_load_state_dict_with_a_prefix_and_not_strict():
    a, b = small_model(seed=1), small_model(seed=2)
    state = {'model.' + k: v for k, v in a.state_dict().items() if k != 'generator.bias'}
    state['model.extra'] = np.zeros(1)
    with pytest.raises(KeyError):
        b.load_state_dict(state, strip_prefix='model.')
    kept_bias = b.state_dict()['generator.bias']
    result = b.load_state_dict(state, strip_prefix='model.', strict=False)
    assert result.missing_keys == ['generator.bias'] and result.unexpected_keys == ['extra']
    np.testing.assert_array_equal(b.state_dict()['generator.weight'],
                                  a.state_dict()['generator.weight'])
    np.testing.assert_array_equal(b.state_dict()['generator.bias'], kept_bias)
    b.load_state_dict({k: TorchLike(v) for k, v in a.state_dict().items()})
    names = [n for n, _ in b.named_parameters()]
    assert names == b.params.names() and len(b.parameters()) == len(names)
    np.testing.assert_array_equal(b.parameters()[-1].numpy(), a.state_dict()[names[-1]])


def test_tensor_indexing_argmax_reductions_and_arithmetic_through_the_tape():
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    x = tfm.tensor(values, requires_grad=True)
    np.testing.assert_array_equal(x[0], values[0])
    np.testing.assert_array_equal(x[:, 1:, ::2], values[:, 1:, ::2])
    np.testing.assert_array_equal(x.argmax(), values.argmax(-1))
    np.testing.assert_array_equal(x.argmax(axis=1), values.argmax(1))
    weights = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    with tfm.Tape():
        for axis in (0, 1, 2, -1):
            for keepdims in (False, True):
                np.testing.assert_allclose(x.sum(axis, keepdims).numpy(),
                                           values.sum(axis, keepdims=keepdims), rtol=1e-6)
                np.testing.assert_allclose(tfm.mean(x, axis, keepdims).numpy(),
                                           values.mean(axis, keepdims=keepdims), rtol=1e-6)
        np.testing.assert_allclose(tfm.sum(np.arange(5.0), 0).numpy(), [10.0])
        y = (-(x * 2) + 1.0 - 0.5 + 3 * x / 4 - x.mean(1, keepdims=True)) * weights
        np.testing.assert_allclose(
            y.numpy(), (-(values * 2) + 0.5 + 0.75 * values - values.mean(1, keepdims=True))
            * weights, rtol=1e-5, atol=1e-6)
        loss = y.sum()
        loss.backward()
    # d/dx: (-2 + 0.75) * w - (1/3) * sum over axis 1 of w
    expected = -1.25 * weights - weights.sum(1, keepdims=True) / 3
    np.testing.assert_allclose(x.grad, expected, rtol=1e-5, atol=1e-6)
    assert loss.item() == pytest.approx(float(((-(values * 2) + 0.5 + 0.75 * values
                                                - values.mean(1, keepdims=True))
                                               * weights).sum()), rel=1e-5)
    with pytest.raises(tfm.StaleError):
        loss.numpy()  # the value is kept, not the tensor
    assert 'item=' in repr(loss) and 'shape=(2, 3, 4)' in repr(x)
    with pytest.raises(TypeError, match='number'):
        with tfm.Tape():
            x / x


def test_numpy_values_on_the_left_record_on_the_tape_too():
    # numpy's own operators would read the tensor into a plain array: the
    # result a numpy array, the gradient silently lost.
    x = tfm.tensor([1.0, 2.0], requires_grad=True)
    with tfm.Tape():
        terms = [np.float32(3) * x, np.float64(0.5) + x, np.ones(2) - x, np.full(2, 2.0) * x,
                 np.eye(2, dtype=np.float32) @ tfm.reshape(x, [2, 1])]
        assert all(isinstance(term, tfm.Tensor) for term in terms)
        total = terms[0] + terms[1] + terms[2] + terms[3] + tfm.reshape(terms[4], [2])
        np.testing.assert_allclose(total.numpy(), [3 + 1.5 + 0 + 2 + 1, 6 + 2.5 - 1 + 4 + 2])
        total.sum().backward()
    np.testing.assert_allclose(x.grad, [3 + 1 - 1 + 2 + 1] * 2)
    with pytest.raises(TypeError):
        np.ones(2) / x  # libtfm divides by numbers only


def test_parameter_groups_set_weight_decay_and_state_dicts_resume():
    model = small_model()
    params = model.named_parameters()
    decay = [t for n, t in params if t.ndim >= 2]
    no_decay = [t for n, t in params if t.ndim < 2]
    adamw = tfm.AdamW([{'params': decay, 'weight_decay': 0.05},
                       {'params': no_decay, 'weight_decay': 0.0}], lr=1e-2, schedule='cosine',
                      warmup_steps=1, total_steps=10)
    assert adamw.weight_decay('generator.weight') == pytest.approx(0.05)
    assert adamw.weight_decay(model.params['generator.bias']) == 0.0
    with pytest.raises(ValueError, match='weight_decay only'):
        tfm.AdamW([{'params': decay, 'lr': 1.0}, {'params': no_decay}])
    with pytest.raises(ValueError, match='every parameter'):
        tfm.AdamW([{'params': decay}])
    plain = tfm.Adam(model.parameters(), lr=1e-2)
    assert plain.weight_decay('generator.bias') == 0.0
    batches = [np.arange(12).reshape(2, 6) % 13] * 2
    fit(model, adamw, batches)
    state, saved = adamw.state_dict(), model.state_dict()
    assert state['weight_decay'].shape == (len(params),)
    fit(model, adamw, batches)
    again = small_model()
    again.load_state_dict(saved)
    resumed = tfm.AdamW(again, lr=1e-2, schedule='cosine', warmup_steps=1, total_steps=10)
    resumed.load_state_dict(state)
    assert resumed.step_count == 2 and resumed.weight_decay('generator.bias') == 0.0
    fit(again, resumed, batches)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(again.state_dict()[name], value)
    with pytest.raises(tfm.Error, match='kind'):
        resumed.load_state_dict(dict(state, kind=np.array([0], np.int32)))
    assert 'tfm.AdamW(lr=' in repr(adamw) and "schedule='cosine'" in repr(adamw)


def test_options_and_reprs_speak_in_names():
    model = small_model(positions='learned', activation='gelu')
    o = model.options
    assert o['positions'] == 'learned' and o['activation'] == 'gelu'
    assert o['embedding_scale'] == 'sqrt_d'
    assert tfm.Model(**o).options == o
    assert repr(model).startswith('tfm.Model(src_vocab=13, tgt_vocab=11, d_model=16')
    assert 'parameters=%d' % model.parameter_count() in repr(model)
    assert repr(model.params).startswith('tfm.Params(') and 'recording=True' in repr(tfm.Tape())
    with pytest.raises(ValueError, match='cosine'):
        tfm.Adam(model, schedule='linear')
    assert repr(tfm.Adam(model)) == 'tfm.Adam(lr=0.001, step_count=0)'
    assert repr(tfm.SGD(model, lr=0.5, momentum=0.9)) == \
        'tfm.SGD(lr=0.5, step_count=0, momentum=0.9)'


# --- the reference -------------------------------------------------------------------
def test_every_public_name_has_a_docstring():
    import inspect
    undocumented = []
    for name in dir(tfm):
        value = getattr(tfm, name)
        if name.startswith('_') or inspect.ismodule(value) or name in ('ffi', 'lib'):
            continue
        if not (callable(value) or inspect.isclass(value)):
            continue
        if not inspect.getdoc(value):
            undocumented.append(name)
        if inspect.isclass(value) and not issubclass(value, BaseException):
            for member, attribute in vars(value).items():
                if member.startswith('_') or not (callable(attribute) or
                                                  isinstance(attribute, (property, classmethod))):
                    continue
                if not inspect.getdoc(getattr(value, member)):
                    undocumented.append('%s.%s' % (name, member))
    assert undocumented == []


# --- installing -----------------------------------------------------------------------
def test_the_wheel_records_the_installed_library_and_headers(tmp_path, monkeypatch):
    import importlib.util
    import zipfile
    backend_file = os.path.join(os.path.dirname(__file__), '..', 'pep517_backend.py')
    spec = importlib.util.spec_from_file_location('pep517_backend', backend_file)
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    headers = tfm._binding._header_dir()
    monkeypatch.setenv('TFM_LIBRARY', tfm.library_path)
    monkeypatch.setenv('TFM_INCLUDE_DIR', headers)
    assert backend.get_requires_for_build_wheel() == []  # nothing to fetch: builds offline
    name = backend.build_wheel(str(tmp_path))
    assert name == 'tfm-%s-py3-none-any.whl' % tfm.__version__
    with zipfile.ZipFile(tmp_path / name) as wheel:
        recorded = {}
        exec(wheel.read('tfm/_installed.py'), recorded)
        assert recorded['LIBRARY'] == os.path.abspath(tfm.library_path)
        assert recorded['INCLUDE_DIR'] == os.path.abspath(headers)
        assert not [n for n in wheel.namelist() if n.endswith('.h')]  # headers stay installed
        record = wheel.read('tfm-%s.dist-info/RECORD' % tfm.__version__).decode().split()
        assert sorted(line.split(',')[0] for line in record) == sorted(wheel.namelist())
    monkeypatch.setenv('TFM_INCLUDE_DIR', str(tmp_path))
    with pytest.raises(RuntimeError, match='TFM_INCLUDE_DIR'):
        backend.build_wheel(str(tmp_path))


def test_the_python_reference_is_generated_from_these_docstrings():
    import subprocess
    import sys
    root = os.path.join(os.path.dirname(__file__), '..', '..', '..')
    generated = subprocess.run([sys.executable, os.path.join(root, 'scripts', 'python_reference.py')],
                               check=True, capture_output=True, text=True).stdout
    with open(os.path.join(root, 'docs', 'python.md')) as committed:
        assert generated == committed.read(), \
            'docs/python.md is stale: python3 scripts/python_reference.py > docs/python.md'


# --- decoding hooks: a forced prefix, streaming, alignments -------------------------
DECODE_SOURCES = np.array([[3, 7, 12, 5, 9, 4], [4, 11, 2, 6, 0, 0], [8, 8, 10, 0, 0, 0]])


def fixture_decoder():
    """The fixture model as tests/test_decode_options.c decodes it."""
    model = small_model(max_src_len=16, max_tgt_len=16)
    outcome = model.params.load(MODEL_FIXTURE, strip_prefix='param.', allow_unexpected=True)
    assert outcome['missing'] == []
    return model.eval()


def aligned_fixture(name):
    """decode_alignments.h's array `name` for its first case ("none")."""
    with open(os.path.join(FIXTURES, 'decode_alignments.h')) as f:
        lines = f.read().split('\n')
    first = lines[[i for i, line in enumerate(lines) if ' %s[' % name in line][0] + 1]
    return np.array([float(v) for v in re.findall(r'(-?[0-9.e+-]+)f', first)], np.float32)


def test_a_forced_prefix_is_in_every_strategys_output():
    model = fixture_decoder()
    prefix = np.array([[5, 3, -1], [-1, -1, -1], [8, 6, 4]])
    greedy = model.greedy(DECODE_SOURCES, max_length=6, prefix=prefix)
    tokens, _ = model.beam(DECODE_SOURCES, max_length=6, beam_size=3, n_best=2, prefix=prefix)
    drawn = model.sample(DECODE_SOURCES, max_length=6, seed=4, prefix=prefix)
    for out in (greedy, tokens[:, 0], tokens[:, 1], drawn):
        np.testing.assert_array_equal(out[0, 1:3], [5, 3])
        np.testing.assert_array_equal(out[2, 1:4], [8, 6, 4])
    assert (greedy[1] == model.greedy(DECODE_SOURCES, max_length=6)[1]).all()
    with tfm.Decoding(model, 3, 6, max_length=6) as decoding:
        np.testing.assert_array_equal(decoding.run(DECODE_SOURCES, prefix=prefix).tokens, greedy)
    with pytest.raises(tfm.RangeError, match='tfm_decoding_run_with_prefix: prefix'):
        model.greedy(DECODE_SOURCES, max_length=6, prefix=[[5, -1, 3]] * 3)


def test_the_callback_streams_each_token_and_can_stop_a_source():
    model = fixture_decoder()
    for strategy in ('greedy', 'beam'):
        decode = getattr(model, strategy)
        seen = {}

        def stream(source, token, position):
            seen.setdefault(source, []).append((position, token))
            return source == 1 and position == 2

        out = decode(DECODE_SOURCES, max_length=8, eos_id=-1, callback=stream)
        best = out if strategy == 'greedy' else out[0][:, 0]
        plain = decode(DECODE_SOURCES, max_length=8, eos_id=-1)
        plain = plain if strategy == 'greedy' else plain[0][:, 0]
        for source in (0, 2):
            assert seen[source] == [(i, int(t)) for i, t in enumerate(best[source, 1:], 1)]
        assert seen[1] == [(i, int(plain[1, i])) for i in (1, 2)]
        if strategy == 'greedy':  # stopped at its second token
            np.testing.assert_array_equal(best[1, 3:], -1)
            np.testing.assert_array_equal(best[[0, 2]], plain[[0, 2]])

    def failing(source, token, position):
        raise KeyError('from the callback')
    with pytest.raises(KeyError, match='from the callback'):
        model.greedy(DECODE_SOURCES, max_length=4, callback=failing)


def test_alignments_are_pytorchs_cross_attention_of_the_chosen_tokens():
    model = fixture_decoder()
    decoded = model.greedy(DECODE_SOURCES, max_length=12, eos_id=2, return_attention=True)
    want = aligned_fixture('aligned_greedy').reshape(3, 12, 6)
    for b, weights in enumerate(decoded.attention):
        assert weights.shape == (decoded.lengths[b] - 1, 6)
        np.testing.assert_allclose(weights, want[b, :len(weights)], atol=2e-6)
    tokens, _, attention = model.beam(DECODE_SOURCES, max_length=12, eos_id=2, beam_size=3,
                                      n_best=2, return_attention=True)
    want = aligned_fixture('aligned_beam').reshape(3, 2, 12, 6)
    for b in range(3):
        for h in range(2):
            rows = int((tokens[b, h] != -1).sum()) - 1
            np.testing.assert_allclose(attention[b][h], want[b, h, :rows], atol=2e-6)
    assert model.greedy(DECODE_SOURCES, max_length=4, return_scores=True).attention is None

def write_layerless_marian(folder, generation_config=None):
    """A Marian folder of no layers (its shared table and final_logits_bias
    under their published names); returns the table and the bias."""
    vocab, d = 7, 4
    rng = np.random.default_rng(3)
    table = rng.standard_normal((vocab, d)).astype(np.float32)
    bias = rng.standard_normal((1, vocab)).astype(np.float32)
    weights = tfm.Params()
    weights.add('model.shared.weight', [vocab, d]).write(table)
    weights.add('final_logits_bias', [1, vocab]).write(bias)
    weights.save(folder / 'model.safetensors')
    config = ('{"model_type": "marian", "vocab_size": 7, "d_model": 4, "encoder_layers": 0,'
              ' "decoder_layers": 0, "encoder_attention_heads": 2, "decoder_attention_heads": 2,'
              ' "encoder_ffn_dim": 8, "decoder_ffn_dim": 8, "max_position_embeddings": 8,'
              ' "activation_function": "swish", "pad_token_id": 6, "eos_token_id": 0,'
              ' "decoder_start_token_id": 6, "scale_embedding": true}')
    (folder / 'config.json').write_text(config)
    if generation_config is not None:
        (folder / 'generation_config.json').write_text(generation_config)
    return table, bias


def test_from_pretrained_reads_a_marian_folder(tmp_path):
    """The logits of a layerless Marian folder are the tied projection of
    the scaled embeddings plus Marian's sinusoids, and the bias."""
    table, bias = write_layerless_marian(tmp_path)
    d = table.shape[1]
    model = tfm.Model.from_pretrained(tmp_path)
    assert model.options['activation'] == 'silu'
    assert model.options['positions'] == 'sinusoidal_halves'
    assert model.options['bos_id'] == 6
    tgt = np.array([[6, 2, 3]], np.int32)
    with tfm.Tape():
        memory = model.encode(np.array([[1, 2]], np.int32))
        logits = model.decode(tgt, memory).numpy()
    positions = np.arange(3)[:, None] / 10000 ** (2 * np.arange(2)[None, :] / d)
    sinusoids = np.concatenate([np.sin(positions), np.cos(positions)], axis=1)
    x = table[tgt[0]] * np.sqrt(d) + sinusoids
    want = x @ table.T + bias
    np.testing.assert_allclose(logits[0], want, rtol=1e-5, atol=1e-5)
    (tmp_path / 'config.json').write_text('{"model_type": "pegasus"}')
    with pytest.raises(tfm.FormatError, match='model_type "pegasus"'):
        tfm.Model.from_pretrained(tmp_path)


def test_text_through_a_published_model():
    """tests/bart's fixture: encode_text puts BART's <s> and </s> around
    the source as its twin's tokenizer does, decode_text gives the twin's
    text of the greedy ids; a model without tokenizers is refused."""
    folder = os.path.join(FIXTURES, '..', 'bart')
    expected = json.load(open(os.path.join(folder, 'expected.json')))
    model = tfm.Model.from_pretrained(folder)
    for case in expected['cases']:
        assert model.encode_text(case['source']) == case['input_ids']
        assert model.decode_text(case['greedy']['ids']) == case['greedy']['text']
    for twin in (copy.copy(model), pickle.loads(pickle.dumps(model))):
        assert twin.encode_text(expected['cases'][0]['source']) == expected['cases'][0]['input_ids']
    sources = [case['source'] for case in expected['cases']]
    assert model.encode_text(sources) == [case['input_ids'] for case in expected['cases']]
    # cut as transformers' truncation=True: <s> and </s> stay
    long = ' '.join(sources * 20)
    whole = model.encode_text(long)
    assert model.encode_text(long, max_length=9) == whole[:8] + whole[-1:]
    assert model.encode_text([long], max_length=len(whole) + 1) == [whole]
    with pytest.raises(tfm.SizeError, match='cannot hold'):
        model.encode_text(long, max_length=1)
    model.set_source_template(suffix=[2])
    assert model.encode_text('a')[-1] == 2 and model.encode_text('a')[0] != 0
    with pytest.raises(tfm.StateError, match='carry no language'):
        model.set_languages('en_XX')
    # no ids (a translation of a blank line) are no text, as Tokenizer.decode's
    assert model.decode_text([]) == '' and model.decode_text(np.zeros(0, np.int32)) == ''
    bare = tfm.Model(src_vocab=8, tgt_vocab=8, d_model=4, heads=2, max_src_len=8, max_tgt_len=8)
    with pytest.raises(tfm.StateError, match='no tokenizers'):
        bare.encode_text('a')
    with pytest.raises(tfm.StateError, match='no tokenizers'):
        bare.decode_text([])


def test_beam_renormalizes_as_the_folder_says():
    """tests/marian's fixture (generation_config.json: renormalize_logits
    true, bad_words_ids [[pad]]): Model.beam gives its twin's ids and score
    by default, and another score with renormalize_logits=False."""
    folder = os.path.join(FIXTURES, '..', 'marian')
    expected = json.load(open(os.path.join(folder, 'expected.json')))
    model = tfm.Model.from_pretrained(folder)
    max_length = expected['generation_config']['beam']['max_length'] - 1
    for case in expected['cases']:
        src = np.array([case['input_ids']], np.int32)
        tokens, scores = model.beam(src, max_length=max_length)
        want = case['beam']['ids']
        assert tokens[0, 0, :len(want)].tolist() == want
        assert abs(scores[0, 0] - case['beam']['score']) <= 2e-5 * (1 + abs(case['beam']['score']))
        _, plain = model.beam(src, max_length=max_length, renormalize_logits=False)
        assert abs(plain[0, 0] - case['beam']['score']) > 1e-4


def test_greedy_decodes_greedily_a_model_whose_default_is_beam_search(tmp_path):
    """Model.greedy is greedy even when the folder's generation_config.json
    sets num_beams 4 (the model's default strategy, as opus-mt-en-de's): each
    token is the argmax of its step's logits."""
    write_layerless_marian(tmp_path, '{"num_beams": 4, "max_length": 5, "eos_token_id": 0,'
                                     ' "decoder_start_token_id": 6, "pad_token_id": 6}')
    model = tfm.Model.from_pretrained(tmp_path)
    decoded = model.greedy(np.array([[1, 2]], np.int32), max_length=3, eos_id=-1,
                           return_logits=True)
    np.testing.assert_array_equal(decoded.tokens[0, 1:], decoded.logits[0].argmax(axis=1))


def test_save_pretrained_round_trip(tmp_path):
    """A published folder saved back in its layout loads as the same
    model; a model created here has no family's layout to be saved in."""
    folder = os.path.join(FIXTURES, '..', 'marian')
    model = tfm.Model.from_pretrained(folder)
    saved = tmp_path / 'saved'
    model.save_pretrained(saved)
    again = tfm.Model.from_pretrained(saved)
    ours, theirs = model.state_dict(), again.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(np.array_equal(ours[k], theirs[k]) for k in ours)
    assert again.encode_text('Hello') == model.encode_text('Hello')
    with pytest.raises(tfm.StateError, match='not loaded from a published folder'):
        tfm.Model(src_vocab=8, tgt_vocab=8, max_src_len=8, max_tgt_len=8, d_model=8, heads=2, d_ff=8,
                  encoder_layers=1, decoder_layers=1).save_pretrained(tmp_path / 'own')
    assert not (tmp_path / 'own').exists()
