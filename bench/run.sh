#!/bin/sh
# run.sh: every benchmark behind a speed target in BENCHMARKS.md, then the
# peak-memory measurement (peakmem.sh). Each benchmark runs COUNT times
# (default 3); BENCHMARKS.md reports the best run.
#
#	bench/run.sh                 # all of them, -count 3
#	COUNT=5 bench/run.sh
#	bench/run.sh 'Decide'        # only benchmarks matching a pattern (no peakmem)
#
# Other work on the machine makes the numbers slower: the load average is
# printed before and after; compare runs measured under similar load.
set -eu
cd "$(dirname "$0")/.."
count=${COUNT:-3}
only=${1:-}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(go version); $(nproc) CPUs"
echo "# before: $(uptime)"
bench() { # package, pattern
	case "$2" in *"$only"*) ;; *) [ -n "$only" ] && return 0 ;; esac
	echo "## go test $1 -run '^\$' -bench '$2' -benchmem -count $count"
	go test "$1" -run '^$' -bench "$2" -benchmem -count "$count" -timeout 30m || failed="$failed $1"
}
failed=
bench ./validate '^BenchmarkValidateLarge$'
bench ./validate '^BenchmarkValidateLargeRetained$'
bench ./syntax '^BenchmarkParseLarge$'
bench ./preflight '^BenchmarkCheck5000$'
bench ./preflight '^BenchmarkEnvCheck5000$'
bench ./drift '^BenchmarkCompare5000$'
bench ./runtime '^BenchmarkDecide'
bench ./runtime '^BenchmarkAuditedCallPath$'
bench ./store '^BenchmarkAuditedCall$'
bench ./validate '^BenchmarkCredential$'
bench ./internal/credential '^Benchmark(FindProse|FindCorpus|RedactMessage|RedactPointer)$'
if [ -z "$only" ]; then
	echo "## bench/peakmem.sh $count"
	bench/peakmem.sh "$count" || failed="$failed peakmem"
fi
echo "# after: $(uptime)"
if [ -n "$failed" ]; then
	echo "run.sh: failed:$failed" >&2
	exit 1
fi
