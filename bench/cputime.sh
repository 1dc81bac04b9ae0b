#!/bin/sh
# cputime.sh: CPU time (user + system, all threads) per operation of one
# benchmark, a figure that other processes on the machine barely change,
# unlike ns/op (wall time). It runs the benchmark for exactly 1 and for
# exactly N+1 iterations and divides the difference by N, so set-up
# (generating documents, building registries) cancels out.
#
#	bench/cputime.sh PACKAGE BENCHMARK N [RUNS]
#	bench/cputime.sh ./validate '^BenchmarkValidateLarge$' 20
#	bench/cputime.sh ./runtime '^BenchmarkDecideRefuse$' 1000000 3
#
# BENCHMARK must select one benchmark (or one sub-benchmark, e.g.
# '^BenchmarkCheck5000$/^sorted$'). For CPU-bound code, CPU time per
# operation bounds what ns/op would be on an idle machine from above
# (parallel GC counts in full). Prints the best of RUNS (default 3).
# Needs GNU time (/usr/bin/time).
set -eu
cd "$(dirname "$0")/.."
pkg=$1 pat=$2 n=$3 runs=${4:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/b.test" "$pkg"
cpu() { # iterations -> CPU seconds of one run of the test binary
	(cd "$pkg" && /usr/bin/time -f '%U %S' -o "$tmp/t" "$tmp/b.test" -test.run '^$' -test.bench "$pat" -test.benchtime "${1}x" >"$tmp/out")
	grep -q '^Benchmark' "$tmp/out" || { cat "$tmp/out" >&2; exit 3; }
	awk '{print $1 + $2}' "$tmp/t"
}
best=
i=0
while [ "$i" -lt "$runs" ]; do
	i=$((i + 1))
	one=$(cpu 1)
	many=$(cpu $((n + 1)))
	per=$(awk -v a="$one" -v b="$many" -v n="$n" 'BEGIN {printf "%.6g", (b - a) / n}')
	echo "run $i: $per s CPU/op (1 op: ${one}s, $((n + 1)) ops: ${many}s)"
	if [ -z "$best" ] || awk -v x="$per" -v y="$best" 'BEGIN {exit !(x < y)}'; then best=$per; fi
done
echo "$pkg $pat: best of $runs: $best s CPU/op; load: $(cut -d' ' -f1-3 /proc/loadavg)"
