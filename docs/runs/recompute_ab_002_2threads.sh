#!/bin/bash
# ab002.sh ROUNDS: tfm-bench 002 train on 2 threads, old library, new, new recomputing all (15), interleaved
for r in $(seq $1); do
  for v in old new new15; do
    case $v in old) pre="env LD_LIBRARY_PATH=/tmp/old/build/lib"; rec=0;; new) pre=env; rec=0;; new15) pre=env; rec=15;; esac
    line=$($pre OPENBLAS_NUM_THREADS=2 /work/main/build/bench/tfm-bench --config 002 --what train --threads 2 --steps 4 --warmup 2 --recompute $rec 2>/dev/null | tail -1)
    echo "$v $(echo "$line" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['median_ms'], d['peak_rss_mb'], d['tape_mb'])")"
  done
done
