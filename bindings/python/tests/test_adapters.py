"""Low-rank adapters from Python on tests/marian: PEFT's fixture folder
loads and changes the translation, saves back, trains alone (the base
unchanged), merges, and the translator picks an adapter per call."""
import os
import tempfile

import numpy as np
import pytest

import tfm

FOLDER = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tests', 'marian')
ADAPTER = os.path.join(FOLDER, 'adapter')
TEXT = 'Address family for hostname not supported'


def test_a_peft_folder_loads_saves_and_translates_per_call():
    model = tfm.Model.from_pretrained(FOLDER)
    model.load_adapter('peft', ADAPTER)
    assert model.adapters == ['peft']
    with tempfile.TemporaryDirectory() as folder:
        model.save_adapter('peft', folder)
        model.load_adapter('again', folder)
    np.testing.assert_array_equal(model.adapter_params('peft').state_dict()[
        'base_model.model.model.encoder.layers.1.fc1.lora_A.weight'],
        model.adapter_params('again').state_dict()[
        'base_model.model.model.encoder.layers.1.fc1.lora_A.weight'])
    translator = tfm.Translator.from_model(model)
    plain = translator.translate(TEXT)
    adapted = translator.translate(TEXT, adapter='peft')
    assert translator.submit(TEXT, adapter='again').result() == adapted
    with pytest.raises(tfm.ArgumentError):
        translator.translate(TEXT, adapter='none such')
    translator.close()
    model.merge_adapter('peft')
    merged = tfm.Translator.from_model(model)
    assert merged.translate(TEXT) == adapted != plain


def test_only_the_adapter_trains():
    model = tfm.Model.from_pretrained(FOLDER)
    model.add_adapter('t', rank=2, alpha=4, targets=('q', 'v', 'ff_in'), layers=[0])
    model.use_adapter('t').train()
    assert model.adapter_in_use == 't'
    base = {k: v.copy() for k, v in model.params.state_dict().items()}
    store = model.adapter_params('t')
    assert len(store) == 2 * 8  # encoder q v fc1, decoder q v (self and cross) fc1
    before = {k: v.copy() for k, v in store.state_dict().items()}
    optimizer = tfm.AdamW(store, lr=1e-2)
    src = np.array([[5, 6, 7, 0]], dtype=np.int32)
    tgt = np.array([[306, 8, 9]], dtype=np.int32)
    gold = np.array([8, 9, 0], dtype=np.int32)
    tape = tfm.Tape()
    for _ in range(2):
        with tape:
            loss = tfm.cross_entropy(model.forward(src, tgt, tgt_mask=tfm.causal_mask(3)),
                                     gold[None, :])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    for name, value in model.params.state_dict().items():
        np.testing.assert_array_equal(value, base[name])
    assert any((store.state_dict()[k] != before[k]).any() for k in before)
    model.remove_adapter('t')
    assert store.closed and model.adapters == []
