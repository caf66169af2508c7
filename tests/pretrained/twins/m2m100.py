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
  src/transformers/models/nllb/tokenization_nllb.py        0467791c12f18a172757c6c907b2987a22ee8788
      NLLB folders (model_type m2m_100, tokenizer_class NllbTokenizer):
      mBART's fairseq-aligned ids with the 202 codes ("eng_Latn") and
      <mask> after the pieces (the published ids: eng_Latn 256047, <mask>
      256203); legacy_behaviour false: src_lang X </s>
"""
from common import Twin, load_sentencepiece, read_json
from mbart import FairseqSentencePiece
from seq2seq import Layout, load_model

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
# tokenization_nllb.py's FAIRSEQ_LANGUAGE_CODES
NLLB_LANGUAGE_CODES = ["ace_Arab", "ace_Latn", "acm_Arab", "acq_Arab", "aeb_Arab", "afr_Latn", "ajp_Arab",
                       "aka_Latn", "amh_Ethi", "apc_Arab", "arb_Arab", "ars_Arab", "ary_Arab", "arz_Arab",
                       "asm_Beng", "ast_Latn", "awa_Deva", "ayr_Latn", "azb_Arab", "azj_Latn", "bak_Cyrl",
                       "bam_Latn", "ban_Latn", "bel_Cyrl", "bem_Latn", "ben_Beng", "bho_Deva", "bjn_Arab",
                       "bjn_Latn", "bod_Tibt", "bos_Latn", "bug_Latn", "bul_Cyrl", "cat_Latn", "ceb_Latn",
                       "ces_Latn", "cjk_Latn", "ckb_Arab", "crh_Latn", "cym_Latn", "dan_Latn", "deu_Latn",
                       "dik_Latn", "dyu_Latn", "dzo_Tibt", "ell_Grek", "eng_Latn", "epo_Latn", "est_Latn",
                       "eus_Latn", "ewe_Latn", "fao_Latn", "pes_Arab", "fij_Latn", "fin_Latn", "fon_Latn",
                       "fra_Latn", "fur_Latn", "fuv_Latn", "gla_Latn", "gle_Latn", "glg_Latn", "grn_Latn",
                       "guj_Gujr", "hat_Latn", "hau_Latn", "heb_Hebr", "hin_Deva", "hne_Deva", "hrv_Latn",
                       "hun_Latn", "hye_Armn", "ibo_Latn", "ilo_Latn", "ind_Latn", "isl_Latn", "ita_Latn",
                       "jav_Latn", "jpn_Jpan", "kab_Latn", "kac_Latn", "kam_Latn", "kan_Knda", "kas_Arab",
                       "kas_Deva", "kat_Geor", "knc_Arab", "knc_Latn", "kaz_Cyrl", "kbp_Latn", "kea_Latn",
                       "khm_Khmr", "kik_Latn", "kin_Latn", "kir_Cyrl", "kmb_Latn", "kon_Latn", "kor_Hang",
                       "kmr_Latn", "lao_Laoo", "lvs_Latn", "lij_Latn", "lim_Latn", "lin_Latn", "lit_Latn",
                       "lmo_Latn", "ltg_Latn", "ltz_Latn", "lua_Latn", "lug_Latn", "luo_Latn", "lus_Latn",
                       "mag_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "min_Latn", "mkd_Cyrl", "plt_Latn",
                       "mlt_Latn", "mni_Beng", "khk_Cyrl", "mos_Latn", "mri_Latn", "zsm_Latn", "mya_Mymr",
                       "nld_Latn", "nno_Latn", "nob_Latn", "npi_Deva", "nso_Latn", "nus_Latn", "nya_Latn",
                       "oci_Latn", "gaz_Latn", "ory_Orya", "pag_Latn", "pan_Guru", "pap_Latn", "pol_Latn",
                       "por_Latn", "prs_Arab", "pbt_Arab", "quy_Latn", "ron_Latn", "run_Latn", "rus_Cyrl",
                       "sag_Latn", "san_Deva", "sat_Beng", "scn_Latn", "shn_Mymr", "sin_Sinh", "slk_Latn",
                       "slv_Latn", "smo_Latn", "sna_Latn", "snd_Arab", "som_Latn", "sot_Latn", "spa_Latn",
                       "als_Latn", "srd_Latn", "srp_Cyrl", "ssw_Latn", "sun_Latn", "swe_Latn", "swh_Latn",
                       "szl_Latn", "tam_Taml", "tat_Cyrl", "tel_Telu", "tgk_Cyrl", "tgl_Latn", "tha_Thai",
                       "tir_Ethi", "taq_Latn", "taq_Tfng", "tpi_Latn", "tsn_Latn", "tso_Latn", "tuk_Latn",
                       "tum_Latn", "tur_Latn", "twi_Latn", "tzm_Tfng", "uig_Arab", "ukr_Cyrl", "umb_Latn",
                       "urd_Arab", "uzn_Latn", "vec_Latn", "vie_Latn", "war_Latn", "wol_Latn", "xho_Latn",
                       "ydd_Hebr", "yor_Latn", "yue_Hant", "zho_Hans", "zho_Hant", "zul_Latn"]


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
    model = load_model(folder, LAYOUT)
    if model.config.get("tokenizer_class") == "NllbTokenizer":
        return Twin(folder, model, FairseqSentencePiece(folder, NLLB_LANGUAGE_CODES))
    return Twin(folder, model, M2M100Tokenizer(folder))
