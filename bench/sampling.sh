#!/usr/bin/env bash
# bench/sampling.sh - out-of-process sampling cost, measured on real Ruby
# targets: CPU time per sample at stack depths 10, 100 and 1,000 with 1, 10
# and 100 threads (blocking: the GVL holder stopped, as record does, or
# every thread, as top does; and --nonblocking; build/bench_walk), the
# highest rate sustained with under 1 % late ticks (default scheduling, then
# --no-realtime; bench/late_ticks.sh tells why ticks are late), and rbpeek's own CPU
# share and memory over an hour's worth of 100 Hz samples.  CPU time comes
# from the kernel (user + system); the machine may be noisy, so per-sample
# figures are the best of 3 runs.
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

# rbpeek's CPU seconds, ticks, late % and scheduling class of one recording.
record() {   # pid rate flags...
	local pid=$1 rate=$2; shift 2
	local out
	out=$("$RBPEEK" record --pid "$pid" -r "$rate" -d "$SECS" -f raw -o /dev/null "$@" 2>&1)
	local cpu ticks late sched
	cpu=$(echo "$out" | sed -n 's/.*own CPU \([0-9.]*\) s.*/\1/p')
	ticks=$(echo "$out" | sed -n 's/.* in \([0-9]*\) ticks.*/\1/p')
	late=$(echo "$out" | sed -n 's/.*late (\([0-9.]*\)%).*/\1/p')
	sched=$(echo "$out" | sed -n 's/.*scheduling: \(.*\)$/\1/p')
	echo "$cpu $ticks $late ${sched:-?}"
}

# CPU per sample: bench_walk attaches once and reads every thread's stack
# N times in a row, as a tick of record does (pausing the target around each
# read unless --nonblocking); its own thread's CPU time (user + system) per
# sample, best of 3.  N shrinks with the size of the stacks.
BENCH_WALK=${BENCH_WALK:-$(dirname "$RBPEEK")/bench_walk}
walk_us() {   # pid n flags... -> "us reads"
	local best="" reads="" line us
	for _ in 1 2 3; do
		line=$("$BENCH_WALK" "$@") || continue
		us=${line%% us/sample*}
		if [ -z "$best" ] || awk -v a="$us" -v b="$best" 'BEGIN { exit !(a < b) }'; then
			best=$us
			reads=$(sed -n 's/.*, \([0-9.]*\) reads\/sample.*/\1/p' <<<"$line")
		fi
	done
	echo "${best:-?} ${reads:-?}"
}

echo "== CPU per sample (us; every thread's stack, best of 3; blocking: GVL holder stopped / all stopped)"
printf "%-7s %-8s %12s %12s %12s %14s\n" depth threads blocking all-stopped nonblocking "reads/sample"
for depth in 10 100 1000; do
	for threads in 1 10 100; do
		pid=$(start_target "$depth" "$threads")
		n=$((200000 / (depth * threads)))
		((n > 2000)) && n=2000
		((n < 20)) && n=20
		read -r b _ < <(walk_us "$pid" "$n")
		read -r all _ < <(walk_us "$pid" "$n" --all)
		read -r nb reads < <(walk_us "$pid" "$n" --nonblocking)
		printf "%-7s %-8s %12s %12s %12s %14s\n" "$depth" "$threads" "$b" "$all" "$nb" "$reads"
		kill "$pid"
	done
done

# Default scheduling (real-time when allowed: as root), then --no-realtime.
echo "== highest rate with < 1% late ticks (depth 10, 1 thread, --nonblocking, ${SECS} s; load $(cut -d' ' -f1 /proc/loadavg))"
pid=$(start_target 10 1)
for flags in "" "--no-realtime"; do
	best=0
	for rate in 1000 2000 5000 10000 20000 50000; do
		read -r cpu ticks late sched < <(record "$pid" "$rate" --nonblocking $flags)
		printf "%6d Hz: %s ticks, %s%% late, %s s CPU, scheduling %s\n" "$rate" "$ticks" "$late" "$cpu" "$sched"
		awk -v l="$late" 'BEGIN { exit !(l < 1) }' && best=$rate
	done
	echo "highest sustained${flags:+ ($flags)}: $best Hz"
done
kill "$pid"

# An hour of 100 Hz is 360,000 samples; recorded here at LONG_RATE for
# 360,000 / LONG_RATE seconds (default 2,000 Hz: 3 minutes), nonblocking.
LONG_SAMPLES=${LONG_SAMPLES:-360000}
LONG_RATE=${LONG_RATE:-2000}
secs=$((LONG_SAMPLES / LONG_RATE))
echo "== ${LONG_SAMPLES} samples (an hour at 100 Hz) recorded at ${LONG_RATE} Hz for ${secs} s (depth 10, 1 thread, --nonblocking)"
pid=$(start_target 10 1)
out=$("$RBPEEK" record --pid "$pid" -r "$LONG_RATE" -d "$secs" --nonblocking -f raw -o /dev/null 2>&1)
grep -E "samples in|own CPU" <<<"$out" | sed 's/^rbpeek: //'
kill "$pid"
