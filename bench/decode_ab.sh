#!/bin/bash
# Two builds of libtfm and PyTorch's fastest decode (bench/torch/decode.py),
# interleaved per configuration, strategy and precision, 2 threads each:
#   bench/decode_ab.sh BEFORE_BUILD AFTER_BUILD LOG.jsonl [CONFIGS]
# e.g. bench/decode_ab.sh /tmp/main/build build runs/decode_ab.jsonl "avg 002"
# Each line of LOG is one process's JSON result with what ran and the load.
# The jobs get the larger CPU share (autogroup nice -20) on a shared machine.
set -u
before=$1 after=$2 log=$3 configs=${4:-003 avg 002}
echo -20 > /proc/self/autogroup 2>/dev/null
cd "$(dirname "$0")/.."
: > "$log"
for config in $configs; do
    sources=750
    [ "$config" = 002 ] && sources=64
    for beam in 1 4; do
        for precision in float32 int8; do
            for impl in before after torch; do
                if [ "$impl" = torch ]; then
                    line=$(OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive /usr/bin/python3 \
                        bench/torch/decode.py --threads 2 --config "$config" --sources "$sources" \
                        --beam "$beam" --precision "$precision" 2>/dev/null | tail -1)
                else
                    build=$after
                    [ "$impl" = before ] && build=$before
                    line=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=2 "$build/bench/tfm-bench" \
                        --threads 2 --config "$config" --what decode --sources "$sources" \
                        --beam "$beam" --warmup 1 --precision "$precision" 2>/dev/null | tail -1)
                fi
                [ -n "$line" ] || line=null
                printf '{"impl": "%s", "config": "%s", "beam": %d, "precision": "%s", "load": "%s", "out": %s}\n' \
                    "$impl" "$config" "$beam" "$precision" "$(cut -d' ' -f1 /proc/loadavg)" "$line" >>"$log"
            done
        done
    done
done
# the ratios: PyTorch's time over each build's, and after over before
/usr/bin/python3 - "$log" <<'PY'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["out"]:
        runs[(r["config"], r["beam"], r["precision"], r["impl"])] = r["out"]["median_ms"]
print("config strategy precision  before/PyTorch  after/PyTorch  after/before")
for (config, beam, precision, impl), ms in sorted(runs.items()):
    if impl != "torch":
        continue
    get = lambda who: runs.get((config, beam, precision, who))
    ratio = lambda a, b: "%.2fx" % (a / b) if a and b else "-"
    print("%-6s %-8s %-9s  %14s  %13s  %12s" % (
        config, "greedy" if beam == 1 else "beam %d" % beam, precision,
        ratio(ms, get("before")), ratio(ms, get("after")), ratio(get("before"), get("after"))))
PY
