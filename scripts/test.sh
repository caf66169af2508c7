#!/usr/bin/env bash
# Installs what the tests need, then: the API reference (Doxygen, warnings
# are errors); the release build's suites; the same
# suites under AddressSanitizer + UBSan, and those of attention and decoding
# under clang's UBSan; decoding on 8 threads under clang's ThreadSanitizer;
# the fuzzers (scripts/fuzz.sh); the
# installed copy used as users use it (scripts/check_consumers.sh), from
# Python (scripts/test_python.sh), and its ABI against the baseline
# (scripts/check_abi.sh); the installed programs.
# Ends with one
# "N passed, N failed" line counting every Check test case, fuzzer, script
# check and step.
set -u
cd "$(dirname "$0")/.."
. scripts/deps.sh
tfm_install_deps cmake abigail-tools doxygen libtfm-dev libmicrohttpd-dev libgettextpo-dev gettext \
    python3-cffi python3-numpy python3-pytest python3-venv libopenmpi-dev openmpi-bin || exit 1

passed=0
failed=0
count_step() { # name, exit status
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi
}
# Adds the Check summaries ("Checks: N, Failures: F, Errors: E") and the plain
# "N passed, N failed" lines of the scripted tests from a meson test log.
count_log() {
    read -r p f < <(awk '
        /^[0-9]+%: Checks: / { gsub(/,/, ""); n += $3; f += $5 + $7 }
        /^[0-9]+ passed, [0-9]+ failed$/ { n += $1 + $3; f += $3 }
        END { print n - f, f + 0 }' "$1")
    passed=$((passed + p))
    failed=$((failed + f))
}
# Runs a script that ends with "N passed, N failed" and adds its counts
# (a script that fails without that line counts as one failure).
run_script() { # name, command...
    local name=$1 log p f status
    shift
    log=$(mktemp)
    "$@" >"$log" 2>&1
    status=$?
    cat "$log"
    read -r p f < <(awk '/^[0-9]+ passed, [0-9]+ failed$/ { p = $1; f = $3 } END { print p + 0, f + 0 }' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$status" -eq 0 ] || [ "$f" -gt 0 ] || count_step "$name" 1
    rm -f "$log"
}
setup() { # dir, options...
    dir=$1; shift
    if [ -d "$dir" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
    else meson setup "$dir" "$@" >/dev/null; fi
}

echo "== API reference (Doxygen: an undocumented public symbol fails it)"
setup build-docs -Ddocs=true -Dtests=false && ninja -C build-docs docs/reference/html
count_step "API reference" $?

echo "== release build"
prefix=$PWD/build-test/prefix
setup build-test --prefix="$prefix" -Ddebug=true && ninja -C build-test >/dev/null
count_step "release build" $?
meson test -C build-test --print-errorlogs --num-processes 2 | tail -n 12
meson_status=${PIPESTATUS[0]}
count_log build-test/meson-logs/testlog.txt
[ "$meson_status" -eq 0 ] || count_step "release suites" 1
# subprojects/'s wraps parse, and the build above took the system's libraries
run_script "subprojects" scripts/check_wraps.sh build-test

echo "== AddressSanitizer + UBSan build, baseline kernels (TFM_CPU=baseline), without MPI"
# (also the build without MPI: libtfm_mpi and its tests are left out)
setup build-asan -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
    -Dmpi=disabled &&
    ninja -C build-asan >/dev/null
count_step "sanitizer build" $?
# ... with the kernels' baseline x86-64 path forced (the release run takes
# the best path the CPU has)
# (the sanitizers' timeouts three times the suites' own: a loaded 2-core
# machine ran the slowest suites, int8_model 60 s and alloc_failures 42 s
# at load 10, several times slower than an idle one)
TFM_CPU=baseline ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    CK_FORK=no meson test -C build-asan --print-errorlogs --num-processes 2 \
    --timeout-multiplier 3 | tail -n 12
meson_status=${PIPESTATUS[0]}
count_log build-asan/meson-logs/testlog.txt
[ "$meson_status" -eq 0 ] || count_step "sanitizer suites" 1
# ... and the bfloat16 products, AVX-512 only, on the best path (where the
# CPU has AVX512_BF16; elsewhere the suite checks the refusal)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    CK_FORK=no build-asan/tests/test_matmul_precision 2>&1 | tail -n 3
count_step "bfloat16 products under the sanitizers" "${PIPESTATUS[0]}"

echo "== clang's UBSan: attention, masks and decoding"
# clang checks what GCC's -fsanitize=undefined leaves out (a zero offset
# added to NULL, float-to-int overflow), and compiles the simd reductions
# its own way (a max reduction starts at -FLT_MAX, not -inf)
tfm_install_deps clang libclang-rt-14-dev &&
    CC=clang setup build-clang-ubsan -Dbuildtype=debugoptimized -Db_sanitize=undefined \
        -Db_lundef=false -Dmpi=disabled &&
    ninja -C build-clang-ubsan >/dev/null
count_step "clang UBSan build" $?
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 CK_FORK=no \
    meson test -C build-clang-ubsan --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
    ops_softmax nn_attention model torch_agreement decode | tail -n 8
meson_status=${PIPESTATUS[0]}
count_log build-clang-ubsan/meson-logs/testlog.txt
[ "$meson_status" -eq 0 ] || count_step "clang UBSan suites" 1

echo "== clang's ThreadSanitizer: 8 threads decoding one model, and translating with one translator"
# decoding only reads its model (decode.h): 8 program threads decode one
# model at once on libtfm's contended pool; a report fails the suite.
# OpenBLAS is not instrumented (its threads' handoff would look like races)
# and runs on one thread.
CC=clang setup build-clang-tsan -Dbuildtype=debugoptimized -Db_sanitize=thread \
        -Db_lundef=false -Dmpi=disabled &&
    ninja -C build-clang-tsan tests/test_decode_threads tests/test_translate >/dev/null
count_step "clang ThreadSanitizer build" $?
TSAN_OPTIONS=halt_on_error=1:exitcode=66 OPENBLAS_NUM_THREADS=1 CK_FORK=no \
    meson test -C build-clang-tsan --no-rebuild --print-errorlogs decode_threads translate | tail -n 8
meson_status=${PIPESTATUS[0]}
count_log build-clang-tsan/meson-logs/testlog.txt
[ "$meson_status" -eq 0 ] || count_step "clang ThreadSanitizer suite" 1

# CI runs each harness briefly (its time limit is 10 minutes in all);
# docs/reliability.md has the long runs.
fuzz_seconds=${TFM_FUZZ_SECONDS:-$([ "${CI:-}" = true ] && echo 20 || echo 60)}
echo "== fuzzing (libFuzzer, $fuzz_seconds s per harness, two at a time)"
run_script fuzzing scripts/fuzz.sh "$fuzz_seconds" 2

echo "== installed copy: pkg-config, CMake, beside TomsFastMath; as a meson subproject"
rm -rf "$prefix"
meson install -C build-test --no-rebuild >/dev/null
run_script "consumers" scripts/check_consumers.sh "$prefix"

echo "== Python package: pip install, pytest, the README's snippet, examples"
run_script "Python package" scripts/test_python.sh "$prefix"

echo "== ABI against the committed baseline (abidiff)"
run_script "ABI check" scripts/check_abi.sh build-test/lib/libtfm.so.*.*.*
# (not tee /dev/stderr: reopening it truncates a log file that captures both)
shape=$("$prefix/bin/tfm-encoder-layer")
echo "$shape"
grep -qx "Output shape: (2, 10, 128)" <<<"$shape"
count_step "installed tfm-encoder-layer prints tutorial 004's shape" $?
"$prefix/bin/tfm-causal" --d-model 32 --heads 4 --layers 1 --d-ff 64 --vocab 50 --length 12 \
    --batch 4 --epochs 2 | tail -n 1 | grep -q "^Epoch: 2, Loss: "
count_step "installed tfm-causal trains (small flags)" $?
"$prefix/bin/tfm-average" --print-first | grep -q "raw output: 0.544199352975335"
count_step "installed tfm-average reproduces the tutorials' first sample" $?
# Command-line conventions: --help and --version on stdout with status 0,
# an unknown flag or a bad value, or flags that cannot go together, on
# stderr with status 2; messages and --version name the program by its
# short name (tfm-taylor), never by the path it was started with.
version=$(meson introspect --projectinfo build-test | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
# each program's usage error that no single flag's value shows
declare -A usage_error=([tfm-taylor]="--heads 3" [tfm-average]="--heads 3" [tfm-causal]="--heads 3"
    [tfm-encoder-layer]="--heads 3" [tfm-sampling]="--top-k 2" [tfm-fit-line]="extra"
    [tfm-tokenize]="--train x" [tfm-translate]="--train --model x" [tfm-serve]="--port 5000")
conventions=0
usage() { # program arguments...: status 2, nothing on stdout, stderr's lines all the program's
    local name
    name=$(basename "$1")
    "$@" >"$checkpoint/stdout" 2>"$checkpoint/stderr"
    [ $? -eq 2 ] && [ ! -s "$checkpoint/stdout" ] && [ -s "$checkpoint/stderr" ] &&
        head -n 1 "$checkpoint/stderr" | grep -q "^$name: " &&
        ! grep -qF "$prefix" "$checkpoint/stderr"
}
checkpoint=$(mktemp -d)
for program in "$prefix"/bin/tfm-*; do
    name=$(basename "$program")
    "$program" --help 2>/dev/null | grep -q "^usage: $name " &&
        "$program" --version 2>/dev/null | grep -qxF "$name (libtfm $version)" &&
        usage "$program" --no-such-flag && grep -q "no-such-flag" "$checkpoint/stderr" &&
        [ -n "${usage_error[$name]:-}" ] && usage "$program" ${usage_error[$name]} || {
        echo "$program does not follow the command-line conventions:"
        cat "$checkpoint/stderr" 2>/dev/null
        conventions=1
    }
done
count_step "installed programs answer --help and --version by their short name, refuse unknown flags and flags that cannot go together with status 2" $conventions
"$prefix/bin/tfm-average" --epochs 1 --d-model 16 --heads 2 --encoder-layers 1 --decoder-layers 1 \
    --d-ff 16 --save "$checkpoint/new/models/average.safetensors" | grep -q "Test RMSE" &&
    "$prefix/bin/tfm-sampling" --checkpoint "$checkpoint/new/models/average.safetensors" |
    grep -q "^top-p " &&
    "$prefix/bin/tfm-average" --load "$checkpoint/new/models/average.safetensors" | grep -q "Test RMSE"
count_step "installed tfm-average trains and saves two new folders deep; tfm-sampling and tfm-average --load read its model with no flags" $?
"$prefix/bin/tfm-taylor" --out "$checkpoint/runs/taylor" \
    --iterations 20 --step 10 --schedule cosine --warmup 5 --decode-batch 250 | grep -q "Accuracy: "
count_step "installed tfm-taylor trains into --out two new folders deep, checkpoints and translates" $?
# (tfm-taylor's first lines are its own, not the notebook's printme)
"$prefix/bin/tfm-taylor" --translate "$checkpoint/runs/taylor/taylor_best.safetensors" \
    --decode-batch 750 --examples 0 | head -n 3 | grep -q " 0 0 0 "
[ $? -ne 0 ] && "$prefix/bin/tfm-taylor" --print-first | grep -q "^ target: 1 "
count_step "installed tfm-taylor prints the data's token codes with --print-first only" $?
run_script "MPI jobs with a failing rank" scripts/check_mpi_failure.sh "$prefix/bin/tfm-taylor"
# 20 iterations straight, and 10 then 10 more from the checkpoint: the same bits
taylor_flags="--batch 1000 --d-model 8 --heads 2 --d-ff 8 --layers 1 --bucket 2 --step 7 --evaluate 0"
"$prefix/bin/tfm-taylor" $taylor_flags --out "$checkpoint/straight" --iterations 20 >/dev/null &&
    "$prefix/bin/tfm-taylor" $taylor_flags --out "$checkpoint/halves" --iterations 13 >/dev/null &&
    "$prefix/bin/tfm-taylor" $taylor_flags --out "$checkpoint/halves" --iterations 20 \
        --resume "$checkpoint/halves/taylor_last.safetensors" >/dev/null &&
    cmp "$checkpoint/straight/taylor_last.safetensors" "$checkpoint/halves/taylor_last.safetensors"
count_step "installed tfm-taylor --resume continues bit for bit" $?
"$prefix/bin/tfm-taylor" --translate "$checkpoint/straight/taylor_last.safetensors" \
    --decode-batch 750 | grep -q "^Accuracy: "
count_step "installed tfm-taylor --translate needs no model flags" $?
rm -rf "$checkpoint"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
