#!/usr/bin/env bash
# The built libtfm.so against the committed ABI baseline (abi/): removed or
# changed functions and variables fail, since a program built against the
# baseline could break; added ones are compatible and are listed. Needs a
# library built with debug information (-Ddebug=true). Ends with
# "N passed, N failed".
#   usage: scripts/check_abi.sh LIBRARY
# An options struct grown at its end passes (abi/opaque.suppr). After a
# deliberate break (with its SONAME bump), or at a release, refresh the
# baseline from a -Ddebug=true build and say why in CHANGELOG.md:
#   abidw --headers-dir include/tfm --no-corpus-path \
#       --out-file abi/libtfm.so.0.abi BUILD/lib/libtfm.so.X.Y.Z
set -u
cd "$(dirname "$0")/.."
library=$1
# changes inside the opaque handles are not ABI changes (abi/opaque.suppr)
report=$(abidiff --suppressions abi/opaque.suppr --headers-dir2 include/tfm \
    abi/libtfm.so.0.abi "$library")
status=$?
echo "$report" | head -n 60
summary() { # the numbers of "... summary: R Removed, C Changed (...), A Added ..."
    grep "^$1 changes summary:" <<<"$report" |
        sed 's/.*: \([0-9]*\) Removed, \([0-9]*\) Changed.*, \([0-9]*\) Added.*/\1 \2 \3/'
}
read -r fr fc fa < <(summary Functions)
read -r vr vc va < <(summary Variables)
if [ $((status & 3)) -ne 0 ]; then
    echo "FAILED: abidiff could not compare (exit $status)"
    echo "0 passed, 1 failed"
    exit 1
fi
if [ $((status & 8)) -ne 0 ] || [ $((${fr:-0} + ${fc:-0} + ${vr:-0} + ${vc:-0})) -gt 0 ]; then
    echo "FAILED: the ABI changed incompatibly against abi/libtfm.so.0.abi (exit $status)"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "ABI compatible with abi/libtfm.so.0.abi: $((${fa:-0} + ${va:-0})) additions"
echo "1 passed, 0 failed"
