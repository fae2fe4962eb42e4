#!/bin/sh
# instructions.sh: the instructions one iteration of a Go benchmark costs,
# counted by valgrind's callgrind (Debian's valgrind): nearly the same
# count run after run, whatever else the machine does. Use it to steer;
# prove with ratios.
#
#   scripts/instructions.sh TESTBINARY BENCH [N]
#
# TESTBINARY is a `go test -c` binary, BENCH a -test.bench pattern naming
# one benchmark. It runs the benchmark N (default 2000) and 2N iterations
# under callgrind and prints (I(2N) - I(N)) / N: the per-iteration count,
# set-up cancelled. One processor and no GC (GOMAXPROCS=1, GOGC=off) make
# the count repeatable to 1-2% (random ids and seeds remain), where a
# throughput run moves by 15%; the GC's own work, proportional to the
# bytes allocated (-benchmem), is left out. Go's async preemption signals
# crash callgrind, hence asyncpreemptoff.
set -eu
bin=$1 bench=$2 n=${3:-2000}
count() {
	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" 2>&1 |
		sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p'
}
a=$(count "$n")
b=$(count $((2 * n)))
[ -n "$a" ] && [ -n "$b" ] || { echo "instructions.sh: callgrind counted nothing (is valgrind installed?)" >&2; exit 1; }
echo "$bench: $(( (b - a) / n )) instructions per iteration"
