# Sourced by the scripted checks (POSIX sh): counts their steps, each
# printed as "ok   NAME" or "FAILED: NAME"; a check ends with its
# "$passed passed, $failed failed" line.
passed=0
failed=0
step() { # name, exit status
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok   $1"
    else failed=$((failed + 1)); echo "FAILED: $1"; fi
}
