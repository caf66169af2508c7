"""scripts/translation_data.py's parts on catalogs written here: the .mo
reader (both byte orders, contexts, plurals, charsets, corrupt files), the
filters, the split (sizes, whole sources, seeds, input order, a capped
training set) and the domains (outside the general packages).

  test_translation_data.py SCRIPT"""
import importlib.util
import os
import struct
import sys
import tempfile
import unittest

spec = importlib.util.spec_from_file_location("translation_data", sys.argv.pop(1))
data = importlib.util.module_from_spec(spec)
spec.loader.exec_module(data)


def mo_bytes(entries, order="<"):
    """A GNU .mo file of (msgid, msgstr) byte strings, ids sorted as msgfmt does."""
    entries = sorted(entries)
    count, ids_at = len(entries), 28
    strs_at = ids_at + 8 * count
    text_at = strs_at + 8 * count
    tables, text = [b"", b""], b""
    for column in (0, 1):
        for entry in entries:
            tables[column] += struct.pack(order + "2I", len(entry[column]), text_at + len(text))
            text += entry[column] + b"\0"
    header = struct.pack(order + "7I", 0x950412DE, 0, count, ids_at, strs_at, 0, 0)
    return header + tables[0] + tables[1] + text


HEADER = (b"", b"Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=2;\n")


class Catalogs(unittest.TestCase):
    def pairs_of(self, entries, order="<", header=HEADER):
        counts = dict.fromkeys(("entries", "untranslated", "undecodable", "filtered"), 0)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "x.mo")
            with open(path, "wb") as f:
                f.write(mo_bytes([header] + entries, order))
            return data.catalog_pairs(path, counts), counts

    def test_entries_of_both_byte_orders(self):
        entries = [
            ("Open file".encode(), "Ouvrir le fichier".encode()),
            (b"menu\x04Quit", b"Quitter"),                       # context dropped
            (b"%d file\0%d files", b"%d fichier\0%d fichiers"),  # the singular pair
            (b"Untranslated", b""),
            ("  Created  ".encode(), "  Créé  ".encode()),       # stripped
        ]
        for order in "<>":
            pairs, counts = self.pairs_of(entries, order)
            self.assertEqual(sorted(pairs), sorted([
                ("Open file", "Ouvrir le fichier"), ("Quit", "Quitter"),
                ("%d file", "%d fichier"), ("Created", "Créé")]))
            self.assertEqual(counts, {"entries": 5, "untranslated": 1, "undecodable": 0,
                                      "filtered": 0})

    def test_the_catalog_charset(self):
        header = (b"", b"Content-Type: text/plain; charset=ISO-8859-1\n")
        pairs, _ = self.pairs_of([(b"Created", "Créé".encode("latin-1"))], header=header)
        self.assertEqual(pairs, [("Created", "Créé")])
        pairs, counts = self.pairs_of([(b"Created", b"Cr\xe9\xe9")])  # not UTF-8
        self.assertEqual((pairs, counts["undecodable"]), ([], 1))

    def test_filters(self):
        rejected = [(b"two\nlines", b"deux\nlignes"), (b"a\ttab", b"une\ttab"),
                    (b"x" * 121, b"y" * 10), (b"short", b"y"), (b"%s: %s", b"%s : %s"), (b"%2$-10.3lf%%", b"x"), (b"%(name)s.", b"x"),
                    (b"   ", b"x  "), ("para\u2029graph".encode(), b"paragraphe")]
        kept = [(b"ok", b"oui"), (b"x" * 120, b"y" * 120), (b"Options", b"Options"), (b"%s files", b"%s fichiers")]
        pairs, counts = self.pairs_of(rejected + kept)
        self.assertEqual(sorted(pairs), sorted((e.decode(), f.decode()) for e, f in kept))
        self.assertEqual(counts["filtered"], len(rejected))

    def test_corrupt_files_are_refused(self):
        good = mo_bytes([HEADER, (b"a", b"b")])
        for bad in (good[:12], b"\0" * 4 + good[4:], good[:-4]):
            with self.assertRaises(ValueError):
                data.read_mo(bad)


class Split(unittest.TestCase):
    # 100 sources, one of them with five translations
    pairs = {("source %d" % i, "cible %d" % i) for i in range(100)} | \
            {("many", "plusieurs %d" % i) for i in range(5)}

    def test_sizes_and_whole_sources(self):
        for sizes in ((10, 5), (30, 30), (1, 1), (0, 7)):
            (test, validation, train), dropped = data.split(self.pairs, "1", sizes)
            self.assertEqual((len(test), len(validation)), sizes)
            self.assertEqual(len(test) + len(validation) + len(train) + dropped, 105)
            sources = [{e for e, _ in part} for part in (test, validation, train)]
            self.assertFalse(sources[0] & sources[1] or sources[0] & sources[2] or
                             sources[1] & sources[2])

    def test_a_source_cut_at_a_boundary_is_dropped_after_it(self):
        ordered, _ = data.split(self.pairs, "1", (0, 0))
        train = ordered[2]
        at = [e for e, _ in train].index("many")
        (test, _, rest), dropped = data.split(self.pairs, "1", (at + 2, 5))
        self.assertEqual(dropped, 3)
        self.assertEqual(sum(e == "many" for e, _ in test), 2)
        self.assertNotIn("many", [e for e, _ in rest])

    def test_seeded_and_independent_of_input_order(self):
        first = data.split(sorted(self.pairs), "1", (10, 5))
        self.assertEqual(first, data.split(sorted(self.pairs, reverse=True), "1", (10, 5)))
        self.assertNotEqual(first, data.split(self.pairs, "2", (10, 5)))

    def test_a_third_size_caps_the_training_set(self):
        (test, validation, train), dropped = data.split(self.pairs, "1", (10, 5, 20))
        self.assertEqual((len(test), len(validation), len(train)), (10, 5, 20))
        full, _ = data.split(self.pairs, "1", (10, 5))
        self.assertEqual(train, full[2][:20])  # the first of the same order


class Domains(unittest.TestCase):
    def test_outside_the_general_packages(self):
        for name, domain in data.DOMAINS.items():
            self.assertFalse(set(domain["packages"]) & set(data.PACKAGES), name)
            self.assertGreater(domain["train"], 0)


if __name__ == "__main__":
    # the closing line scripts/test.sh counts
    result = unittest.main(exit=False).result
    failed = len(result.failures) + len(result.errors)
    print("%d passed, %d failed" % (result.testsRun - failed, failed))
    sys.exit(1 if failed else 0)
