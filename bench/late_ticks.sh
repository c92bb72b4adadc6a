#!/usr/bin/env bash
# bench/late_ticks.sh [RATE] [SECS] [rbpeek record flags...] - why ticks are
# late: records a spinning target (bench/targets.rb 10 1) at RATE Hz
# (default 10000) for SECS s (default 3) with --nonblocking while a tracefs
# instance of its own (never the global buffer) records timer, scheduler and
# interrupt events on a CPU_MONOTONIC clock, then bench/late_ticks.py sorts
# the late wake-ups into host / guest / sched (see there).  Also prints
# rbpeek's closing lines, the steal time /proc/stat counted meanwhile, and
# the load average.  Needs root and tracefs (/sys/kernel/tracing).
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
RATE=${1:-10000}; SECS=${2:-3}; shift 2 2>/dev/null || shift $#
TR=/sys/kernel/tracing
[ -d "$TR/instances" ] || { echo "late_ticks: no tracefs at $TR" >&2; exit 1; }
INST=$TR/instances/rbpeek-late-$$
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	[ -d "$INST" ] && { echo 0 > "$INST/tracing_on"; rmdir "$INST"; }
	rm -rf "$work"
}
trap cleanup EXIT
ruby bench/targets.rb 10 1 > "$work/ready" & pid=$!
for _ in $(seq 100); do grep -q ready "$work/ready" && break; sleep 0.05; done
mkdir "$INST"
echo mono > "$INST/trace_clock"
echo 32768 > "$INST/buffer_size_kb"
for e in timer/hrtimer_start timer/hrtimer_expire_entry sched/sched_switch sched/sched_wakeup \
	 irq/irq_handler_entry irq/softirq_entry irq_vectors/call_function_single_entry \
	 irq_vectors/irq_work_entry irq_vectors/reschedule_entry power/cpu_idle; do
	echo 1 > "$INST/events/$e/enable" 2>/dev/null || echo "late_ticks: no event $e" >&2
done
steal0=$(awk '/^cpu /{print $9}' /proc/stat)
echo 1 > "$INST/tracing_on"
"$RBPEEK" record --pid "$pid" -r "$RATE" -d "$SECS" --nonblocking -f raw -o /dev/null "$@" \
	2> "$work/err" & rb=$!
wait "$rb"
echo 0 > "$INST/tracing_on"
steal1=$(awk '/^cpu /{print $9}' /proc/stat)
cat "$INST/trace" > "$work/trace"
grep -E "late|own CPU" "$work/err" | sed 's/^rbpeek: //'
echo "steal time meanwhile: $(( (steal1 - steal0) * 10 )) ms (/proc/stat, both CPUs); load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/late_ticks.py "$work/trace" "$rb" "$(awk -v r="$RATE" 'BEGIN { print 1e6 / r }')"
