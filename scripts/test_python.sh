#!/usr/bin/env bash
# The Python package as its users get it: the README's `pip install
# ./bindings/python` into a fresh virtual environment (with the system's
# numpy and cffi; offline: the build needs nothing from an index), finding
# the library installed in PREFIX through pkg-config at install time only;
# then its pytest suite, the README's Python snippet as written, and the
# Python examples. Ends with "N passed, N failed".
#   usage: scripts/test_python.sh PREFIX
set -u
cd "$(dirname "$0")/.."
. scripts/installed.sh "$1"

# Debian's interpreter: its numpy, cffi and pytest (another python3 may come
# first on PATH).
/usr/bin/python3 -m venv --system-site-packages "$scratch/venv" &&
    "$scratch/venv/bin/pip" install --quiet ./bindings/python
step "pip install ./bindings/python into a virtual environment" $?
python=$scratch/venv/bin/python

# What the install recorded is what import uses: no pkg-config at import.
env -u PKG_CONFIG_PATH "$python" -c 'import sys, tfm
sys.exit(tfm.library_path != sys.argv[1] or tfm._binding._header_dir() != sys.argv[2])' \
    "$libdir/libtfm.so.0" "$prefix/include/tfm"
step "the installed package loads PREFIX's library and headers without pkg-config" $?

# Outside the source tree, so that `import tfm` is the installed package.
cd "$scratch"
"$python" -c 'import tfm, sys; print("tfm", tfm.__version__, "from", tfm.__file__, "over", tfm.library_path)'
log=$scratch/pytest.log
"$python" -m pytest -q -p no:cacheprovider "$source/bindings/python/tests" >"$log" 2>&1
status=$?
tail -n 15 "$log"
read -r p f < <(awk '/ passed| failed/ {
        for (i = 1; i < NF; i++) { if ($(i + 1) ~ /^passed/) p = $i; if ($(i + 1) ~ /^failed/) f = $i }
    } END { print p + 0, f + 0 }' "$log")
passed=$((passed + p))
failed=$((failed + f))
[ "$status" -eq 0 ] || [ "$f" -gt 0 ] || step "pytest ran" 1

awk '/^```python$/ { inside = 1; next } /^```$/ { inside = 0 } inside' "$source/README.md" \
    >"$scratch/readme_snippet.py"
# as from a checkout's root, whose tests/marian the snippet translates with
mkdir "$scratch/tests" && ln -s "$source/tests/marian" "$scratch/tests/marian" &&
    [ -s "$scratch/readme_snippet.py" ] && "$python" "$scratch/readme_snippet.py"
step "the README's Python snippet runs as written" $?

# (grep reads it all: -q would stop at the match, and the example's next
# print would meet a closed pipe)
"$python" "$source/bindings/python/examples/encoder_layer.py" | grep -x "Output shape: (2, 10, 128)"
step "examples/encoder_layer.py prints tutorial 004's shape" $?

# Tutorial 003 from Python follows the C example's loss curve exactly, over
# 20 iterations: too few to translate any test function right, so its
# accuracy (0.000) is not printed here; the translation is checked to run.
data=$source/data/taylor/seq2seq_series_2terms.txt
losses() { awk '$2 == "train" && $4 == "val" { print $1, $3, $5 }'; }
OPENBLAS_NUM_THREADS=1 "$python" "$source/bindings/python/examples/taylor.py" --data "$data" \
    --iterations 20 --step 10 --translate 100 >"$scratch/taylor_python.txt"
OPENBLAS_NUM_THREADS=1 "$prefix/bin/tfm-taylor" --data "$data" --iterations 20 --step 10 \
    --evaluate 0 --out "$scratch/taylor" >"$scratch/taylor_c.txt"
losses <"$scratch/taylor_python.txt" >"$scratch/python_losses"
losses <"$scratch/taylor_c.txt" >"$scratch/c_losses"
[ "$(wc -l <"$scratch/python_losses")" -eq 2 ] && cmp "$scratch/python_losses" "$scratch/c_losses" &&
    grep -q "^Accuracy: " "$scratch/taylor_python.txt"
step "examples/taylor.py trains with the C example's very losses, then translates" $?

# Each published fixture folder saved back by libtfm (one file, shards) and
# read by its PyTorch twin, written from transformers' modeling code: the
# twin's results bit for bit those of the original folder. Needs
# python3-torch, which the suite does not install (a developer's check).
if "$python" -c 'import torch' 2>/dev/null; then
    "$python" "$source/tests/pretrained/check_twins.py" --saved >"$scratch/twins_saved.log" 2>&1
    step "the twins read libtfm's save_pretrained folders as the originals" $?
    tail -n 16 "$scratch/twins_saved.log"
else
    echo "skipped: the twins on save_pretrained folders (no python3-torch)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
