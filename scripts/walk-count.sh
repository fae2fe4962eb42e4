#!/usr/bin/env bash
# Counts the functions of this repository that one order runs: the counts
# in docs/design.md's walk. TestWalkOfOneOrder (app/walk_test.go) starts
# an instance with production defaults, creates a SKU and sells one unit
# to each of up to two buyers (POST /api/v1/orders); it runs with coverage
# counters for 0, 1 and 2 orders, and a function counts for an order when
# that order made one of its counters grow. Background work (renewals,
# watches) can add a function or two: run it more than once. Prints each
# package's count for the first order (a new worker obtains the lock and
# reads the row), then the total, then the second order's total (the
# worker running, its lease held). Needs the suite's test servers
# (SECKILL_TEST_MYSQL_DSN, SECKILL_TEST_REDIS_ADDR, or their defaults).
#   scripts/walk-count.sh        the counts
#   scripts/walk-count.sh -v     and every function the first order ran
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in 0 1 2; do
	go test -count=1 -covermode=atomic -coverpkg='github.com/seckill/seckill/...' -coverprofile="$out/$n.txt" \
		-run '^TestWalkOfOneOrder$' ./app -args -walk.orders=$n >"$out/test.log" 2>&1 || { cat "$out/test.log"; exit 1; }
done
# ran A B: the functions in which a block's count grew from profile A to
# B (go tool cover -func names the function each block lies in).
ran() {
	awk 'FNR == 1 { f++; next } f == 1 { n[$1] += $3; next } { m[$1] += $3; s[$1] = $2 }
		END { print "mode: set"; for (b in m) print b, s[b], (m[b] > n[b]) ? 1 : 0 }' "$1" "$2" >"$out/ran.txt"
	go tool cover -func="$out/ran.txt" | awk '$1 != "total:" && $NF != "0.0%"'
}
ran "$out/0.txt" "$out/1.txt" >"$out/funcs.txt"
if [[ ${1:-} == -v ]]; then
	cat "$out/funcs.txt"
fi
awk '{ file = $1; sub(/:[0-9]+:$/, "", file); pkg = file; sub(/\/[^\/]*$/, "", pkg); sub(/^github.com\/seckill\/seckill\/?/, "", pkg); if (pkg == "") pkg = "."; print pkg, file }' "$out/funcs.txt" |
	awk '{ n[$1]++; files[$2] = 1; t++ } END { for (p in n) printf "%4d  %s\n", n[p], p | "sort -k2"; close("sort -k2"); for (f in files) nf++; printf "%4d  functions in %d files: the first order\n", t, nf }'
printf "%4d  functions: the second order\n" "$(ran "$out/1.txt" "$out/2.txt" | wc -l)"
