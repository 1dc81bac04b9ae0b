#!/bin/sh
# best.sh: the best result of each benchmark in `go test -bench` output
# (bench/run.sh's, for instance): the lowest ns/op, and for benchmarks
# that report calls/s the highest calls/s, with how many runs there were.
#
#	bench/run.sh | tee bench.out; bench/best.sh bench.out
exec awk '
/^Benchmark/ || / Benchmark[^ ]*-[0-9]+ / {
	for (i = 1; i <= NF; i++) if ($i ~ /^Benchmark/) break
	name = $i; ns = ""; cps = ""
	for (j = i + 1; j <= NF; j++) {
		if ($j == "ns/op") ns = $(j - 1)
		if ($j == "calls/s") cps = $(j - 1)
	}
	if (ns == "") next
	if (!(name in runs)) order[++n] = name
	runs[name]++
	if (!(name in best) || ns + 0 < best[name] + 0) best[name] = ns
	if (cps != "" && (!(name in bestc) || cps + 0 > bestc[name] + 0)) bestc[name] = cps
}
END {
	for (k = 1; k <= n; k++) {
		name = order[k]
		line = sprintf("%-60s best of %2d: %14s ns/op", name, runs[name], best[name])
		if (name in bestc) line = line sprintf("  %8s calls/s", bestc[name])
		print line
	}
}' "$@"
