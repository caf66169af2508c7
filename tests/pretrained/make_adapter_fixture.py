#!/usr/bin/python3
"""tests/marian/adapter: a LoRA adapter for tests/marian as PEFT saves one,
and the logits PEFT's LoRA layers give over the Marian twin.

PEFT is not installed here, so this script follows PEFT's own source
(huggingface/peft, src/peft/tuners/lora/config.py, layer.py,
tuners_utils.py check_target_module_exists, utils/save_and_load.py
get_peft_model_state_dict), never libtfm's:

- adapter_config.json: LoraConfig's fields (and PeftConfig's), sorted, as
  save_pretrained writes them (json.dumps(indent=2, sort_keys=True));
- adapter_model.safetensors: the state dict's lora_ parameters with the
  adapter name removed: base_model.model.<module>.lora_A.weight [r, in]
  and .lora_B.weight [out, r], metadata {"format": "pt"};
- a module is adapted when its name ends with "." + a target_modules entry
  (or is one) and, with layers_to_transform, its first ".<name>.<N>."
  number is listed;
- Linear.forward: result = base(x) + lora_B(lora_A(dropout(x))) * scaling,
  scaling = lora_alpha / r.

The twin (tests/pretrained/twins, transformers' MarianMTModel) runs the
four cases of tests/marian/expected.json with the adapter; their logits go
to adapter/expected.safetensors. Run once: python3 make_adapter_fixture.py
"""
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "twins"))
import common  # noqa: E402
import marian  # noqa: E402
import seq2seq  # noqa: E402

FOLDER = os.path.join(HERE, "..", "marian")
OUT = os.path.join(FOLDER, "adapter")

R, ALPHA = 4, 12
TARGET_MODULES = ["q_proj", "v_proj", "self_attn.out_proj", "fc1"]
LAYERS_TO_TRANSFORM = [1]

CONFIG = {
    "alpha_pattern": {},
    "auto_mapping": None,
    "base_model_name_or_path": "Helsinki-NLP/opus-mt-en-fr",
    "bias": "none",
    "exclude_modules": None,
    "fan_in_fan_out": False,
    "inference_mode": True,
    "init_lora_weights": True,
    "layer_replication": None,
    "layers_pattern": None,
    "layers_to_transform": LAYERS_TO_TRANSFORM,
    "loftq_config": {},
    "lora_alpha": ALPHA,
    "lora_bias": False,
    "lora_dropout": 0.1,
    "megatron_config": None,
    "megatron_core": "megatron.core",
    "modules_to_save": None,
    "peft_type": "LORA",
    "r": R,
    "rank_pattern": {},
    "revision": None,
    "target_modules": TARGET_MODULES,
    "task_type": "SEQ_2_SEQ_LM",
    "use_dora": False,
    "use_rslora": False,
}


def adapted(module):
    """check_target_module_exists for this config."""
    if not any(module == t or module.endswith("." + t) for t in TARGET_MODULES):
        return False
    index = re.match(r".*?\.[^.]*\.(\d+)\.", module)
    return index is not None and int(index.group(1)) in LAYERS_TO_TRANSFORM


def main():
    model = seq2seq.load_model(FOLDER, marian.LAYOUT, marian.MarianModel)
    modules = sorted(name[: -len(".weight")] for name in model.weights
                     if name.endswith(".weight") and adapted(name[: -len(".weight")]))
    generator = torch.Generator().manual_seed(42)
    tensors = {}
    for module in modules:
        out, inp = model.weights[module + ".weight"].shape
        # B is not zero here (an adapter after training), A as kaiming_uniform_(a=sqrt(5))
        bound = 1.0 / inp ** 0.5
        tensors["base_model.model.%s.lora_A.weight" % module] = (
            torch.rand(R, inp, generator=generator) * 2 - 1) * bound
        tensors["base_model.model.%s.lora_B.weight" % module] = (
            torch.rand(out, R, generator=generator) * 2 - 1) * 0.5
    os.makedirs(OUT, exist_ok=True)
    common.save_safetensors(os.path.join(OUT, "adapter_model.safetensors"), tensors,
                            {"format": "pt"})
    common.write_json(OUT, "adapter_config.json", CONFIG)

    base_linear = seq2seq.linear
    scaling = ALPHA / R

    def lora_linear(weights, name, x, bias=True):
        result = base_linear(weights, name, x, bias)
        a = tensors.get("base_model.model.%s.lora_A.weight" % name)
        if a is not None:  # eval: dropout is the identity
            b = tensors["base_model.model.%s.lora_B.weight" % name]
            result = result + torch.nn.functional.linear(
                torch.nn.functional.linear(x, a), b) * scaling
        return result

    seq2seq.linear = lora_linear
    expected = common.read_json(FOLDER, "expected.json")
    logits = {}
    with torch.no_grad():
        for i, case in enumerate(expected["cases"]):
            ids = torch.tensor([case["input_ids"]])
            decoder_ids = torch.tensor([case["decoder_input_ids"]])
            logits["logits.%d" % i] = model.logits(ids, decoder_ids)[0].contiguous()
    common.save_safetensors(os.path.join(OUT, "expected.safetensors"), logits, {"format": "pt"})
    print("%d adapted modules, %d cases" % (len(modules), len(logits)))


if __name__ == "__main__":
    main()
