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
pids=()
trap 'kill ${pids[*]} 2>/dev/null' EXIT

start_target() {   # depth threads -> prints pid
	ruby bench/targets.rb "$1" "$2" > /tmp/rbpeek-bench.$$ &
	local pid=$!
	pids+=("$pid")
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

echo "== CPU per tick (rate 200 Hz, ${SECS} s, best of 3)"
printf "%-8s %-12s %12s\n" depth mode "us/tick"
for depth in 10 100 1000; do
	pid=$(start_target "$depth" 1)
	for mode in blocking nonblocking; do
		flag=(); [ $mode = nonblocking ] && flag=(--nonblocking)
		best=""
		for _ in 1 2 3; do
			read -r cpu ticks _ < <(record "$pid" 200 "${flag[@]}")
			us=$(awk -v c="$cpu" -v t="$ticks" 'BEGIN { if (t > 0) printf "%.1f", c * 1e6 / t }')
			[ -z "$best" ] || awk -v a="$us" -v b="$best" 'BEGIN { exit !(a < b) }' && best=$us
		done
		printf "%-8s %-12s %12s\n" "$depth" "$mode" "$best"
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
