#!/bin/sh
# subprojects/: each wrap parses as meson reads it ([wrap-file] with its
# source's URL, file name, SHA-256 and folder; the build files it lays over
# the source in subprojects/packagefiles; what it provides), and a build
# configured without options takes the system's libraries, no subproject.
# Needs no network: the fallbacks' sources are downloaded only by a setup
# that lacks a system library. Ends with "N passed, N failed".
#   usage: check_wraps.sh BUILD_DIR
set -u
cd "$(dirname "$0")/.."
. scripts/steps.sh
build=$1

for wrap in subprojects/*.wrap; do
    python3 - "$wrap" <<'PY'
import configparser, os, re, sys
path = sys.argv[1]
wrap = configparser.ConfigParser(interpolation=None)
wrap.read(path)
file, provide = wrap['wrap-file'], wrap['provide']
assert re.fullmatch(r'[0-9a-f]{64}', file['source_hash']), 'source_hash is no SHA-256'
assert file['source_url'].startswith('https://') and file['source_filename'], 'source'
name = os.path.basename(path)[:-len('.wrap')]
assert file['directory'].startswith(name + '-'), 'directory'
patch = os.path.join('subprojects', 'packagefiles', file['patch_directory'], 'meson.build')
assert os.path.isfile(patch), patch + ' is missing'
assert len(provide) > 0, 'provides nothing'
PY
    step "$wrap parses as a wrap-file with its build files and what it provides" $?
done

# every dependency found, and from the system: no subproject configured
meson introspect --projectinfo "$build" | python3 -c '
import json, sys
sys.exit(json.load(sys.stdin)["subprojects"] != [])'
step "the default build uses no subproject" $?
meson introspect --dependencies "$build" | python3 -c '
import json, sys
names = {d["name"] for d in json.load(sys.stdin)}
sys.exit(not {"libutf8proc", "openblas", "check"} <= names)'
step "the default build found the system's utf8proc, OpenBLAS and Check" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
