#!/usr/bin/env bash
# bench/native.sh - what --native costs per sample: rbpeek's CPU time per
# tick with and without --native, on the same target in the same run (the
# ratio is the figure to read; the machine may be noisy, so each figure is
# the best of 3).  Targets: bench/targets.rb at Ruby stack depths 10 and 100
# (its native stack is the interpreter's: vm_exec_core and friends), and the
# C extension of the native tests spinning in ext_outer -> ext_inner under
# NativeTest.call_back (native frames on both sides of a re-entry).
# CPU time is rbpeek's own utime + stime as it reports it; the cost per
# tick is marginal: (CPU of a 2*SECS recording - CPU of a SECS one) / extra
# ticks, so attaching and reading symbol tables once are not counted.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
SECS=${SECS:-2}
RATE=${RATE:-200}
work=$(mktemp -d)
pidfile=$work/pids
trap 'xargs -r kill -KILL < "$pidfile" 2>/dev/null; rm -rf "$work"' EXIT

start() {   # argv... -> prints pid once the target printed ready/READY
	"$@" > "$work/out" &
	local pid=$!
	echo "$pid" >> "$pidfile"
	for _ in $(seq 200); do grep -qi ready "$work/out" 2>/dev/null && break; sleep 0.05; done
	echo "$pid"
}

cpu_ticks() {   # pid secs flags... -> "cpu ticks avg-tick-wall-us"
	local pid=$1 secs=$2; shift 2
	local out
	out=$("$RBPEEK" record --pid "$pid" -r "$RATE" -d "$secs" -f raw -o /dev/null "$@" 2>&1)
	echo "$(echo "$out" | sed -n 's/.*own CPU \([0-9.]*\) s.*/\1/p') \
$(echo "$out" | sed -n 's/.* in \([0-9]*\) ticks.*/\1/p') \
$(echo "$out" | sed -n 's|.*sampling took [0-9]*/\([0-9]*\)/.*|\1|p')"
}

# Best marginal CPU us/tick of 3, and the best average wall time of a tick
# (the target is paused for most of it): "cpu wall".
per_tick() {   # pid flags...
	local pid=$1; shift
	local best="" wall="" us cpu1 t1 cpu2 t2 w
	for _ in 1 2 3; do
		read -r cpu1 t1 _ < <(cpu_ticks "$pid" "$SECS" "$@")
		read -r cpu2 t2 w < <(cpu_ticks "$pid" $((2 * SECS)) "$@")
		[ -n "$w" ] && { [ -z "$wall" ] || [ "$w" -lt "$wall" ]; } && wall=$w
		us=$(awk -v a="$cpu1" -v b="$cpu2" -v s="$t1" -v t="$t2" \
			'BEGIN { if (t > s && b >= a) printf "%.1f", (b - a) * 1e6 / (t - s) }')
		[ -n "$us" ] || continue
		[ -z "$best" ] || awk -v a="$us" -v b="$best" 'BEGIN { exit !(a < b) }' && best=$us
	done
	echo "${best:-?} ${wall:-?}"
}

row() {   # name pid
	local plain native pw nw
	read -r plain pw < <(per_tick "$2")
	read -r native nw < <(per_tick "$2" --native)
	printf "%-26s %10s %10s %7s %10s %10s\n" "$1" "$plain" "$native" \
		"$(awk -v a="$plain" -v b="$native" 'BEGIN { if (a > 0 && b > 0) printf "%.1fx", b / a; else print "?" }')" \
		"$pw" "$nw"
}

echo "== CPU per tick, Ruby stacks only vs --native (rate $RATE Hz, marginal between $SECS s and $((2 * SECS)) s, best of 3)"
echo "(CPU: rbpeek's own CPU us per tick; wall: average us per tick, the target paused most of it)"
printf "%-26s %10s %10s %7s %10s %10s\n" target "CPU" "CPU native" ratio "wall" "wall nat."
for depth in 10 100; do
	pid=$(start ruby bench/targets.rb "$depth" 1)
	row "ruby depth $depth" "$pid"
	kill -KILL "$pid"
done
if gcc -O2 -g -fPIC -shared -I"$(ruby -e 'print RbConfig::CONFIG["rubyhdrdir"]')" \
	-I"$(ruby -e 'print RbConfig::CONFIG["rubyarchhdrdir"]')" \
	-o "$work/native_test.so" tests/targets/ext/native_test.c 2>"$work/gcc.err"; then
	pid=$(start ruby tests/targets/ext/native_main.rb "$work/native_test.so")
	row "C extension (ext_inner)" "$pid"
	kill -KILL "$pid"
else
	echo "C extension: not built: $(head -c 300 "$work/gcc.err")"
fi
