#!/usr/bin/env python3
"""The French test set's format check: what a localizer's build would say.

    python3 scripts/format_check.py [--model runs/translation/model.safetensors]
        [--data runs/translation/data] [--tool build/examples/tfm-translate]
        [--out runs/format_check] [--runs greedy,beam] [--precisions float32,int8]

For each decoding (greedy, beam: the model's own beam), precision (float32,
int8) and way (placeholders kept, and --no-placeholders), translates
test.en with tfm-translate, writes a .po of (English, translation) with the
c-format flag where xgettext would set it (the msgid holds a printf
directive), runs `msgfmt --check-format` on it and counts the messages it
refuses, and scores chrF against test.fr (tfm-translate --score). The human
references get the same check. Prints a Markdown table; writes the .po
files, the translations and the table under --out (atomically). Needs
gettext's msgfmt. Python's standard library only.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# gettext's c-format directive (format-c-parse.h): an optional argument
# number, flags, width, precision, size, conversion; "%%" is no directive.
DIRECTIVE = re.compile(
    r"%(?:[1-9][0-9]*\$)?[-+ #0'I]*(?:\*(?:[1-9][0-9]*\$)?|[0-9]+)?"
    r"(?:\.(?:\*(?:[1-9][0-9]*\$)?|[0-9]+)?)?(?:hh|ll|[hlLqjzZt])?[diouxXeEfFgGaAcCsSpn]")


def c_format(msgid):
    """Whether xgettext marks msgid c-format: it holds a directive."""
    return DIRECTIVE.search(msgid.replace("%%", "")) is not None


def po_string(text):
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\t", "\\t").replace("\r", "\\r"))
    return '"' + escaped + '"'


def write_atomic(path, text):
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_po(path, sources, translations):
    """A catalog of the pairs; each entry's msgctxt is its line number, so
    that repeated English lines stay distinct entries. Returns the line
    number of each entry's msgid line, for msgfmt's messages."""
    lines = ['msgid ""', 'msgstr ""', '"Content-Type: text/plain; charset=UTF-8\\n"',
             '"Language: fr\\n"', '"Plural-Forms: nplurals=2; plural=(n > 1);\\n"', ""]
    starts = []
    for i, (src, hyp) in enumerate(zip(sources, translations)):
        starts.append(len(lines) + 1)
        if c_format(src):
            lines.append("#, c-format")
        lines += ["msgctxt " + po_string("line %d" % (i + 1)), "msgid " + po_string(src),
                  "msgstr " + po_string(hyp), ""]
    write_atomic(path, "\n".join(lines))
    return starts


def check(path, starts):
    """The entries msgfmt --check-format refuses (their indices)."""
    run = subprocess.run(["msgfmt", "--check-format", "-o", os.devnull, path],
                         capture_output=True, text=True)
    failing = set()
    for line in run.stderr.splitlines():
        m = re.match(re.escape(path) + r":(\d+):", line)
        if not m:
            continue
        at = int(m.group(1))
        entry = max((i for i, s in enumerate(starts) if s <= at), default=None)
        if entry is not None:
            failing.add(entry)
    if run.returncode != 0 and not failing:
        sys.exit("msgfmt failed without naming an entry:\n" + run.stderr)
    return failing


def chrf(tool, hypotheses, reference):
    out = subprocess.run([tool, "--score", hypotheses, "--reference", reference],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"chrF ([0-9.]+)", out).group(1))


def translate(tool, model, source, beam, int8, placeholders):
    cmd = [tool, "--model", model, "--batch", "64"]
    if beam is not None:
        cmd += ["--beam", str(beam)]
    if int8:
        cmd.append("--int8")
    if not placeholders:
        cmd.append("--no-placeholders")
    with open(source, "rb") as f:
        run = subprocess.run(cmd, stdin=f, capture_output=True, check=True)
    return run.stdout.decode("utf-8").split("\n")[:-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="runs/translation/model.safetensors")
    p.add_argument("--data", default="runs/translation/data")
    p.add_argument("--tool", default="build/examples/tfm-translate")
    p.add_argument("--out", default="runs/format_check")
    p.add_argument("--runs", default="greedy,beam")
    p.add_argument("--precisions", default="float32,int8")
    a = p.parse_args()
    with open(os.path.join(a.data, "test.en"), encoding="utf-8") as f:
        sources = f.read().split("\n")[:-1]
    reference = os.path.join(a.data, "test.fr")
    with open(reference, encoding="utf-8") as f:
        references = f.read().split("\n")[:-1]
    formats = sum(c_format(s) for s in sources)
    rows = ["| decoding | precision | placeholders | failing msgfmt --check-format "
            "(of %d c-format) | chrF |" % formats, "|---|---|---|---|---|"]
    po = os.path.join(a.out, "reference.po")
    failing = check(po, write_po(po, sources, references))
    rows.append("| human reference | — | — | %d | 100 |" % len(failing))
    for run in a.runs.split(","):
        for precision in a.precisions.split(","):
            for kept in (0, 1):
                name = "%s-%s-%s" % (run, precision, "kept" if kept else "plain")
                hyp = translate(a.tool, a.model, os.path.join(a.data, "test.en"),
                                1 if run == "greedy" else None, precision == "int8", kept)
                if len(hyp) != len(sources):
                    sys.exit("%s: %d translations of %d lines" % (name, len(hyp), len(sources)))
                hyp_path = os.path.join(a.out, name + ".fr")
                write_atomic(hyp_path, "\n".join(hyp) + "\n")
                po = os.path.join(a.out, name + ".po")
                failing = check(po, write_po(po, sources, hyp))
                score = chrf(a.tool, hyp_path, reference)
                rows.append("| %s | %s | %s | %d | %.2f |" % (
                    run, precision, "kept" if kept else "off (--no-placeholders)",
                    len(failing), score))
                print(rows[-1], flush=True)
    table = "\n".join(rows) + "\n"
    write_atomic(os.path.join(a.out, "table.md"), table)
    print(table)


if __name__ == "__main__":
    main()
