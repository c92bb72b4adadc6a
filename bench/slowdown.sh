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
# Scenarios: quiet (no extra load), busy: NPROC+1 CPU-bound neighbours
# (shell loops) for the whole scenario -- a host just past full, where a
# stopped thread loses its CPU to a neighbour and waits for its slice --
# and side-by-side: every configuration's target at once in each round
# (no extra neighbours: they oversubscribe the CPUs themselves), so that
# all meet the same machine at the same moments; on a machine that other
# work loads unevenly, the only one whose differences are not noise.
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
# SCENARIOS ("quiet busy side-by-side"), CONFIGS (all of the above that can run).
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

# Start cfg's workload (files $tmp/$cfg.*); its pid in tpid[cfg].
start_target() {
	BENCH_ROUNDS=$rounds ruby bench/workload.rb >"$tmp/$1.out" &
	tpid[$1]=$!
}

# Attach cfg's profiler to its workload (which waits 1 s before working).
start_profiler() {
	local cfg=$1 prof=() bin=$RBPEEK pid=${tpid[$1]}
	case $cfg in
	none) return ;;
	default) prof=(record) ;;
	nonblocking) prof=(record --nonblocking) ;;
	stop) prof=(record --stop) ;;
	bpf) prof=(record --sampler=bpf) ;;
	on-cpu) prof=(record --on-cpu) ;;
	peer) bin=$PEER prof=(record) ;;
	esac
	: >"$tmp/$cfg.err"
	if [ "$cfg" = rbspy ]; then
		"$RBSPY" record --pid "$pid" -r "$RATE" --silent --format collapsed \
			-f "$tmp/$cfg.txt" >/dev/null 2>"$tmp/$cfg.err" &
	else
		"$bin" "${prof[@]}" --pid "$pid" -r "$RATE" -f collapsed -o "$tmp/$cfg.txt" --no-raw \
			2>"$tmp/$cfg.err" &
	fi
}

# A finished run of cfg: "wall cpu wait stopped held_us" (stopped/held: "-" when not rbpeek's).
result() {
	local cfg=$1 st held
	st=$(sed -n 's/.*; \([0-9]*\) ticks stopped a thread.*/\1/p' "$tmp/$cfg.err" 2>/dev/null)
	held=$(sed -n 's/.*threads held stopped \([0-9]*\)\/.*/\1/p' "$tmp/$cfg.err" 2>/dev/null)
	sed -n 's/^rounds [0-9]* seconds \([0-9.]*\) cpu \([0-9.]*\) wait \([0-9.]*\)$/\1 \2 \3/p' "$tmp/$cfg.out" |
		sed "s/\$/ ${st:--} ${held:--}/"
}

declare -A tpid
# One round: each configuration in turn (the others not running), or in the
# side-by-side scenario all at once, so that every target meets the same
# machine at the same moments (on a machine others load, the fairest
# comparison; the targets themselves oversubscribe the CPUs).
round() {
	local together=$1 cfg
	if ((together)); then
		for cfg in $CONFIGS; do start_target "$cfg"; done
		sleep 0.3
		for cfg in $CONFIGS; do start_profiler "$cfg"; done
		wait
	else
		for cfg in $CONFIGS; do
			start_target "$cfg"
			sleep 0.3
			start_profiler "$cfg"
			wait
		done
	fi
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

ncpu=$(nproc)
for scenario in ${SCENARIOS:-quiet busy side-by-side}; do
	stop_hogs
	neighbours=0
	[ "$scenario" = busy ] && neighbours=$((ncpu + 1))
	for _ in $(seq "$neighbours"); do sh -c 'while :; do :; done' & hogs+=($!); done
	sleep 1
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	declare -A ratio=() cpu=() wait=() stops=() held=() wall=()
	for _ in $(seq "$REPS"); do
		declare -A this=()
		round "$([ "$scenario" = side-by-side ] && echo 1 || echo 0)"
		for cfg in $CONFIGS; do
			read -r w c q s h < <(result "$cfg")
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
	[ "$scenario" = side-by-side ] && neighbours="all configurations at once, and $neighbours"
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
