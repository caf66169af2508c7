#!/bin/sh
# A shared library exports exactly the functions its public headers
# declare with TFM_API: nothing else leaks out, nothing declared is hidden,
# and each carries a version node of its map (TFM_0 ..., TFM_MPI_0 ...).
#   usage: check_symbols.sh LIBRARY HEADER...
set -u
lib=$1
shift
exported=$(mktemp)
declared=$(mktemp)
versioned=$(mktemp)
trap 'rm -f "$exported" "$declared" "$versioned"' EXIT
# "tfm_add@@TFM_0"; the nodes themselves are absolute symbols (type A)
nm -D --defined-only "$lib" | awk '$2 != "A" {print $NF}' | sort -u > "$versioned"
sed 's/@.*//' "$versioned" > "$exported"
grep -ho 'TFM_API[^(]*[ *]tfm_[a-z0-9_]*(' "$@" |
    sed 's/.*[ *]\(tfm_[a-z0-9_]*\)(/\1/' | sort -u > "$declared"
passed=0
failed=0
foreign=$(grep -v '^tfm_' "$exported")
if [ -n "$foreign" ]; then
    echo "exported without the tfm_ prefix:"; echo "$foreign"; failed=$((failed + 1))
else passed=$((passed + 1)); fi
undeclared=$(comm -23 "$exported" "$declared")
if [ -n "$undeclared" ]; then
    echo "exported but not in the public headers:"; echo "$undeclared"; failed=$((failed + 1))
else passed=$((passed + 1)); fi
unversioned=$(grep -v '@@\?TFM_[A-Z_]*[0-9.]*$' "$versioned")
if [ -n "$unversioned" ]; then
    echo "exported without a TFM_ version node:"; echo "$unversioned"; failed=$((failed + 1))
else passed=$((passed + 1)); fi
hidden=$(comm -13 "$exported" "$declared")
if [ -n "$hidden" ]; then
    echo "declared TFM_API but not exported:"; echo "$hidden"; failed=$((failed + 1))
else passed=$((passed + 1)); fi
echo "$(wc -l < "$exported") symbols exported, $(wc -l < "$declared") declared"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
