#!/bin/bash
# echo.sh: the per-call cost of an MCP tool call through `openplaybook run`
# against a direct go-sdk client, as whole processes (BENCHMARKS.md, "MCP
# echo calls, direct vs through openplaybook").
#
#	bench/echo.sh                # N=1000, 7 runs of each
#	N=2000 RUNS=11 bench/echo.sh
#	OPB_BASE=/tmp/opb-old bench/echo.sh   # also time another openplaybook build
#	TOOLS_CHECK=on-change bench/echo.sh    # the server's toolsCheck in the harness (default every-call)
#
# Both programs start @modelcontextprotocol/server-everything over stdio
# (node .../dist/index.js stdio; run npm ci first) and call its echo tool N
# times, one call after the other; openplaybook does it through the
# transcript driver. Each is timed for 0 and N calls, so that
# (t(N) - t(0)) / N is the per-call cost without start-up. Each
# openplaybook run starts from an empty store (store.db is removed before
# it, outside the timing). Times are medians of RUNS rounds, each round
# timing every program once (date +%s%N), after a warm-up round.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
n=${N:-1000}
runs=${RUNS:-7}
# PRELOAD=none times the server as it is; see bench/echo/exit-on-eof.cjs.
preload=${PRELOAD:-$root/bench/echo/exit-on-eof.cjs}
[ "$preload" = none ] && preload=

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/openplaybook" ./cmd/openplaybook
go build -o "$tmp/direct" ./bench/echo/direct
for k in 0 "$n"; do
	go run ./bench/echo/gen -n "$k" -dir "$tmp/n$k" -root "$root" -preload "$preload" -tools-check "${TOOLS_CHECK:-every-call}"
	# The run must pass what it would refuse to run without.
	"$tmp/openplaybook" validate "$tmp/n$k/echo.json" >/dev/null
	"$tmp/openplaybook" check --harness "$tmp/n$k/harness.yaml" "$tmp/n$k/echo.json" >/dev/null
	"$tmp/openplaybook" pin --harness "$tmp/n$k/harness.yaml" "$tmp/n$k/echo.json" >/dev/null 2>&1 ||
		{ echo "echo.sh: the embedded echo definition is not what server-everything lists; see openplaybook pin" >&2; exit 1; }
	# One run to see it completes with k calls.
	out=$("$tmp/openplaybook" run --harness "$tmp/n$k/harness.yaml" --input '{}' "$tmp/n$k/echo.json" 2>&1) || true
	case $out in *"step echo finished ($k tool call"*"completed"*) ;; *)
		echo "echo.sh: the run with $k calls did not make them:" >&2
		echo "$out" | tail -5 >&2
		exit 1
		;;
	esac
done

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(go version); $(nproc) CPUs; commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +dirty)"
echo "# server preload: ${preload:-none}"
echo "# before: $(uptime)"

# cmd_<label> is what is timed; prep_<label> runs before each timing.
cmd_direct0="$tmp/direct -preload=$preload -n 0"
cmd_directN="$tmp/direct -preload=$preload -n $n"
cmd_opb0="$tmp/openplaybook run --harness $tmp/n0/harness.yaml --input {} $tmp/n0/echo.json"
cmd_opbN="$tmp/openplaybook run --harness $tmp/n$n/harness.yaml --input {} $tmp/n$n/echo.json"
base=${OPB_BASE:-}
cmd_base0="$base run --harness $tmp/n0/harness.yaml --input {} $tmp/n0/echo.json"
cmd_baseN="$base run --harness $tmp/n$n/harness.yaml --input {} $tmp/n$n/echo.json"
prep_base0="rm -f $tmp/n0/store.db"
prep_baseN="rm -f $tmp/n$n/store.db"
prep_direct0=true
prep_directN=true
prep_opb0="rm -f $tmp/n0/store.db"
prep_opbN="rm -f $tmp/n$n/store.db"

declare -A med low times
# Round-robin: each round times every label once, in turn, so that a load
# change on this shared machine hits all programs alike (a label's runs
# in a row, as hyperfine would time them, let a change of load land on
# one program only). Round 0 is a warm-up.
labels="direct0 opb0 directN opbN"
[ -n "$base" ] && labels="direct0 opb0 base0 directN opbN baseN"
for ((i = 0; i <= runs; i++)); do
	for l in $labels; do
		c="cmd_$l" p="prep_$l"
		${!p}
		t0=$(date +%s%N)
		${!c} >/dev/null 2>&1 </dev/null
		t1=$(date +%s%N)
		((i > 0)) && times[$l]+="$((t1 - t0)) "
	done
done
for l in $labels; do
	med[$l]=$(printf '%s\n' ${times[$l]} | sort -n | awk '{a[NR]=$1} END {printf "%.6f", a[int((NR+1)/2)]/1e9}')
	low[$l]=$(printf '%s\n' ${times[$l]} | sort -n | awk 'NR==1 {printf "%.6f", $1/1e9}')
done

echo "# after: $(uptime)"
row() { # name, t0 median, tN median, t0 min, tN min
	awk -v name="$1" -v n="$n" -v a="$2" -v b="$3" -v c="$4" -v d="$5" \
		'BEGIN {printf "%-24s %9.3f %9.3f %14.3f %14.3f\n", name, a, b, (b - a) / n * 1e3, (d - c) / n * 1e3}'
}
per() { awk -v n="$n" -v a="$1" -v b="$2" 'BEGIN {printf "%.6f", (b - a) / n}'; }
ratio() { # name, label
	awk -v name="$1" -v o="$(per "${med[${2}0]}" "${med[${2}N]}")" -v d="$(per "${med[direct0]}" "${med[directN]}")" \
		-v lo="$(per "${low[${2}0]}" "${low[${2}N]}")" -v ld="$(per "${low[direct0]}" "${low[directN]}")" \
		'BEGIN {printf "%-24s %9s %9s %13.2fx %13.2fx   (target <= 1.5x)\n", name, "", "", o / d, lo / ld}'
}
printf "%-24s %9s %9s %14s %14s\n" "program ($runs runs)" "t(0) s" "t($n) s" "per call ms" "per call (min)"
row "direct go-sdk client" "${med[direct0]}" "${med[directN]}" "${low[direct0]}" "${low[directN]}"
row "openplaybook run" "${med[opb0]}" "${med[opbN]}" "${low[opb0]}" "${low[opbN]}"
[ -n "$base" ] && row "openplaybook run (base)" "${med[base0]}" "${med[baseN]}" "${low[base0]}" "${low[baseN]}"
ratio "ratio" opb
[ -n "$base" ] && ratio "ratio (base)" base
echo "# t(0), t($n): medians; per call: (t($n) - t(0)) / $n of the medians, and of the minimums"
