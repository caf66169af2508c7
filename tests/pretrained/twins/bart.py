"""Twin of a BART folder: BartForConditionalGeneration and BartTokenizer.

Written from huggingface/transformers (read, not copied):
  src/transformers/models/bart/modeling_bart.py       57228229d2ee2729f6ee597b4973aefdb39c2b37
      learned positions with offset 2, layernorm_embedding, post-norm
      layers, "gelu", no embedding scale (scale_embedding false),
      final_logits_bias, tied lm_head
  src/transformers/models/bart/tokenization_bart.py   65c90dfe8a724c1a92fef27ac7c9baab4a0e882f
      byte-level BPE (vocab.json, merges.txt), <s> X </s>
"""
import os

from byte_bpe import apply_merges, bytes_to_unicode, pretokenize, to_symbols
from common import Twin, read_json
from seq2seq import Layout, load_model

LAYOUT = Layout(pre_norm=False, layernorm_embedding=True, final_layer_norm=False,
                positions="learned", final_logits_bias=True)

SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


class BartTokenizer:
    def __init__(self, folder):
        self.vocab = read_json(folder, "vocab.json")
        self.pieces = {i: piece for piece, i in self.vocab.items()}
        with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
            lines = [line.split() for line in f.read().split("\n")[1:] if line.strip()]
        self.ranks = {tuple(pair): rank for rank, pair in enumerate(lines)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        self.special = {self.vocab[token] for token in SPECIAL if token in self.vocab}

    def encode(self, text, language=None, target=False):
        ids = [self.vocab.get(piece, self.vocab["<unk>"])
               for token in pretokenize(text)
               for piece in apply_merges(to_symbols(token, self.byte_encoder), self.ranks)]
        return [self.vocab["<s>"]] + ids + [self.vocab["</s>"]]

    def decode(self, ids):
        text = "".join(self.pieces[i] for i in ids if i not in self.special)
        return bytes(self.byte_decoder[c] for c in text).decode("utf-8", errors="replace")


def load(folder):
    return Twin(folder, load_model(folder, LAYOUT), BartTokenizer(folder))
