#!/usr/bin/env bash
# bench/subprocesses.sh - what following child processes costs rbpeek, in
# instructions (valgrind --tool=callgrind: not disturbed by the machine's
# load; the kernel's own work for the /proc reads is not counted).
#
# One single-threaded target (bench/targets.rb, depth 10) recorded for SECS
# seconds at 100 Hz, plain and with --subprocesses (no children: the cost
# is the /proc scans alone).  Printed: instructions per tick of each, the
# scans' share (rbp_procset_refresh, inclusive), and the marginal cost of a
# scan after the first (from runs of SECS and 2*SECS seconds).
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
SECS=${SECS:-3}
command -v valgrind >/dev/null || { echo "valgrind not installed"; exit 0; }
work=$(mktemp -d)
trap '[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

ruby bench/targets.rb 10 1 > "$work/ready" &
pid=$!
for _ in $(seq 100); do grep -q ready "$work/ready" 2>/dev/null && break; sleep 0.05; done

# total Ir, ticks, procset_refresh inclusive Ir, its calls
measure() {   # name flags...
	local name=$1; shift
	local err secs=${SECS}
	err=$(valgrind --tool=callgrind --callgrind-out-file="$work/$name.cg" "$RBPEEK" record \
		--pid "$pid" -r 100 -d "$secs" -f collapsed -o "$work/$name.txt" "$@" 2>&1)
	local ticks total refresh
	ticks=$(echo "$err" | sed -n 's/.* in \([0-9]*\) ticks.*/\1/p')
	total=$(callgrind_annotate "$work/$name.cg" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
	refresh=$(callgrind_annotate --inclusive=yes "$work/$name.cg" 2>/dev/null |
		sed -n 's/^ *\([0-9,]*\) .*:rbp_procset_refresh .*/\1/p' | head -1 | tr -d ,)
	echo "$ticks ${total:-0} ${refresh:-0}"
}

read -r t1 i1 _ < <(measure plain)
read -r t2 i2 r2 < <(measure subproc --subprocesses)
read -r t3 i3 r3 < <(SECS=$((2 * SECS)) measure subproc2 --subprocesses)
nproc=$(ls /proc | grep -c '^[0-9]')
echo "== --subprocesses cost (100 Hz, $nproc processes in /proc; callgrind instructions)"
awk -v t1="$t1" -v i1="$i1" -v t2="$t2" -v i2="$i2" -v r2="$r2" -v r3="$r3" -v s="$SECS" 'BEGIN {
	printf "plain:                    %9.0f instructions per tick (%d ticks)\n", i1 / t1, t1
	printf "--subprocesses:           %9.0f instructions per tick (%d ticks)\n", i2 / t2, t2
	printf "scans, %d s:               %9.0f instructions (%.1f%% of the run)\n", s, r2, 100 * r2 / i2
	# the first scan reads every process once; later ones only list /proc
	printf "per later scan (marginal): %9.0f instructions (4 scans a second)\n", (r3 - r2) / (4 * s)
}'
