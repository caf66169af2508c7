"""Compares a catalog tfm-translate --po wrote with the one it read.

  check_po.py IN OUT LANGUAGE PLURAL_FORMS [--all]

Every entry is where it was with its context, msgids, references,
extracted comments, previous msgids and obsolete mark; each one it was
to translate (the untranslated ones; with --all every one) is either
machine-translated (flags as before plus fuzzy, each of the Plural-Forms'
msgstr[i] filled, those past the first alike: msgid_plural's) or left as
it was (an untranslated one with the tool's comment saying why); any
other is unchanged. The header keeps every field but Language,
Plural-Forms, Content-Type and PO-Revision-Date, which say
the language. Prints "N translated, M left" and exits 1 at the first
difference.
"""

import re
import sys

NOTE = "tfm-translate: no machine translation: "
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r", "a": "\a", "b": "\b",
           "f": "\f", "v": "\v"}


def unquote(text):
    return re.sub(r"\\(.)", lambda m: ESCAPES[m.group(1)], text.strip()[1:-1])


def parse(path):
    entries, entry, field = [], None, None

    def start():
        return {"obsolete": False, "comments": [], "extracted": [], "references": [],
                "flags": set(), "previous": [], "msgctxt": None, "msgid": None,
                "msgid_plural": None, "msgstr": {}}

    for raw in open(path, encoding="utf-8").read().split("\n") + [""]:
        line = raw
        if not line.strip():
            if entry and entry["msgid"] is not None:
                entries.append(entry)
            entry, field = None, None
            continue
        entry = entry or start()
        if line.startswith("#~"):
            entry["obsolete"] = True
            line = line[2:].lstrip()
            if line.startswith("|"):
                entry["previous"].append(line)
                continue
        if line.startswith("#."):
            entry["extracted"].append(line[2:].strip())
        elif line.startswith("#:"):
            entry["references"] += line[2:].split()
        elif line.startswith("#,"):
            entry["flags"] |= {f.strip() for f in line[2:].split(",")}
        elif line.startswith("#|"):
            entry["previous"].append(line)
        elif line.startswith("#"):
            entry["comments"].append(line[2:] if line.startswith("# ") else line[1:])
        elif line.startswith('"'):
            if isinstance(field, tuple):
                entry["msgstr"][field[1]] += unquote(line)
            else:
                entry[field] += unquote(line)
        else:
            keyword, _, value = line.partition(" ")
            plural_form = re.fullmatch(r"msgstr\[(\d+)\]", keyword)
            if plural_form:
                field = ("msgstr", int(plural_form.group(1)))
                entry["msgstr"][field[1]] = unquote(value)
            elif keyword == "msgstr":
                field = ("msgstr", 0)
                entry["msgstr"][0] = unquote(value)
            else:
                field = keyword
                entry[field] = unquote(value)
    return entries


def fields(header):
    return dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "")
                for line in header.split("\n") if line)


def untranslated(entry):
    return not any(entry["msgstr"].values())


def fail(message):
    sys.exit("check_po: " + message)


def main():
    before, after = parse(sys.argv[1]), parse(sys.argv[2])
    language, plural_forms = sys.argv[3], sys.argv[4]
    every = "--all" in sys.argv[5:]
    nplurals = int(re.search(r"nplurals=(\d+)", plural_forms).group(1))
    # gettext writes no obsolete entry without a translation (msgcat neither)
    before = [e for e in before if not (e["obsolete"] and untranslated(e))]
    if len(before) != len(after):
        fail("%d entries in, %d out" % (len(before), len(after)))
    translated = left = 0
    for was, now in zip(before, after):
        name = repr(was["msgid"])
        for key in ("obsolete", "msgctxt", "msgid", "msgid_plural", "references", "extracted",
                    "previous"):
            if was[key] != now[key]:
                fail("%s: its %s changed: %r -> %r" % (name, key, was[key], now[key]))
        if was["msgid"] == "" and was["msgctxt"] is None:
            old, new = fields(was["msgstr"][0]), fields(now["msgstr"][0])
            said = {"Language", "Plural-Forms", "Content-Type", "PO-Revision-Date"}
            if {k: v for k, v in old.items() if k not in said} != \
                    {k: v for k, v in new.items() if k not in said}:
                fail("the header's other fields changed: %r -> %r" % (old, new))
            if (new.get("Language") != language or new.get("Plural-Forms") != plural_forms
                    or new.get("Content-Type") != "text/plain; charset=UTF-8"):
                fail("the header does not say %s, %s, UTF-8: %r" % (language, plural_forms, new))
            if was["comments"] != now["comments"] or was["flags"] != now["flags"]:
                fail("the header's comments or flags changed")
            continue
        wanted = not was["obsolete"] and (every or untranslated(was))
        noted = [c for c in now["comments"] if c.startswith(NOTE)]
        own = [c for c in now["comments"] if not c.startswith(NOTE)]
        if own != [c for c in was["comments"] if not c.startswith(NOTE)]:
            fail("%s: its comments changed: %r -> %r" % (name, was["comments"], now["comments"]))
        if wanted and now["msgstr"] != was["msgstr"] or wanted and "fuzzy" in now["flags"] \
                and "fuzzy" not in was["flags"]:
            forms = len(now["msgstr"])
            if now["flags"] != was["flags"] | {"fuzzy"} or noted:
                fail("%s: translated, but flags %r, notes %r" % (name, now["flags"], noted))
            if not all(now["msgstr"].values()) or \
                    forms != (nplurals if was["msgid_plural"] is not None else 1):
                fail("%s: %d forms, not all filled: %r" % (name, forms, now["msgstr"]))
            if was["msgid_plural"] is not None and \
                    len(set(now["msgstr"][i] for i in range(1, forms))) > 1:
                fail("%s: the forms past the first differ: %r" % (name, now["msgstr"]))
            translated += 1
        elif wanted:
            if now["flags"] != was["flags"] or now["msgstr"] != was["msgstr"]:
                fail("%s: left, but changed" % name)
            if untranslated(was) != (len(noted) == 1):
                fail("%s: left untranslated without one note saying why: %r" % (name, noted))
            left += 1
        elif (now["flags"], now["msgstr"], noted) != (was["flags"], was["msgstr"], []):
            fail("%s: changed, though it was not to be translated" % name)
    print("%d translated, %d left" % (translated, left))


main()
