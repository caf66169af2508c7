"""A real catalog for tfm-translate --po, and its machine translation scored.

  catalog_check.py template MO OUT_DIR
      From an installed catalog (a .mo: Debian ships no .po) writes
      OUT_DIR/NAME.pot (the English messages, msgstr blank: the input) and
      OUT_DIR/NAME.reference.po (the human translation), with contexts and
      plural forms, and the c-format flag on each message with a printf
      directive, as xgettext marks a C program's messages (a .mo keeps no
      flags: without them msgfmt would check no format).
  catalog_check.py score TRANSLATED.po REFERENCE.po TFM_TRANSLATE
      chrF and BLEU (tfm-translate --score) of the machine translations in
      TRANSLATED.po (its fuzzy entries) against the human ones, each plural
      form against the same form, a message's lines joined by spaces.

Standard library only (and gettext's msgfmt for reading .po files).
"""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translation_data import read_mo  # noqa: E402

# a C printf directive, as xgettext's c-format check reads one (not "%%")
C_DIRECTIVE = re.compile(r"%(\d+\$)?[-+ #0']*(\*|\d+)?(\.(\*|\d+))?(hh|ll|[hlLqjzt])?"
                         r"[diouxXeEfFgGaAcspn]")


def quoted(text):
    return '"%s"' % (text.replace("\\", "\\\\").replace('"', '\\"')
                     .replace("\n", "\\n").replace("\t", "\\t"))


def entries_of(mo_path):
    """(context or None, msgid, msgid_plural or None, [msgstr forms]) of a .mo."""
    with open(mo_path, "rb") as f:
        pairs = read_mo(f.read())
    for key, value in pairs:
        context, _, ids = key.rpartition(b"\x04") if b"\x04" in key else (None, None, key)
        ids = ids.decode("utf-8").split("\0")
        yield (context.decode("utf-8") if context is not None else None, ids[0],
               ids[1] if len(ids) > 1 else None, value.decode("utf-8").split("\0"))


def write_po(path, header, entries, translated):
    with open(path, "w", encoding="utf-8") as out:
        out.write('%smsgid ""\nmsgstr %s\n' % ("" if translated else "#, fuzzy\n",
                                               quoted(header)))
        for context, msgid, plural, forms in entries:
            out.write("\n")
            if C_DIRECTIVE.search(msgid) or (plural and C_DIRECTIVE.search(plural)):
                out.write("#, c-format\n")
            if context is not None:
                out.write("msgctxt %s\n" % quoted(context))
            out.write("msgid %s\n" % quoted(msgid))
            if plural is None:
                out.write("msgstr %s\n" % quoted(forms[0] if translated else ""))
            else:
                out.write("msgid_plural %s\n" % quoted(plural))
                for i, form in enumerate(forms if translated else ["", ""]):
                    out.write("msgstr[%d] %s\n" % (i, quoted(form)))


def template(mo_path, out_dir):
    name = os.path.basename(mo_path)[:-3]
    entries = list(entries_of(mo_path))
    header = next(forms[0] for context, msgid, _, forms in entries
                  if context is None and msgid == "")
    entries = [e for e in entries if not (e[0] is None and e[1] == "")]
    project = re.search(r"Project-Id-Version: ([^\n]*)", header)
    template_header = ("Project-Id-Version: %s\nReport-Msgid-Bugs-To: \n"
                       "PO-Revision-Date: YEAR-MO-DA HO:MI+ZONE\n"
                       "Last-Translator: FULL NAME <EMAIL@ADDRESS>\n"
                       "Language-Team: LANGUAGE <LL@li.org>\nLanguage: \nMIME-Version: 1.0\n"
                       "Content-Type: text/plain; charset=CHARSET\n"
                       "Content-Transfer-Encoding: 8bit\n"
                       "Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"
                       % (project.group(1) if project else name))
    os.makedirs(out_dir, exist_ok=True)
    write_po(os.path.join(out_dir, name + ".pot"), template_header, entries, False)
    write_po(os.path.join(out_dir, name + ".reference.po"), header, entries, True)
    plurals = sum(e[2] is not None for e in entries)
    formats = sum(bool(C_DIRECTIVE.search(e[1])) for e in entries)
    print("%s: %d messages (%d with plural forms, %d c-format) -> %s/%s.pot, "
          "%s.reference.po" % (mo_path, len(entries), plurals, formats, out_dir, name, name))


def compiled(po_path, folder):
    mo_path = os.path.join(folder, os.path.basename(po_path) + ".mo")
    subprocess.run(["msgfmt", "--use-fuzzy", "-o", mo_path, po_path], check=True)
    return {key: value for key, value in read_mo(open(mo_path, "rb").read()) if key}


def score(translated_po, reference_po, tfm_translate):
    with tempfile.TemporaryDirectory() as folder:
        fuzzy = subprocess.run(["msgattrib", "--only-fuzzy", "--no-obsolete", "-o",
                                os.path.join(folder, "fuzzy.po"), translated_po], check=True)
        machine = compiled(os.path.join(folder, "fuzzy.po"), folder) if fuzzy else {}
        human = compiled(reference_po, folder)
        hypotheses, references = [], []
        for key, value in machine.items():
            if key not in human:
                continue
            for mine, theirs in zip(value.split(b"\0"), human[key].split(b"\0")):
                hypotheses.append(" ".join(mine.decode("utf-8").split()))
                references.append(" ".join(theirs.decode("utf-8").split()))
        for name, lines in (("hyp", hypotheses), ("ref", references)):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
        result = subprocess.run([tfm_translate, "--score", os.path.join(folder, "hyp"),
                                 "--reference", os.path.join(folder, "ref")],
                                check=True, capture_output=True, text=True).stdout.strip()
        print("%d machine-translated messages (%d forms) against the human translation: %s"
              % (len(machine), len(hypotheses), result))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "template":
        template(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
