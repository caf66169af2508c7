"""Twin of an M2M100 folder: M2M100ForConditionalGeneration and
M2M100Tokenizer.

Written from huggingface/transformers (read, not copied):
  src/transformers/models/m2m_100/modeling_m2m_100.py      001400f58fab2511856b86500380fd51aaa6150f
      fairseq sinusoids (sines then cosines, positions from padding_idx + 1,
      padding rows zero), embeddings times sqrt(d_model), pre-norm layers,
      final layer_norm per stack, "relu", tied lm_head, no logits bias
  src/transformers/models/m2m_100/tokenization_m2m_100.py  024483cb69322a76b7541713f66eb7fffa20291c
      sentencepiece.bpe.model pieces looked up in vocab.json; "__xx__"
      language tokens after the vocabulary, then 8 made-up words;
      __src__ X </s>; the target language as forced_bos_token_id
"""
import os

from common import Twin, load_safetensors, load_sentencepiece, read_json
from seq2seq import EncoderDecoder, Layout

LAYOUT = Layout(pre_norm=True, layernorm_embedding=False, final_layer_norm=True,
                positions="fairseq", final_logits_bias=False)

LANGUAGE_CODES = ["af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs",
                  "cy", "da", "de", "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd",
                  "gl", "gu", "ha", "he", "hi", "hr", "ht", "hu", "hy", "id", "ig", "ilo", "is", "it",
                  "ja", "jv", "ka", "kk", "km", "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg",
                  "mk", "ml", "mn", "mr", "ms", "my", "ne", "nl", "no", "ns", "oc", "or", "pa", "pl",
                  "ps", "pt", "ro", "ru", "sd", "si", "sk", "sl", "so", "sq", "sr", "ss", "su", "sv",
                  "sw", "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi", "wo", "xh", "yi", "yo",
                  "zh", "zu"]
MADEUP_WORDS = 8


class M2M100Tokenizer:
    def __init__(self, folder):
        self.vocab = read_json(folder, "vocab.json")
        self.pieces = {i: piece for piece, i in self.vocab.items()}
        self.sp = load_sentencepiece(folder, "sentencepiece.bpe.model")
        self.languages = {"__%s__" % code: len(self.vocab) + i for i, code in enumerate(LANGUAGE_CODES)}
        self.special = {self.vocab[t] for t in ["<s>", "<pad>", "</s>", "<unk>"]} | set(self.languages.values())

    def language_id(self, code):
        return self.languages["__%s__" % code]

    def encode(self, text, language=None, target=False):
        pieces = self.sp.encode(text, out_type=str)
        unk = self.vocab["<unk>"]
        return [self.language_id(language)] + [self.vocab.get(p, unk) for p in pieces] + [self.vocab["</s>"]]

    def decode(self, ids):
        # ids past the vocabulary (the made-up words) read as "<unk>", which
        # SentencePiece decodes as its unknown surface " \u2047 "
        return self.sp.decode([self.pieces.get(i, "<unk>") for i in ids if i not in self.special])


def load(folder):
    config = read_json(folder, "config.json")
    model = EncoderDecoder(config, load_safetensors(os.path.join(folder, "model.safetensors")), LAYOUT)
    return Twin(folder, model, M2M100Tokenizer(folder))
