"""Twin of an mBART-50 folder: MBartForConditionalGeneration and
MBart50Tokenizer.

Written from huggingface/transformers (read, not copied):
  src/transformers/models/mbart/modeling_mbart.py          00b676f8f0489b88652a31d70751cc540dd06305
      MBartEncoderLayer/MBartDecoderLayer normalise before each sublayer;
      layernorm_embedding and a final layer_norm per stack; learned
      positions, offset 2; embeddings times sqrt(d_model); final_logits_bias
  src/transformers/models/mbart50/tokenization_mbart50.py  0246c77f9ec0ec1d9d0b56dcc21f555d9ce7a4d3
      sentencepiece.bpe.model ids shifted by the fairseq offset 1
      (<s> 0, <pad> 1, </s> 2, <unk> 3), the 52 language codes after the
      pieces, <mask> last; [lang_code] X </s>
"""
from common import Twin, load_sentencepiece
from seq2seq import Layout, load_model

LAYOUT = Layout(pre_norm=True, layernorm_embedding=True, final_layer_norm=True,
                positions="learned", final_logits_bias=True)

LANGUAGE_CODES = ["ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN",
                  "hi_IN", "it_IT", "ja_XX", "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP",
                  "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN", "zh_CN", "af_ZA", "az_AZ",
                  "bn_IN", "fa_IR", "he_IL", "hr_HR", "id_ID", "ka_GE", "km_KH", "mk_MK", "ml_IN",
                  "mn_MN", "mr_IN", "pl_PL", "ps_AF", "pt_XX", "sv_SE", "sw_KE", "ta_IN", "te_IN",
                  "th_TH", "tl_XX", "uk_UA", "ur_PK", "xh_ZA", "gl_ES", "sl_SI"]
FAIRSEQ_SPECIAL = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
FAIRSEQ_OFFSET = 1


class FairseqSentencePiece:
    """The fairseq-aligned ids mBART and NLLB give a SentencePiece model's
    pieces: specials first, piece id + 1 (spm's <unk>, id 0, is <unk> 3),
    then language codes, then <mask>."""

    def __init__(self, folder, codes):
        self.sp = load_sentencepiece(folder, "sentencepiece.bpe.model")
        size = self.sp.get_piece_size()
        self.ids = dict(FAIRSEQ_SPECIAL)
        self.ids.update({code: size + i + FAIRSEQ_OFFSET for i, code in enumerate(codes)})
        self.ids["<mask>"] = size + len(codes) + FAIRSEQ_OFFSET
        self.tokens = {i: token for token, i in self.ids.items()}

    def token_id(self, piece):
        if piece in self.ids:
            return self.ids[piece]
        spm_id = self.sp.piece_to_id(piece)
        return spm_id + FAIRSEQ_OFFSET if spm_id else self.ids["<unk>"]

    def encode(self, text, language=None, target=False):
        pieces = self.sp.encode(text, out_type=str)
        return [self.ids[language]] + [self.token_id(p) for p in pieces] + [self.ids["</s>"]]

    def decode(self, ids):
        pieces = [self.sp.id_to_piece(i - FAIRSEQ_OFFSET) for i in ids if i not in self.tokens]
        return self.sp.decode_pieces(pieces).strip()


def load(folder):
    return Twin(folder, load_model(folder, LAYOUT), FairseqSentencePiece(folder, LANGUAGE_CODES))
