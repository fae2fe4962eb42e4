#!/usr/bin/env bash
# Runs `go test` with the given arguments and passes its output through.
# When the run fails, it repeats at the end what a long log buries: the
# tests that failed, and after a timeout the tests still running (their
# names come first in the goroutine dump, which CI's tail cuts off).
#
#   scripts/go-test.sh -race -count=1 -timeout 30m ./...
#   GO="go -C lock" scripts/go-test.sh ./...    # GO may carry go's own flags
set -uo pipefail

read -r -a gocmd <<<"${GO:-go}"

log=$(mktemp "${TMPDIR:-/tmp}/go-test.XXXXXX")
trap 'rm -f "$log"' EXIT
"${gocmd[@]}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "go-test: go test $* failed (exit $rc); in its output:"
  grep -E '^[[:space:]]*--- FAIL|^FAIL|^panic: ' "$log" | head -40
  grep -A12 'running tests:' "$log" | grep -E 'running tests:|^[[:space:]]+Test' | head -40
fi
exit "$rc"
