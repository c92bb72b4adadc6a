#!/usr/bin/env bash
# bench/heap.sh - how long `rbpeek heap` holds a Ruby process stopped, per
# million heap slots, next to the in-process peer: the same process timing
# its own ObjectSpace.count_objects (which walks the same slots), measured
# in the same run.  Targets hold about 1 and 3 million objects (host ruby).
# Timing is noisy on a shared machine: each figure is the best of 5 runs.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
out=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$out"' EXIT

printf "%-9s %10s %14s %16s %16s %8s\n" objects slots "pause ms" "pause ms/Mslot" "count_objects ms" ratio
for millions in 1 3; do
	ruby bench/heap_target.rb "$millions" > "$out" &
	pid=$!
	for _ in $(seq 600); do grep -q ready "$out" && break; sleep 0.1; done
	best_pause= best_peer= slots=
	for _ in 1 2 3 4 5; do
		json=$("$RBPEEK" heap --pid "$pid" --json --top 1) || { echo "rbpeek heap failed"; exit 1; }
		pause=$(echo "$json" | sed -n 's/.*"pause_ms":\([0-9.]*\).*/\1/p')
		slots=$(echo "$json" | sed -n 's/.*"slots":\([0-9]*\),"free.*/\1/p')
		# the target appends one line per USR2 (never truncate: it keeps its offset)
		before=$(grep -c count_objects "$out")
		kill -USR2 "$pid"
		for _ in $(seq 200); do [ "$(grep -c count_objects "$out")" -gt "$before" ] && break; sleep 0.05; done
		peer=$(awk '/count_objects/ { v = $2 * 1000 } END { print v }' "$out")
		[ -z "$best_pause" ] || awk -v a="$pause" -v b="$best_pause" 'BEGIN { exit !(a < b) }' && best_pause=$pause
		[ -z "$best_peer" ] || awk -v a="$peer" -v b="$best_peer" 'BEGIN { exit !(a < b) }' && best_peer=$peer
	done
	awk -v m="$millions" -v s="$slots" -v p="$best_pause" -v q="$best_peer" 'BEGIN {
		printf "%-9s %10d %14.1f %16.1f %16.1f %8.2f\n", m "M", s, p, p / (s / 1e6), q, p / q }'
	kill "$pid"; wait "$pid" 2>/dev/null; pid=
done
