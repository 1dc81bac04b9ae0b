#!/bin/sh
# postgres.sh: the PostgreSQL engine against its peer (issue 19). Each
# round runs, in one test binary on one throwaway durable cluster (fsync
# on, synchronous_commit=on; pgtest.DurableSchema), BenchmarkAuditedCall,
# BenchmarkAuditedCall32, BenchmarkRawCommit and BenchmarkRawCommit32 one
# after another, and prints the round's ratios:
#
#	audited calls/s (1 caller)  / raw commits/s (1 connection)    target >= 0.6
#	audited calls/s (32 callers on 32 runs) / raw commits/s (32)   target >= 0.5
#
#	bench/postgres.sh                # 10 rounds of 1 s per benchmark
#	ROUNDS=20 BENCHTIME=2s bench/postgres.sh
#
# The disk's commit latency drifts within seconds on a shared machine, so
# short benchmarks in many rounds, and the median of the rounds' ratios
# (printed last), say more than one long run.
#
# With OPENPLAYBOOK_TEST_POSTGRES set, that server is measured instead.
# The load average is printed before and after: other work on the machine
# moves both sides, the ratios less than the rates.
set -eu
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-10}
benchtime=${BENCHTIME:-1s}
ratios=$(mktemp)
bin=$(mktemp -d)/postgres.test
trap 'rm -rf "$(dirname "$bin")" "$ratios"' EXIT
go test -c -o "$bin" ./store/postgres
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(go version); $(nproc) CPUs"
echo "# before: $(uptime)"
i=1
while [ "$i" -le "$rounds" ]; do
	out=$(cd store/postgres && "$bin" -test.run '^$' -test.bench '^Benchmark(AuditedCall|AuditedCall32|RawCommit|RawCommit32)$' -test.benchtime "$benchtime")
	echo "$out" | grep '^Benchmark'
	echo "$out" | awk -v round="$i" '
		/^BenchmarkAuditedCall-/   { for (f = 1; f <= NF; f++) if ($(f+1) == "calls/s") a1 = $f }
		/^BenchmarkAuditedCall32-/ { for (f = 1; f <= NF; f++) if ($(f+1) == "calls/s") a32 = $f }
		/^BenchmarkRawCommit-/     { for (f = 1; f <= NF; f++) if ($(f+1) == "commits/s") r1 = $f }
		/^BenchmarkRawCommit32-/   { for (f = 1; f <= NF; f++) if ($(f+1) == "commits/s") r32 = $f }
		END { if (r1 > 0 && r32 > 0) printf "round %d: 1 caller %.2f (target 0.6), 32 callers %.2f (target 0.5)\n", round, a1 / r1, a32 / r32 }' | tee -a "$ratios"
	i=$((i + 1))
done
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "median of $rounds rounds: 1 caller $(awk '{ print $5 }' "$ratios" | median) (target 0.6), 32 callers $(awk '{ print $10 }' "$ratios" | median) (target 0.5)"
echo "# after: $(uptime)"
