#!/usr/bin/python3
"""Writes tests/pretrained/added_tokens.h: the input_ids transformers'
slow tokenizers give texts that spell their special and added tokens, for
the fixture folders tests/t5, tests/marian, tests/bart, tests/mbart,
tests/m2m100 and tests/m2m100/nllb. Run once (python3-sentencepiece; the
twins import torch):

    /usr/bin/python3 tests/pretrained/make_added_tokens.py

Written from huggingface/transformers (read, not copied), v4.34 and later:
  tokenization_utils.py  Trie.split (the leftmost match, extended to the
      longest one there), PreTrainedTokenizer.tokenize (each added token's
      AddedToken rstrip takes the whitespace after it from the text on its
      right, lstrip the whitespace before it; empty stretches dropped; the
      rest through _tokenize)
  the tokenizers' __init__: T5Tokenizer's </s>, <unk>, <pad> and
      <extra_id_N> (lstrip and rstrip); MarianTokenizer's </s>, <unk>,
      <pad>; BartTokenizer's <s>, </s>, <unk>, <pad> and <mask> (lstrip);
      MBart50Tokenizer's and NllbTokenizer's specials, language codes and
      <mask> (lstrip); M2M100Tokenizer's specials and __xx__ codes.
Each stretch between them is encoded by the twin's tokenizer
(tests/pretrained/twins), then the family's ids go around the whole.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "twins"))

import bart  # noqa: E402
import m2m100  # noqa: E402
import marian  # noqa: E402
import mbart  # noqa: E402
import t5  # noqa: E402
from byte_bpe import apply_merges, pretokenize, to_symbols  # noqa: E402


class Trie:
    """transformers' Trie: split() cuts text at the added tokens."""

    def __init__(self, words):
        self.data = {}
        for word in words:
            node = self.data
            for c in word:
                node = node.setdefault(c, {})
            node[""] = 1

    def split(self, text):
        states, offsets, skip = {}, [0], 0
        for current, char in enumerate(text):
            if skip and current < skip:
                continue
            to_remove, reset = set(), False
            for start, node in states.items():
                if "" in node:
                    end = current
                    for lookstart, looknode in states.items():
                        if lookstart > start:
                            break
                        index = current + 1 if lookstart < start else current
                        end = index if lookstart < start else end
                        following = text[index] if index < len(text) else None
                        if "" in looknode:
                            start, end, skip = lookstart, index, index
                        while following in looknode:
                            looknode = looknode[following]
                            index += 1
                            if "" in looknode:
                                start, end, skip = lookstart, index, index
                            if index == len(text):
                                break
                            following = text[index]
                    offsets += [start, end]
                    reset = True
                    break
                if char in node:
                    states[start] = node[char]
                else:
                    to_remove.add(start)
            if reset:
                states = {}
            else:
                for start in to_remove:
                    del states[start]
            if current >= skip and char in self.data:
                states[current] = self.data[char]
        for start, node in states.items():
            if "" in node:
                offsets += [start, len(text)]
                break
        offsets.append(len(text))
        pieces, start = [], 0
        for end in offsets:
            if start < end:
                pieces.append(text[start:end])
                start = end
        return pieces


def tokenize(text, added, encode):
    """PreTrainedTokenizer.tokenize: added maps each added token to its
    (id, lstrip, rstrip); encode is the tokenizer's _tokenize, to ids."""
    tokens = Trie(added).split(text)
    for i, token in enumerate(tokens):
        if token in added:
            _, lstrip, rstrip = added[token]
            left = tokens[i - 1] if i > 0 else None
            right = tokens[i + 1] if i < len(tokens) - 1 else None
            if rstrip and right:
                tokens[i + 1] = right.lstrip()
            if lstrip and left:
                tokens[i - 1] = left.rstrip()
    ids = []
    for token in tokens:
        if not token:
            continue
        ids += [added[token][0]] if token in added else encode(token)
    return ids


def folder(name):
    return os.path.join(TESTS, name)


def specials(ids, names, mask=None):
    added = {name: (ids(name), False, False) for name in names}
    if mask:
        added[mask] = (ids(mask), True, False)
    return added


def t5_family():
    tok = t5.T5Tokenizer(folder("t5"))
    added = specials(tok.token_id, ["</s>", "<unk>", "<pad>"])
    added.update({"<extra_id_%d>" % i: (tok.token_id("<extra_id_%d>" % i), True, True)
                  for i in range(tok.extra_ids)})
    encode = lambda s: [tok.token_id(p) for p in tok.sp.encode(s, out_type=str)]  # noqa: E731
    return added, encode, [], [tok.sp.eos_id()]


def marian_family():
    tok = marian.MarianTokenizer(folder("marian"))
    added = specials(tok.vocab.__getitem__, ["</s>", "<unk>", "<pad>"])
    encode = lambda s: [tok.vocab.get(p, tok.unk) for p in tok.source.encode(s, out_type=str)]  # noqa: E731
    return added, encode, [], [tok.eos]


def bart_family():
    tok = bart.BartTokenizer(folder("bart"))
    added = specials(tok.vocab.__getitem__, ["<s>", "</s>", "<unk>", "<pad>"], "<mask>")
    encode = lambda s: [tok.vocab.get(piece, tok.vocab["<unk>"])  # noqa: E731
                        for word in pretokenize(s)
                        for piece in apply_merges(to_symbols(word, tok.byte_encoder), tok.ranks)]
    return added, encode, [tok.vocab["<s>"]], [tok.vocab["</s>"]]


def fairseq_family(path, codes, source):
    tok = mbart.FairseqSentencePiece(folder(path), codes)
    added = specials(tok.ids.__getitem__, ["<s>", "</s>", "<unk>", "<pad>"] + codes, "<mask>")
    encode = lambda s: [tok.token_id(p) for p in tok.sp.encode(s, out_type=str)]  # noqa: E731
    return added, encode, [tok.ids[source]], [tok.ids["</s>"]]


def m2m100_family():
    tok = m2m100.M2M100Tokenizer(folder("m2m100"))
    added = specials(lambda t: tok.languages.get(t, tok.vocab.get(t)),
                     ["<s>", "</s>", "<unk>", "<pad>"] + list(tok.languages))
    unk = tok.vocab["<unk>"]
    encode = lambda s: [tok.vocab.get(p, unk) for p in tok.sp.encode(s, out_type=str)]  # noqa: E731
    return added, encode, [tok.language_id("en")], [tok.vocab["</s>"]]


CASES = [
    ("t5", t5_family, ["Translate <extra_id_0> this </s> now", "a<extra_id_1>b",
                       "<extra_id_10>x<extra_id_1>", "hello <pad><unk> world",
                       "  <extra_id_0>  ", "<extra_id_100> <extra_id_99>"]),
    ("marian", marian_family, ["Translate </s> this <unk> now", "a</s>b", "<pad>",
                               "file<unk>s </s></s>"]),
    ("bart", bart_family, ["Hello <mask> world", " <mask> x", "a<mask>b",
                           "Hello </s>world <s> x", "<pad><unk>", "no  <mask>  spaces"]),
    ("mbart", lambda: fairseq_family("mbart", mbart.LANGUAGE_CODES, "en_XX"),
     ["en_XX hello", "a <mask> b", "hello fr_XX</s>", " <mask>", "the en_XXfile"]),
    ("m2m100", m2m100_family, ["__en__ hello", "hello __fr__ x</s>", "<s>a", "__en__"]),
    ("m2m100/nllb", lambda: fairseq_family("m2m100/nllb", m2m100.NLLB_LANGUAGE_CODES,
                                           "eng_Latn"),
     ["eng_Latn hello", "x <mask> y", "fra_Latn</s>", "file <unk>"]),
]


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    lines = ["/* Made by tests/pretrained/make_added_tokens.py (which says how): the",
             " * input_ids transformers' tokenizer of each fixture folder gives texts that",
             " * spell its special and added tokens, the family's ids around them. */",
             "static const struct added_case {",
             "    const char *folder, *text;",
             "    int32_t count, ids[32];",
             "} added_cases[] = {"]
    for name, family, texts in CASES:
        added, encode, prefix, suffix = family()
        for text in texts:
            ids = prefix + tokenize(text, added, encode) + suffix
            assert len(ids) <= 32
            lines.append("    {%s, %s, %d, {%s}}," % (c_string(name), c_string(text), len(ids),
                                                    ", ".join(map(str, ids))))
    lines.append("};")
    with open(os.path.join(HERE, "added_tokens.h"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
