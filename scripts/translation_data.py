#!/usr/bin/env python3
"""English -> French pairs from the gettext catalogs of named Debian packages.

    python3 scripts/translation_data.py [OUT] [--no-install] [--seed N]
    python3 scripts/translation_data.py --domain compilers [OUT] [--replay N]

Installs PACKAGES with apt-get (as root; --no-install only checks that they
are installed), reads every share/locale/fr/LC_MESSAGES/*.mo that dpkg lists
for them (no other file, so what else a machine has installed changes
nothing), keeps the pairs the rules below accept, removes duplicates and
splits them by a seeded hash. OUT (default runs/translation/data) gets
train/validation/test .en and .fr files (one pair a line, aligned), a
README.md with the counts, rules and package versions, and LICENSES/ with
each package's copyright file. The same package versions give the same
files on every machine; the README records the versions and a SHA-256 of
the corpus to compare. Python's standard library only.

Rules, applied to each catalog entry:
- the header entry (empty msgid) and untranslated entries (empty msgstr)
  are skipped; a message context (msgctxt) is dropped; of a plural entry
  the singular pair is kept (msgid and msgstr[0]);
- text is decoded with the catalog's charset, leading and trailing
  whitespace removed; an entry that does not decode is counted and skipped;
- both sides must be one line (no line or paragraph separator, no control
  character: tabs included), 2 to 120 code points long;
- the English side must hold a letter outside its format directives
  (entries made only of directives and punctuation, "%s: %s", teach
  nothing);
- pairs whose French equals the English are kept: French keeps many words
  ("Message", "Options", proper names), and a model must learn to copy them;
- accelerator marks (GTK's "_File", "&File") are kept as written on both
  sides: a blind strip would also cut identifiers ("core_pattern") and
  the marks are consistent between the sides.
Duplicates are exact (English, French) pairs.

Split: sources are ordered by SHA-256(seed, English), pairs of one source
by SHA-256(seed, English, French); the first 1,000 pairs are the test set,
the next 500 the validation set, the rest training. Every translation of a
source lands in one set: when a set's last place falls inside a source's
translations, the rest of them is dropped rather than put in the next set,
so no test or validation source is seen in training.

--domain NAME makes a corpus of a domain the general one never saw, for
adapting a model trained on it (default OUT runs/domain/data): the
catalogs of DOMAINS[NAME]'s packages, none of them among PACKAGES, under
the same rules, split the same way into 1,000 test, 500 validation and at
most DOMAINS[NAME]'s "train" training pairs (a few thousand, as a user
adapting a model has; the rest is left out). A pair whose English is in
the general corpus's test set (made here from PACKAGES with the same
seed, so those must be installed too) is dropped first, so the general
test set stays unseen by an adapted model; the README counts the domain's
pairs whose English the general training set holds. --replay N adds the
first N pairs of the general training set (in its split's order) to the
domain's training files, so that fine-tuning rehearses what the model
knew (test and validation stay the domain's alone).
"""

import argparse
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import unicodedata

# Debian 12 packages with French catalogs, most of them on the project's
# machine image already (so installing them is quick): 60,242 pairs from
# the versions of November 2026.
PACKAGES = [
    "adduser", "appstream", "apt", "bash", "binutils-common", "coreutils",
    "diffutils", "dpkg", "findutils", "gettext", "git", "gnucobol3",
    "gnupg-l10n", "grep", "gsettings-desktop-schemas", "iso-codes",
    "libapt-pkg6.0", "libc-l10n", "libdpkg-perl", "libexif12",
    "libgdk-pixbuf2.0-common", "libglib2.0-data", "libgnutls30",
    "libgstreamer-plugins-base1.0-0", "libgstreamer1.0-0", "libgtk2.0-common",
    "libidn2-0", "libpam-runtime", "libpq5", "login", "m4", "make", "man-db",
    "net-tools", "packagekit", "postgresql-15", "postgresql-client-15",
    "procps", "psmisc", "sed", "shared-mime-info", "systemd", "tar", "wget",
    "xkb-data", "xz-utils",
]
# Domains outside PACKAGES: their packages and their training pairs at most.
DOMAINS = {
    # compilers and parser generators: GCC's diagnostics and options, cpplib,
    # bison, flex, gawk (15,792 pairs in November 2026)
    "compilers": {"packages": ["gcc-12-locales", "bison", "flex", "gawk"], "train": 5000},
}
CATALOG = re.compile(r"/share/locale/fr/LC_MESSAGES/[^/]+\.mo$")
# printf's conversions ("%s", "%-10.3lf", "%2$s", "%%") and Python's "%(name)s"
FORMAT_DIRECTIVE = re.compile(r"%(\d+\$)?[-+ #0']*(\*|\d+)?(\.(\*|\d+))?(hh|ll|[hlLqjzt])?"
                              r"[a-zA-Z%]|%\([^)]*\)[a-zA-Z]")
TEST_SIZE, VALIDATION_SIZE = 1000, 500
MIN_CHARS, MAX_CHARS = 2, 120


def read_mo(data):
    """(msgid, msgstr) byte strings of a GNU .mo file, in file order."""
    if len(data) < 20:
        raise ValueError("shorter than a .mo header")
    magic = struct.unpack("<I", data[:4])[0]
    order = {0x950412DE: "<", 0xDE120495: ">"}.get(magic)
    if order is None:
        raise ValueError("not a .mo file (magic %#x)" % magic)
    _, count, ids_at, strs_at = struct.unpack(order + "4I", data[4:20])

    def string(table, i):
        length, offset = struct.unpack(order + "2I", data[table + 8 * i:table + 8 * i + 8])
        if offset + length > len(data):
            raise ValueError("string %d runs past the end" % i)
        return data[offset:offset + length]

    return [(string(ids_at, i), string(strs_at, i)) for i in range(count)]


def charset(entries):
    for msgid, msgstr in entries:
        if msgid == b"":
            found = re.search(rb"charset=([-\w.]+)", msgstr)
            if found and found.group(1).lower() != b"charset":
                return found.group(1).decode("ascii")
    return "utf-8"


def one_line_text(text):
    """Neither a line break nor any other control character (tabs included)."""
    return not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text)


def accepted(english, french):
    return (all(MIN_CHARS <= len(s) <= MAX_CHARS and one_line_text(s)
                for s in (english, french))
            and any(unicodedata.category(c).startswith("L")
                    for c in FORMAT_DIRECTIVE.sub("", english)))


def catalog_pairs(path, counts):
    """The accepted pairs of one catalog; counts gathers what was skipped."""
    with open(path, "rb") as f:
        entries = read_mo(f.read())
    encoding = charset(entries)
    pairs = []
    for msgid, msgstr in entries:
        if msgid == b"":
            continue
        counts["entries"] += 1
        msgid = msgid.split(b"\x04", 1)[-1].split(b"\0", 1)[0]
        msgstr = msgstr.split(b"\0", 1)[0]
        if not msgstr:
            counts["untranslated"] += 1
            continue
        try:
            english, french = msgid.decode(encoding).strip(), msgstr.decode(encoding).strip()
        except (UnicodeDecodeError, LookupError):
            counts["undecodable"] += 1
            continue
        if accepted(english, french):
            pairs.append((english, french))
        else:
            counts["filtered"] += 1
    return pairs


def run(args):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def install(packages):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends"] + packages
    if subprocess.run(command, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        # a machine that never read the package lists finds nothing
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)


def versions(packages):
    out = run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n"]
              + packages)
    found = {}
    for line in out.splitlines():
        name, version, status = line.split("\t")
        if status.startswith("ii"):
            found[name] = version
    missing = [p for p in packages if p not in found]
    if missing:
        sys.exit("not installed: %s (run as root without --no-install)" % " ".join(missing))
    return found


def catalogs(package):
    return sorted(p for p in run(["dpkg", "-L", package]).splitlines()
                  if CATALOG.search(p) and os.path.isfile(p))


def licences(package):
    """The DEP-5 License: names of a package's copyright file, or '?'."""
    path = "/usr/share/doc/%s/copyright" % package
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            names = re.findall(r"^License:[ \t]*(\S.*?)\s*$", f.read(), re.M)
    except OSError:
        return "?"
    return ", ".join(sorted(set(names))) or "see the copyright file"


def digest(*parts):
    return hashlib.sha256("\0".join(parts).encode("utf-8")).digest()


def split(pairs, seed, sizes=(TEST_SIZE, VALIDATION_SIZE)):
    """test, validation, train (whole sources, in seeded hash order) and the
    number of pairs dropped at the sets' boundaries; with a third size, the
    training set is cut there and what follows is left out."""
    ordered = sorted(pairs, key=lambda p: (digest(seed, p[0]), digest(seed, p[0], p[1])))
    sets, start, dropped = [], 0, 0
    for size in sizes:
        end = min(start + size, len(ordered))
        sets.append(ordered[start:end])
        # the rest of the last source's translations stays out of later sets
        while end < len(ordered) and end > start and ordered[end][0] == ordered[end - 1][0]:
            end += 1
            dropped += 1
        start = end
    if len(sizes) == 2:
        sets.append(ordered[start:])
    return sets, dropped


def gather(packages, counts):
    """The unique accepted pairs of the packages' French catalogs, and each
    package's (catalogs, pairs)."""
    pairs, per_package = set(), {}
    for package in packages:
        files = catalogs(package)
        if not files:
            sys.exit("%s has no French catalog under share/locale (is /usr/share/locale "
                     "excluded by dpkg's path-exclude?)" % package)
        mine = set()
        for path in files:
            mine.update(catalog_pairs(path, counts))
        per_package[package] = (len(files), len(mine))
        pairs |= mine
    return pairs, per_package


def new_counts():
    return {"entries": 0, "untranslated": 0, "undecodable": 0, "filtered": 0}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?",
                        help="default runs/translation/data, or runs/domain/data with --domain")
    parser.add_argument("--no-install", action="store_true",
                        help="only check that the packages are installed")
    parser.add_argument("--seed", default="1", help="the split's seed (a string)")
    parser.add_argument("--domain", choices=sorted(DOMAINS),
                        help="a domain's corpus, outside the general one's packages")
    parser.add_argument("--replay", type=int, default=0, metavar="N",
                        help="--domain: add N general training pairs to its training set")
    args = parser.parse_args()
    if args.replay and not args.domain:
        parser.error("--replay goes with --domain")
    domain = DOMAINS[args.domain] if args.domain else None
    packages = domain["packages"] if domain else PACKAGES
    args.out = args.out or ("runs/domain/data" if domain else "runs/translation/data")

    if not args.no_install:
        install(packages + (PACKAGES if domain else []))
    found = versions(packages)
    counts = new_counts()
    pairs, per_package = gather(packages, counts)
    notes = []
    if domain:
        versions(PACKAGES)
        (general_test, _, general_train), _ = split(gather(PACKAGES, new_counts())[0], args.seed)
        general_test = {english for english, _ in general_test}
        seen = {english for english, _ in general_train}
        held_out = {p for p in pairs if p[0] in general_test}
        pairs -= held_out
        sets, dropped = split(pairs, args.seed,
                              (TEST_SIZE, VALIDATION_SIZE, domain["train"]))
        sets = sets[:3] + [general_train[:args.replay]]
        notes = ["- domain `%s`; pairs whose English is in the general corpus's test set, "
                 "dropped: %d" % (args.domain, len(held_out)),
                 "- English also in the general training set (seed %s): test %d, "
                 "validation %d, train %d; exact pairs there too: test %d, validation %d, "
                 "train %d" % ((args.seed,)
                               + tuple(sum(p[0] in seen for p in s) for s in sets[:3])
                               + tuple(len(set(s) & set(general_train)) for s in sets[:3])),
                 "- training pairs kept at most: %d (the rest, %d, left out)"
                 % (domain["train"], len(pairs) - sum(len(s) for s in sets[:3])),
                 "- general training pairs added to the training files (--replay): %d"
                 % len(sets[3])]
    else:
        sets, dropped = split(pairs, args.seed)

    os.makedirs(os.path.join(args.out, "LICENSES"), exist_ok=True)
    corpus = hashlib.sha256()
    if domain:  # the replayed general pairs after the domain's own
        sets = sets[:2] + [sets[2] + sets[3]]
    for name, chosen in zip(("test", "validation", "train"), sets):
        for side in (0, 1):
            path = os.path.join(args.out, "%s.%s" % (name, ("en", "fr")[side]))
            text = "".join(pair[side] + "\n" for pair in chosen).encode("utf-8")
            corpus.update(text)
            with open(path, "wb") as f:
                f.write(text)
    for package in packages:
        shutil.copyfile("/usr/share/doc/%s/copyright" % package,
                        os.path.join(args.out, "LICENSES", package + ".copyright"))

    sizes = "train %d, validation %d, test %d" % tuple(len(s) for s in sets[::-1])
    lines = ["# English -> French pairs from Debian's gettext catalogs", "",
             "Made by `scripts/translation_data.py`%s (seed %s); its docstring gives the "
             "rules." % (" --domain " + args.domain if domain else "", args.seed), "",
             "- catalog entries read: %d; untranslated %d, undecodable %d, filtered out %d"
             % (counts["entries"], counts["untranslated"], counts["undecodable"],
                counts["filtered"]),
             "- unique pairs: %d; %s; %d dropped at the sets' boundaries"
             % (len(pairs), sizes, dropped)] + notes + [
             "- SHA-256 of the six files (test, validation, train; en then fr): "
             + corpus.hexdigest(), "",
             "Each package's copyright file is in LICENSES/PACKAGE.copyright; the "
             "translations are its translators' work under the package's licence.", "",
             "| package | version | catalogs | pairs | licences |",
             "| --- | --- | --- | --- | --- |"]
    lines += ["| %s | %s | %d | %d | %s |" % (p, found[p], per_package[p][0],
                                              per_package[p][1], licences(p))
              for p in packages]
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("%d packages, %d catalog entries, %d unique pairs: %s (%d dropped at "
          "boundaries)" % (len(packages), counts["entries"], len(pairs), sizes, dropped))
    print("corpus sha256 %s, written to %s" % (corpus.hexdigest(), args.out))

if __name__ == "__main__":
    main()
