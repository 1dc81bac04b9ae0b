#!/bin/sh
# peakmem.sh: peak memory (maximum resident set size) of
# `openplaybook validate` on a generated 1,000-step, 5,000-tool document
# (internal/testgen.Large, about 6 MB). Target (BENCHMARKS.md): < 100 MB.
#
#	bench/peakmem.sh [runs]        # default 5 runs; prints each and the best
#
# Needs GNU time (/usr/bin/time -v; Debian/Ubuntu: apt-get install -y time).
set -eu
cd "$(dirname "$0")/.."
runs=${1:-5}
if ! /usr/bin/time -v true >/dev/null 2>&1; then
	echo "peakmem.sh: GNU time is missing: apt-get install -y time" >&2
	exit 3
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./bench/gen -steps 1000 -tools 5000 -o "$tmp/big.json"
go build -o "$tmp/openplaybook" ./cmd/openplaybook
echo "document: $(wc -c <"$tmp/big.json") bytes; load average: $(cut -d" " -f1-3 /proc/loadavg)"
mb() { awk -v k="$1" 'BEGIN {printf "%.1f MB, %.1f MiB", k * 1024 / 1e6, k / 1024}'; }
best=
i=0
while [ "$i" -lt "$runs" ]; do
	i=$((i + 1))
	# validate exits 1 when it finds problems; the document is valid, but
	# the exit code is not what is measured here.
	/usr/bin/time -v "$tmp/openplaybook" validate "$tmp/big.json" >/dev/null 2>"$tmp/time.txt" || true
	kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$tmp/time.txt")
	wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time.txt")
	if [ -z "$kb" ]; then
		cat "$tmp/time.txt" >&2
		exit 3
	fi
	echo "run $i: max RSS $kb KiB ($(mb "$kb")), wall $wall"
	if [ -z "$best" ] || [ "$kb" -lt "$best" ]; then best=$kb; fi
done
echo "peak RSS, best of $runs: $best KiB ($(mb "$best")); target < 100 MB"
