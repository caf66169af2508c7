#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c, clang with ASan and
# UBSan, in build-fuzz/) and runs each for SECONDS (default 60), JOBS at a
# time (default 2), from the committed seeds plus seeds the library writes
# now. A harness passes when it ends without a report; a report leaves its
# input in build-fuzz/artifacts/ and the log in build-fuzz/logs/NAME.log.
# TFM_FUZZ_DIR sets another build folder. Prints one line per harness
# (executions, coverage, corpus) and ends with
# "N passed, N failed".
#   usage: scripts/fuzz.sh [SECONDS] [JOBS]
set -u
cd "$(dirname "$0")/.."
. scripts/deps.sh
tfm_install_deps clang libclang-rt-14-dev || exit 1
seconds=${1:-60}
jobs=${2:-2}
dir=${TFM_FUZZ_DIR:-build-fuzz}

if [ -d "$dir" ]; then
    meson setup --reconfigure "$dir" >/dev/null
else
    CC=clang meson setup "$dir" -Dfuzz=true -Dtests=false -Ddefault_library=static -Dnative=false \
        -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi || { echo "0 passed, 1 failed"; exit 1; }
ninja -C "$dir" >/dev/null || { echo "FAILED: fuzz build"; echo "0 passed, 1 failed"; exit 1; }
rm -rf "$dir/seeds" "$dir/logs"
mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/logs"
"$dir/tests/fuzz/make_seeds" "$dir/seeds" || { echo "FAILED: make_seeds"; echo "0 passed, 1 failed"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# A harness's seeds: the folders named after it, committed or written now
# by make_seeds (the pretrained folders' and the argument harnesses' --
# bpe_train, score, batch, decode_options -- are only written), else files/.
seed_folders() { # name
    local folder found=
    for folder in "tests/fuzz/seeds/$1" "$dir/seeds/$1"; do
        [ -d "$folder" ] && found="$found $folder"
    done
    echo "${found:-tests/fuzz/seeds/files $dir/seeds/files}"
}
run() { # name
    local name=$1
    mkdir -p "$dir/corpus/$name"
    # shellcheck disable=SC2046 # the folders are words without spaces
    "$dir/tests/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
        -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-" \
        "$dir/corpus/$name" $(seed_folders "$name") \
        >"$dir/logs/$name.log" 2>&1
    echo $? >"$dir/logs/$name.status"
}

names=$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
running=0
for name in $names; do
    run "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

passed=0
failed=0
for name in $names; do
    log=$dir/logs/$name.log
    execs=$(awk '/stat::number_of_executed_units/ { print $2 }' "$log")
    line=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
    corpus=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$line")
    if [ "$(cat "$dir/logs/$name.status")" -eq 0 ]; then
        passed=$((passed + 1))
        echo "fuzz_$name: passed, ${execs:-?} executions in ${seconds} s, cov ${cov:-?}, corpus ${corpus:-?}"
    else
        failed=$((failed + 1))
        echo "FAILED: fuzz_$name (log: $log)"
        grep -E 'ERROR: |runtime error|SUMMARY' "$log" | head -n 5
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
