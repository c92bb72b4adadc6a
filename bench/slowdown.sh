#!/usr/bin/env bash
# bench/slowdown.sh - how much a profiler slows the program it watches, on a
# quiet machine and on one whose CPUs are oversubscribed.
#
# bench/workload.rb does a fixed amount of CPU-bound work (calibrated once
# to WORK seconds) and times itself.  Each run starts it, attaches the
# profiler to it by PID (`record --pid P`, as on a production host) and
# waits for it to finish.  Per scenario, the configurations are alternated
# within each of REPS rounds, "none" (no profiler) among them; a
# configuration's slowdown is the median over the rounds of its time over
# "none"'s time in the same round (wall clock: what a user waits, stops
# included).  Besides, per configuration: the median of the target's own
# CPU seconds, of its main thread's run-queue wait (/proc/thread-self/
# schedstat: time runnable but not running), and from rbpeek's closing
# line the ticks that stopped a thread and the held time.
#
# Scenarios: quiet (no extra load) and busy: NPROC+1 CPU-bound neighbours
# (shell loops) for the whole scenario -- a host just past full, where a
# stopped thread loses its CPU to a neighbour and waits for its slice.
#
# Configurations (rate RATE, 100 Hz):
#   none           no profiler
#   default        rbpeek record: reads without stopping, verified
#   nonblocking    --nonblocking: never stops
#   stop           --stop: stops the GVL's holder every tick (the old default)
#   bpf            --sampler=bpf (skipped when eBPF cannot be loaded)
#   on-cpu         --on-cpu (stops the runnable threads every tick)
#   rbspy          RBSPY=/path/to/rbspy: `rbspy record --pid P -r RATE`
#                  (rbspy is not part of rbpeek: build it yourself)
#   peer           RBPEEK_PEER=/path/to/rbpeek: another build, default mode
#
# Environment: RBPEEK (build/rbpeek), WORK (2 s), REPS (5), RATE (100),
# SCENARIOS ("quiet busy"), CONFIGS (all of the above that can run).
# The load average before and after each scenario is printed: the machine
# this runs on may be busy with other work too.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
WORK=${WORK:-2}
REPS=${REPS:-5}
RATE=${RATE:-100}
PEER=${RBPEEK_PEER:-}
RBSPY=${RBSPY:-}
tmp=$(mktemp -d)
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; hogs=(); }
trap 'stop_hogs; rm -rf "$tmp"' EXIT

rounds=$(ruby bench/workload.rb "$WORK" | sed -n 's/^rounds \([0-9]*\) .*/\1/p')
[ -n "$rounds" ] || { echo "slowdown: workload calibration failed" >&2; exit 1; }

if [ -z "${CONFIGS:-}" ]; then
	CONFIGS="none default nonblocking stop bpf on-cpu"
	# eBPF allowed here?  One short recording of a sleeping Ruby says.
	ruby -e 'sleep 3' & sp=$!
	"$RBPEEK" record --pid $sp --sampler=bpf -d 0.3 -f collapsed -o "$tmp/probe.txt" --no-raw \
		--silent 2>"$tmp/probe.err"
	grep -qi "falls\? back\|fallback\|not allowed\|cannot" "$tmp/probe.err" &&
		CONFIGS=${CONFIGS/ bpf/} && echo "(--sampler=bpf not available here: $(head -1 "$tmp/probe.err"))"
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
	[ -n "$RBSPY" ] && CONFIGS="$CONFIGS rbspy"
	[ -n "$PEER" ] && CONFIGS="$CONFIGS peer"
fi

# One run: prints "wall cpu wait stopped held_us" (stopped/held: "-" when not rbpeek's).
run() {
	local cfg=$1 pid prof=() bin=$RBPEEK
	BENCH_ROUNDS=$rounds ruby bench/workload.rb >"$tmp/out" &
	pid=$!
	case $cfg in
	none) ;;
	default) prof=(record) ;;
	nonblocking) prof=(record --nonblocking) ;;
	stop) prof=(record --stop) ;;
	bpf) prof=(record --sampler=bpf) ;;
	on-cpu) prof=(record --on-cpu) ;;
	peer) bin=$PEER prof=(record) ;;
	esac
	: >"$tmp/err"
	if [ "$cfg" = rbspy ]; then
		sleep 0.3
		"$RBSPY" record --pid "$pid" -r "$RATE" --silent --format collapsed \
			-f "$tmp/rbspy.txt" >/dev/null 2>"$tmp/err" &
	elif [ ${#prof[@]} -gt 0 ]; then
		sleep 0.3   # attached while the workload waits its 1 s
		"$bin" "${prof[@]}" --pid "$pid" -r "$RATE" -f collapsed -o "$tmp/prof.txt" --no-raw \
			2>"$tmp/err" &
	fi
	wait "$pid"
	wait   # the profiler ends with its target
	local st held
	st=$(sed -n 's/.*; \([0-9]*\) ticks stopped a thread.*/\1/p' "$tmp/err")
	held=$(sed -n 's/.*threads held stopped \([0-9]*\)\/.*/\1/p' "$tmp/err")
	sed -n 's/^rounds [0-9]* seconds \([0-9.]*\) cpu \([0-9.]*\) wait \([0-9.]*\)$/\1 \2 \3/p' "$tmp/out" |
		sed "s/\$/ ${st:--} ${held:--}/"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

ncpu=$(nproc)
for scenario in ${SCENARIOS:-quiet busy}; do
	stop_hogs
	neighbours=0
	[ "$scenario" = busy ] && neighbours=$((ncpu + 1))
	for _ in $(seq "$neighbours"); do sh -c 'while :; do :; done' & hogs+=($!); done
	sleep 1
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	declare -A ratio=() cpu=() wait=() stops=() held=() wall=()
	for _ in $(seq "$REPS"); do
		declare -A this=()
		for cfg in $CONFIGS; do
			read -r w c q s h < <(run "$cfg")
			[ -n "${w:-}" ] || continue
			this[$cfg]=$w
			wall[$cfg]+="$w "; cpu[$cfg]+="$c "; wait[$cfg]+="$q "
			[ "$s" != - ] && stops[$cfg]+="$s "
			[ "$h" != - ] && held[$cfg]+="$h "
		done
		for cfg in $CONFIGS; do
			[ -n "${this[$cfg]:-}" ] && [ -n "${this[none]:-}" ] &&
				ratio[$cfg]+="$(awk -v a="${this[$cfg]}" -v b="${this[none]}" 'BEGIN { printf "%.5f", a / b - 1 }') "
		done
		unset this
	done
	echo "== $scenario: $neighbours CPU-bound neighbours on $ncpu CPUs, ${RATE} Hz, workload ~${WORK} s," \
		"median of $REPS rounds; load average $load0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
	printf "%-12s %10s %10s %9s %10s %13s %9s\n" config slowdown wall cpu "rq wait" "ticks stopped" "held us"
	for cfg in $CONFIGS; do
		m() { tr ' ' '\n' <<<"$1" | grep . | median; }
		r=$(m "${ratio[$cfg]:-}")
		printf "%-12s %10s %10s %9s %10s %13s %9s\n" "$cfg" \
			"$(awk -v r="$r" 'BEGIN { if (r != "") printf "%+.1f%%", r * 100 }')" \
			"$(m "${wall[$cfg]:-}")" "$(m "${cpu[$cfg]:-}")" "$(m "${wait[$cfg]:-}")" \
			"$(m "${stops[$cfg]:-}")" "$(m "${held[$cfg]:-}")"
	done
	unset ratio cpu wait stops held wall
done
