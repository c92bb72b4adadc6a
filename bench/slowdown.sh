#!/usr/bin/env bash
# bench/slowdown.sh - how much a profiler slows the program it watches:
# bench/workload.rb does a fixed amount of CPU-bound work (calibrated once
# to WORK seconds) and times itself; it runs unprofiled, under rbpeek
# record (spawn mode, blocking and --nonblocking) and under stackprof
# in-process (mode :cpu), at 100 Hz and 1,000 Hz.  Configurations are
# interleaved within each of REPS rounds and each keeps its fastest time
# (noise on this machine only ever adds time); slowdown = fastest profiled
# / fastest unprofiled - 1, on the wall clock (what a user waits: includes
# the pauses of blocking mode) and in the target's own CPU time (what the
# profiler makes the process itself do: stackprof's signal handler).
#
# On a loaded machine: LOAD=N runs N CPU-bound loops for the whole
# measurement (the target then competes for the CPUs, as a production
# service on a busy host does, and rbpeek's pauses cost it more).  With
# RBPEEK_PEER=another/rbpeek (e.g. a build of main), its blocking
# configurations are measured in the same rounds ("peer-...").
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
WORK=${WORK:-3}
REPS=${REPS:-5}
tmp=$(mktemp -d)
hogs=()
trap '[ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}"; rm -rf "$tmp"' EXIT
PEER=${RBPEEK_PEER:-}

rounds=$(ruby bench/workload.rb "$WORK" | sed -n 's/^rounds \([0-9]*\) .*/\1/p')
[ -n "$rounds" ] || { echo "slowdown: workload calibration failed" >&2; exit 1; }
have_stackprof=1
ruby -rstackprof -e 1 2>/dev/null || have_stackprof=0

run() {   # config -> "wall cpu" seconds of the workload
	local cfg=$1 out
	case $cfg in
	base) out=$(BENCH_ROUNDS=$rounds ruby bench/workload.rb) ;;
	stackprof-*) out=$(BENCH_ROUNDS=$rounds BENCH_STACKPROF=${cfg#stackprof-} ruby bench/workload.rb) ;;
	rbpeek-* | peer-*)
		local rate=${cfg##*-} flag=() bin=$RBPEEK
		[[ $cfg == *nonblocking* ]] && flag=(--nonblocking)
		[[ $cfg == peer-* ]] && bin=$PEER
		out=$(BENCH_ROUNDS=$rounds "$bin" record -r "$rate" "${flag[@]}" -f raw \
			-o "$tmp/out.raw" -- ruby bench/workload.rb 2>"$tmp/err") ;;
	esac
	sed -n 's/^rounds [0-9]* seconds \([0-9.]*\) cpu \([0-9.]*\)$/\1 \2/p' <<<"$out"
}

configs=(base rbpeek-blocking-100 rbpeek-nonblocking-100 rbpeek-blocking-1000 rbpeek-nonblocking-1000)
[ -n "$PEER" ] && configs+=(peer-blocking-100 peer-blocking-1000)
((have_stackprof)) && configs+=(stackprof-100 stackprof-1000)
for _ in $(seq "${LOAD:-0}"); do sh -c 'while :; do :; done' & hogs+=($!); done
declare -A best bestcpu
smaller() { [ -z "$2" ] || awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
for _ in $(seq "$REPS"); do
	for cfg in "${configs[@]}"; do
		read -r s c < <(run "$cfg")
		[ -n "${s:-}" ] || continue
		smaller "$s" "${best[$cfg]:-}" && best[$cfg]=$s
		smaller "$c" "${bestcpu[$cfg]:-}" && bestcpu[$cfg]=$c
	done
done

pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%+.1f%%", (a / b - 1) * 100 }'; }
echo "== target slowdown (workload of ~${WORK} s, fastest of ${REPS}; stackprof in-process, mode :cpu;" \
	"LOAD=${LOAD:-0} extra loops, load $(cut -d' ' -f1 /proc/loadavg))"
printf "%-26s %9s %9s %9s %9s\n" profiler wall slowdown cpu slowdown
for cfg in "${configs[@]}"; do
	s=${best[$cfg]:-} c=${bestcpu[$cfg]:-}
	printf "%-26s %9s %9s %9s %9s\n" "$cfg" "${s:-?}" "$(pct "$s" "${best[base]:-}")" \
		"${c:-?}" "$(pct "$c" "${bestcpu[base]:-}")"
done
((have_stackprof)) || echo "(stackprof not installed: apt-get install ruby-stackprof)"
