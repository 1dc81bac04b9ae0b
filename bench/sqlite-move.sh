#!/bin/sh
# sqlite-move.sh: the SQLite engine after the store contract (issue 19:
# "within 5% of today on the existing call-path benchmarks") against the
# engine as it was before the move, at BASE (default 500b266^, the last
# commit with the engine in package store). Both test binaries are built
# first, then run in alternation, ROUNDS times each, on the same disk
# (the Go temp dir), and the medians per benchmark are printed as
# after/before: the rate (calls/s, wall time) and the CPU time per call
# (user + system, from GNU time, for a fixed BENCHTIME of N calls). On a
# shared machine the rates move with the load; the CPU per call much less.
#
#	bench/sqlite-move.sh               # 6 rounds of 3000 calls per benchmark
#	ROUNDS=10 BENCHTIME=10000x bench/sqlite-move.sh [BASE]
set -eu
cd "$(dirname "$0")/.."
base=${1:-500b266^}
rounds=${ROUNDS:-6}
benchtime=${BENCHTIME:-3000x}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q --detach "$tmp/base" "$base"
(cd "$tmp/base" && go test -c -o "$tmp/before.test" ./store)
go test -c -o "$tmp/after.test" ./store/sqlite
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(go version); $(nproc) CPUs; before = $(git rev-parse --short "$base"), after = $(git rev-parse --short HEAD)"
echo "# before: $(uptime)"
i=1
while [ "$i" -le "$rounds" ]; do
	for b in serial serial-read concurrent concurrent-read; do
		for side in before after; do
			/usr/bin/time -f 'cpu %U %S' -o "$tmp/time" "$tmp/$side.test" -test.run '^$' \
				-test.bench "^BenchmarkAuditedCall\$/^sync=FULL\$/^$b\$" -test.benchtime "$benchtime" >"$tmp/out"
			awk -v side="$side" -v b="$b" '
				/^BenchmarkAuditedCall\// { for (f = 1; f <= NF; f++) { if ($(f+1) == "calls/s") r = $f; if ($(f+1) == "ns/op") ; } n = $2 }
				FILENAME ~ /time$/ && $1 == "cpu" { c = $2 + $3 }
				END { printf "%s %s %s %.9f\n", side, b, r, c / n }' "$tmp/out" "$tmp/time" >>"$tmp/rates"
		done
	done
	i=$((i + 1))
done
awk '{ r[$1 " " $2] = r[$1 " " $2] " " $3; c[$1 " " $2] = c[$1 " " $2] " " $4; names[$2] = 1 }
	function median(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END { for (n in names) { rb = median(r["before " n]); ra = median(r["after " n]); cb = median(c["before " n]); ca = median(c["after " n])
		printf "sync=FULL/%-16s calls/s before %6.0f after %6.0f (after/before %.2f); CPU per call before %4.0f us after %4.0f us (after/before %.3f)\n", n, rb, ra, ra / rb, cb * 1e6, ca * 1e6, ca / cb } }' "$tmp/rates" | sort
echo "# after: $(uptime)"
