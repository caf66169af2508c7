#!/usr/bin/env bash
# MPI jobs of tfm-taylor in which one rank fails: the whole job must end
# within 30 s with a non-zero status and the failing rank's message, not
# leave the other rank waiting in a collective. Ends with "N passed, N failed".
#   usage: scripts/check_mpi_failure.sh TFM_TAYLOR
set -u
taylor=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. "$(dirname "$0")/steps.sh"
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)
flags=(--distributed --batch 4 --iterations 20 --step 10 --evaluate 0)
: >"$scratch/file" # a file where a folder should be: --out under it cannot be made

job() { # name, expected message, mpirun arguments...
    local name=$1 message=$2 start status seconds
    shift 2
    start=$(date +%s)
    timeout 60 "${mpirun[@]}" "$@" </dev/null >"$scratch/out" 2>"$scratch/err"
    status=$?
    seconds=$(($(date +%s) - start))
    if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$seconds" -lt 30 ] &&
        grep -qF "$message" "$scratch/err"; then
        step "$name (status $status after $seconds s)" 0
    else
        step "$name (status $status after $seconds s; 124: timed out)" 1
        tail -n 5 "$scratch/err"
    fi
}

job "2 ranks, rank 0 cannot create --out: the job ends" \
    "tfm-taylor: cannot create the folder '$scratch/file/runs'" \
    -np 2 "$taylor" "${flags[@]}" --out "$scratch/file/runs"
job "2 ranks, only rank 1 fails (its --data is missing): the job ends" \
    "tfm-taylor: $scratch/missing" \
    -np 1 "$taylor" "${flags[@]}" --out "$scratch/runs" : \
    -np 1 "$taylor" "${flags[@]}" --out "$scratch/runs" --data "$scratch/missing"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
