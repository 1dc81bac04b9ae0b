#!/bin/sh
# startup.sh: CPU (user + system) of `openplaybook validate` on a small
# document against actionlint's on a small workflow, as whole processes,
# interleaved in one run. Target (issue 20, BENCHMARKS.md): at most 2x.
#
#	bench/startup.sh                       # 9 rounds of 20 processes each
#	ROUNDS=15 BATCH=40 bench/startup.sh
#	DOC=examples/churn-watch.json bench/startup.sh
#	OPB_BASE=/path/to/an/older/openplaybook bench/startup.sh   # also time it
#
# Needs actionlint on PATH or in $(go env GOPATH)/bin:
#	go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
# and GNU time (/usr/bin/time; Debian: apt-get install -y time).
# Each round runs BATCH processes of each binary in turn; a round's figure
# is the batch's user + system seconds divided by BATCH. Reported: the
# median and the minimum over rounds, and their ratios to actionlint's.
set -eu
if [ "${1:-}" = __batch ]; then # __batch NAME ACTIONLINT TMP BATCH: one timed batch
	i=0
	while [ "$i" -lt "$5" ]; do
		i=$((i + 1))
		if [ "$2" = actionlint ]; then "$3" "$4/wf.yml" >/dev/null; else "$4/$2" validate "$4/doc.json" >/dev/null; fi
	done
	exit 0
fi
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-9}
batch=${BATCH:-20}
doc=${DOC:-examples/meeting-notes.json}
al=$(command -v actionlint || echo "$(go env GOPATH)/bin/actionlint")
[ -x "$al" ] || { echo "startup.sh: actionlint missing: go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12" >&2; exit 3; }
/usr/bin/time -f %U true >/dev/null 2>&1 || { echo "startup.sh: GNU time is missing" >&2; exit 3; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/new" ./cmd/openplaybook
cat >"$tmp/wf.yml" <<'YML'
name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: go test ./...
YML
cp "$doc" "$tmp/doc.json"
"$tmp/new" validate "$tmp/doc.json" >/dev/null
"$al" "$tmp/wf.yml"
cmds="new"
[ -z "${OPB_BASE:-}" ] || { cp "$OPB_BASE" "$tmp/base"; "$tmp/base" validate "$tmp/doc.json" >/dev/null; cmds="new base"; }
cmds="$cmds actionlint"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; load before $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# new: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!BENCHMARKS.md' || echo ', modified'); doc $doc; actionlint $("$al" -version | head -1)"
: >"$tmp/res"
r=0
while [ "$r" -lt "$rounds" ]; do
	r=$((r + 1))
	for n in $cmds; do
		/usr/bin/time -f '%U %S %e' -o "$tmp/t" sh "$0" __batch "$n" "$al" "$tmp" "$batch"
		echo "$n $(cat "$tmp/t")" >>"$tmp/res"
	done
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v b="$batch" '
{ cpu = ($2 + $3) / b * 1000; v[$1, ++n[$1]] = cpu; w[$1, n[$1]] = $4 / b * 1000; if (!($1 in seen)) { seen[$1] = 1; ord[++k] = $1 } }
function med(a, name, m,   i, j, t, x) { for (i = 1; i <= m; i++) x[i] = a[name, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
	lo[name] = x[1]; return (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2 }
END {
	for (i = 1; i <= k; i++) { c = ord[i]; mc[c] = med(v, c, n[c]); mn[c] = lo[c]; mw[c] = med(w, c, n[c]) }
	printf "%-11s %12s %12s %12s %10s %10s\n", "binary", "CPU ms med", "CPU ms min", "wall ms med", "ratio med", "ratio min"
	for (i = 1; i <= k; i++) { c = ord[i]
		printf "%-11s %12.2f %12.2f %12.2f %10.2f %10.2f\n", c, mc[c], mn[c], mw[c], mc[c] / mc["actionlint"], mn[c] / mn["actionlint"] }
}' "$tmp/res"
