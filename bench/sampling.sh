#!/usr/bin/env bash
# bench/sampling.sh - out-of-process sampling cost, measured on real Ruby
# targets: rbpeek's CPU time per tick at stack depths 10, 100 and 1,000 (one
# thread; blocking and --nonblocking), and the highest rate sustained with
# under 1 % late ticks.  CPU time comes from the kernel (rbpeek's utime +
# stime, as rbpeek reports it); the machine may be noisy, so each figure is
# the best of 3 runs.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
SECS=${SECS:-3}
# Targets are started inside $(...), so their PIDs are kept in a file for
# the cleanup trap (a variable set in the subshell would be lost).
pidfile=$(mktemp)
trap 'xargs -r kill < "$pidfile" 2>/dev/null; rm -f "$pidfile" /tmp/rbpeek-bench.$$' EXIT

start_target() {   # depth threads -> prints pid
	ruby bench/targets.rb "$1" "$2" > /tmp/rbpeek-bench.$$ &
	local pid=$!
	echo "$pid" >> "$pidfile"
	for _ in $(seq 100); do grep -q ready /tmp/rbpeek-bench.$$ 2>/dev/null && break; sleep 0.05; done
	echo "$pid"
}

# rbpeek's CPU seconds and the stats line of one recording.
record() {   # pid rate flags...
	local pid=$1 rate=$2; shift 2
	local out
	out=$("$RBPEEK" record --pid "$pid" -r "$rate" -d "$SECS" -f raw -o /dev/null "$@" 2>&1)
	local cpu ticks late
	cpu=$(echo "$out" | sed -n 's/.*own CPU \([0-9.]*\) s.*/\1/p')
	ticks=$(echo "$out" | sed -n 's/.* in \([0-9]*\) ticks.*/\1/p')
	late=$(echo "$out" | sed -n 's/.*late (\([0-9.]*\)%).*/\1/p')
	echo "$cpu $ticks $late"
}

# Marginal cost: (CPU of a 2*SECS recording - CPU of a SECS one) / extra
# ticks, so start-up work (attaching, reading symbols, writing the file) is
# not counted per tick.
echo "== CPU per tick (rate 200 Hz, marginal between ${SECS} s and $((2 * SECS)) s, best of 3)"
printf "%-8s %-12s %12s\n" depth mode "us/tick"
for depth in 10 100 1000; do
	pid=$(start_target "$depth" 1)
	for mode in blocking nonblocking; do
		flag=(); [ $mode = nonblocking ] && flag=(--nonblocking)
		best=""
		for _ in 1 2 3; do
			read -r cpu1 ticks1 _ < <(SECS=$SECS record "$pid" 200 "${flag[@]}")
			read -r cpu2 ticks2 _ < <(SECS=$((2 * SECS)) record "$pid" 200 "${flag[@]}")
			us=$(awk -v a="$cpu1" -v b="$cpu2" -v s="$ticks1" -v t="$ticks2" \
				'BEGIN { if (t > s) printf "%.1f", (b - a) * 1e6 / (t - s) }')
			[ -n "$us" ] || continue
			[ -z "$best" ] || awk -v a="$us" -v b="$best" 'BEGIN { exit !(a < b) }' && best=$us
		done
		printf "%-8s %-12s %12s\n" "$depth" "$mode" "${best:-?}"
	done
	kill "$pid"
done

echo "== highest rate with < 1% late ticks (depth 10, 1 thread, --nonblocking, ${SECS} s)"
pid=$(start_target 10 1)
best=0
for rate in 1000 2000 5000 10000 20000 50000; do
	read -r _ ticks late < <(record "$pid" "$rate" --nonblocking)
	printf "%6d Hz: %s ticks, %s%% late\n" "$rate" "$ticks" "$late"
	awk -v l="$late" 'BEGIN { exit !(l < 1) }' && best=$rate
done
echo "highest sustained: $best Hz"
