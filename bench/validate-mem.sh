#!/bin/sh
# validate-mem.sh: peak memory (maximum resident set size, GNU time) and
# wall time of `openplaybook validate` on generated documents of about 6,
# 16, 32 and 64 MB (bench/gen -mb), for the code of this tree and for a
# baseline built from a git revision, measured alternately in one run.
# Target (BENCHMARKS.md, item 6): at most 4 MiB of peak memory per input
# MB, and time per MB no worse than the baseline's.
#
#	bench/validate-mem.sh                  # baseline HEAD, 3 runs of each
#	BASE=d715bd3 RUNS=5 bench/validate-mem.sh
#	SIZES="6 64" BASE=none bench/validate-mem.sh   # this tree only
#
# Reported per document and binary, best of RUNS (the smallest peak and
# the shortest wall time, each over all runs):
#   peak      maximum RSS, KiB and MiB
#   peak/MB   peak MiB divided by the document's size in MB (10^6 bytes)
#   ms/MB     wall milliseconds divided by the size in MB
# and per binary the slope, "MiB per input MB":
#   (peak(largest) - peak(smallest)) / (size(largest) - size(smallest)),
# which leaves out the process's fixed cost (binary, runtime, packages).
# Both binaries get --max-size 1GiB; a baseline without that flag is built
# with syntax.DefaultMaxSize raised to 1 GiB in its copy of the source
# (syntax/parse.go), its only limit on the document's size. Before timing,
# the two binaries' reports (--format json) of each document are compared
# and must be identical.
#
# Needs GNU time (/usr/bin/time -v; Debian/Ubuntu: apt-get install -y time).
set -eu
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
sizes=${SIZES:-6 16 32 64}
base=${BASE:-HEAD}
if ! /usr/bin/time -v true >/dev/null 2>&1; then
	echo "validate-mem.sh: GNU time is missing: apt-get install -y time" >&2
	exit 3
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/new" ./cmd/openplaybook
bins=new
if [ "$base" != none ]; then
	rev=$(git rev-parse --short "$base")
	mkdir "$tmp/src"
	git archive "$rev" | tar -x -C "$tmp/src"
	if ! grep -q 'max-size' "$tmp/src/cmd/openplaybook/cli/validate.go"; then
		sed -i 's/DefaultMaxSize   = 16 << 20/DefaultMaxSize   = 1 << 30/' "$tmp/src/syntax/parse.go"
		grep -q 'DefaultMaxSize   = 1 << 30' "$tmp/src/syntax/parse.go" || {
			echo "validate-mem.sh: cannot raise the size limit of $rev" >&2
			exit 3
		}
		touch "$tmp/base.patched"
	fi
	(cd "$tmp/src" && go build -o "$tmp/base" ./cmd/openplaybook)
	bins="new base"
fi
maxflag() { # binary
	if [ "$1" = base ] && [ -e "$tmp/base.patched" ]; then return; fi
	echo "--max-size 1GiB"
}

for s in $sizes; do
	go run ./bench/gen -mb "$s" -o "$tmp/d$s.json"
done
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(go version); $(nproc) CPUs"
echo "# new: this tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!BENCHMARKS.md' || echo ', modified'))"
[ "$base" = none ] || echo "# base: $rev$( [ -e "$tmp/base.patched" ] && echo ', DefaultMaxSize raised to 1 GiB')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$base" != none ]; then
	for s in $sizes; do
		for b in $bins; do
			# exit 1 means problems found; the documents are valid, but the
			# comparison is of the reports, whatever they are.
			"$tmp/$b" validate $(maxflag "$b") --format json "$tmp/d$s.json" >"$tmp/out.$b" 2>&1 || true
		done
		if ! cmp -s "$tmp/out.new" "$tmp/out.base"; then
			echo "validate-mem.sh: the reports on the $s MB document differ:" >&2
			diff "$tmp/out.base" "$tmp/out.new" | head -20 >&2
			exit 1
		fi
	done
	echo "# reports identical on every document"
fi

: >"$tmp/results"
i=0
while [ "$i" -lt "$runs" ]; do
	i=$((i + 1))
	for s in $sizes; do
		for b in $bins; do
			/usr/bin/time -v "$tmp/$b" validate $(maxflag "$b") "$tmp/d$s.json" >/dev/null 2>"$tmp/time.txt" || true
			kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$tmp/time.txt")
			wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time.txt")
			if [ -z "$kb" ]; then
				cat "$tmp/time.txt" >&2
				exit 3
			fi
			# wall is m:ss.cc or h:mm:ss
			secs=$(echo "$wall" | awk -F: '{t = 0; for (j = 1; j <= NF; j++) t = t * 60 + $j; print t}')
			echo "$b $s $(wc -c <"$tmp/d$s.json") $kb $secs" >>"$tmp/results"
		done
	done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

awk -v runs="$runs" '
{
	k = $1 " " $2
	if (!(k in kb) || $4 < kb[k]) kb[k] = $4
	if (!(k in t) || $5 < t[k]) t[k] = $5
	bytes[$2] = $3
	if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }
	bins[$1] = 1
}
END {
	printf "%-5s %-5s %12s %10s %9s %9s %8s\n", "MB", "bin", "bytes", "peak KiB", "peak MiB", "MiB/MB", "ms/MB"
	for (j = 1; j <= n; j++) {
		s = order[j]; mb = bytes[s] / 1e6
		for (b in bins) {
			k = b " " s
			printf "%-5s %-5s %12d %10d %9.1f %9.2f %8.1f\n", s, b, bytes[s], kb[k], kb[k] / 1024, kb[k] / 1024 / mb, t[k] * 1000 / mb
		}
	}
	lo = order[1]; hi = order[n]
	if (n > 1) {
		for (b in bins) {
			slope[b] = (kb[b " " hi] - kb[b " " lo]) / 1024 / ((bytes[hi] - bytes[lo]) / 1e6)
			printf "slope %s: %.2f MiB per input MB, (peak(%s MB) - peak(%s MB)) / %.1f MB; target <= 4\n", b, slope[b], hi, lo, (bytes[hi] - bytes[lo]) / 1e6
		}
	}
	if ("base" in bins) {
		printf "ratios new/base, best of %d:\n", runs
		printf "%-5s %8s %8s\n", "MB", "peak", "ms/MB"
		for (j = 1; j <= n; j++) {
			s = order[j]
			printf "%-5s %8.3f %8.3f\n", s, kb["new " s] / kb["base " s], t["new " s] / t["base " s]
		}
		if (n > 1) printf "slope  %8.3f\n", slope["new"] / slope["base"]
	}
}' "$tmp/results"
