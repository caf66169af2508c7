"""GPT-2's byte-level BPE (its encoder.py: the byte-to-unicode map, the
pre-tokenising regex, rank-ordered merges), as the tokenizer fixtures'
script already writes it: tests/fixtures/text/make_fixtures.py is loaded
from its path, so there is one copy of it."""
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "text",
                     "make_fixtures.py")
_spec = importlib.util.spec_from_file_location("text_fixtures", _PATH)
text_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(text_fixtures)

bytes_to_unicode = text_fixtures.bytes_to_unicode
pretokenize = text_fixtures.pretokenize
to_symbols = text_fixtures.to_symbols
apply_merges = text_fixtures.gpt2_bpe
train_merges = text_fixtures.train_byte_bpe
