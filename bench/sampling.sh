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
#
# `bench/sampling.sh apps` runs only the last part, "what a tick costs on a
# real application": examples/app.rb (4 threads, shallow stacks),
# bench/railsish.rb (9 threads, 60-100 frames, ~1,000 methods) and the
# synthetic bench/targets.rb with as many threads and frames, each recorded
# blocking, --nonblocking and --on-cpu: rbpeek's own CPU per tick (user +
# system over the whole run, attach included) and how long threads were
# held stopped (avg/max, and ticks let go at the --max-hold bound).  With
# RBPEEK_PEER=another/rbpeek (e.g. a build of main) each recording is made
# by both, one after the other against the same process, and the ratio
# printed.  LOAD=N runs N CPU-bound loops meanwhile (default 0: the machine
# as it is).
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

# ---- what a tick costs on a real application ----
APP_SECS=${APP_SECS:-5}
PEER=${RBPEEK_PEER:-}
hogs=()
start_app() {   # command... (prints "ready" or "processing orders") -> pid
	"$@" > /tmp/rbpeek-bench.$$ 2>&1 &
	local pid=$!
	echo "$pid" >> "$pidfile"
	for _ in $(seq 200); do grep -qE '^(ready|processing orders)' /tmp/rbpeek-bench.$$ 2>/dev/null && break; sleep 0.05; done
	sleep 1   # past start-up
	echo "$pid"
}
# "us/tick held_avg held_max let_go" of one recording
tick_cost() {   # rbpeek pid flags...
	local bin=$1 pid=$2; shift 2
	local out
	out=$("$bin" record --pid "$pid" -d "$APP_SECS" -f raw -o /dev/null "$@" 2>&1)
	local us held letgo
	us=$(sed -n 's/.*, \([0-9.]*\) us per tick).*/\1/p' <<<"$out")
	held=$(sed -n 's/.*threads held stopped \([0-9]*\)\/\([0-9]*\) us.*/\1 \2/p' <<<"$out")
	letgo=$(sed -n 's/.*, \([0-9]*\) let go at the.*/\1/p' <<<"$out")
	echo "${us:-?} ${held:-- -} ${letgo:--}"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
apps() {
	local n=${LOAD:-0}
	for _ in $(seq "$n"); do sh -c 'while :; do :; done' & hogs+=($!); echo "$!" >> "$pidfile"; done
	echo "== what a tick costs on a real application (${APP_SECS} s at 100 Hz each; LOAD=$n extra loops; load $(cut -d' ' -f1 /proc/loadavg))"
	echo "   us/tick: rbpeek's own CPU per tick; held: threads held stopped avg/max us; let go: ticks let go at the bound"
	printf "%-22s %-14s %9s %9s %6s %16s %16s %7s\n" target mode us/tick peer ratio held peer-held "let go"
	local name
	for name in app railsish synthetic; do
		local pid
		case $name in
		app) pid=$(start_app ruby examples/app.rb 600) ;;
		railsish) pid=$(start_app ruby bench/railsish.rb 8) ;;
		synthetic) pid=$(start_app ruby bench/targets.rb 80 9) ;;
		esac
		local label="$name ($(ls /proc/"$pid"/task | wc -l) threads)"
		for mode in blocking --nonblocking --on-cpu; do
			local flags=()
			[ "$mode" = blocking ] || flags=("$mode")
			read -r us ha hm lg < <(tick_cost "$RBPEEK" "$pid" "${flags[@]}")
			local pus="-" pha="-" phm="-"
			[ -n "$PEER" ] && read -r pus pha phm _ < <(tick_cost "$PEER" "$pid" "${flags[@]}")
			printf "%-22s %-14s %9s %9s %6s %16s %16s %7s\n" "$label" "$mode" "$us" "$pus" \
				"$(ratio "$us" "$pus")" "$ha/$hm" "$pha/$phm" "$lg"
		done
		kill "$pid"
	done
	[ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}"
}
if [ "${1:-}" = apps ]; then
	apps
	exit 0
fi

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
apps
