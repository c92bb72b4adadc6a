#!/usr/bin/env bash
# bench/native.sh - what --native costs per sample: rbpeek's CPU time per
# tick with and without --native, on the same target in the same run (the
# ratio is the figure to read).  Targets: bench/targets.rb at Ruby stack
# depths 10 and 100 (its native stack is the interpreter's: vm_exec_core and
# friends), and the C extension of the native tests spinning in ext_outer ->
# ext_inner under NativeTest.call_back (native frames on both sides of a
# re-entry).  CPU time is rbpeek's own utime + stime as it reports it, over
# a whole recording of SECS seconds at RATE Hz, so attaching (and, with
# --native, indexing the target's ELF files once) is included, spread over
# the ticks.  The machine may be noisy: the two modes are run alternately,
# three times each, and the best of each is shown.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
SECS=${SECS:-4}
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

# "cpu-us-per-tick wall-us-per-tick" of one recording.
one() {   # pid flags...
	local pid=$1; shift
	local cpu ticks wall
	read -r cpu ticks wall < <(cpu_ticks "$pid" "$SECS" "$@")
	awk -v c="$cpu" -v t="$ticks" -v w="$wall" 'BEGIN { if (t > 0) printf "%.1f %s\n", c * 1e6 / t, w; else print "? ?" }'
}

min() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || a == "?") print b; else if (b == "?" || a + 0 <= b + 0) print a; else print b }'; }

row() {   # name pid: plain and --native alternately, best of 3 each
	local plain="" native="" pw="" nw="" c w
	for _ in 1 2 3; do
		read -r c w < <(one "$2"); plain=$(min "$plain" "$c"); pw=$(min "$pw" "$w")
		read -r c w < <(one "$2" --native); native=$(min "$native" "$c"); nw=$(min "$nw" "$w")
	done
	printf "%-26s %10s %10s %7s %10s %10s\n" "$1" "$plain" "$native" \
		"$(awk -v a="$plain" -v b="$native" 'BEGIN { if (a > 0 && b > 0) printf "%.1fx", b / a; else print "?" }')" \
		"$pw" "$nw"
}

echo "== CPU per tick, Ruby stacks only vs --native (rate $RATE Hz, $SECS s recordings, alternating, best of 3)"
echo "(CPU: rbpeek's own CPU us per tick, start-up included; wall: average us per tick, the target paused most of it)"
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

# User-space instructions per sample (callgrind, counted inside the sampling
# loop only): deterministic where CPU time is noisy, but blind to the
# kernel's share (ptrace stops, process_vm_readv).  Marginal between a
# SECS and a 2*SECS recording, so what is done once (indexing files,
# loading a library's CFI and symbols on first use) is not counted.
if command -v valgrind >/dev/null; then
	ir_samples() {   # pid secs flags... -> "Ir samples"
		local pid=$1 secs=$2; shift 2
		local out
		out=$(valgrind --tool=callgrind --toggle-collect=rbp_sample_loop \
			--callgrind-out-file="$work/cg.out" "$RBPEEK" record --pid "$pid" -r 50 \
			-d "$secs" -f raw -o /dev/null "$@" 2>&1)
		echo "$(echo "$out" | sed -n 's/.*Collected : \([0-9]*\).*/\1/p') \
$(echo "$out" | sed -n 's/.*: \([0-9]*\) samples in.*/\1/p')"
	}
	ir_row() {   # name pid flags...
		local name=$1 pid=$2; shift 2
		local i1 s1 i2 s2
		read -r i1 s1 < <(ir_samples "$pid" "$SECS" "$@")
		read -r i2 s2 < <(ir_samples "$pid" $((2 * SECS)) "$@")
		awk -v a="$i1" -v b="$i2" -v s="$s1" -v t="$s2" -v n="$name" \
			'BEGIN { if (t > s) printf "%-36s %12.0f\n", n, (b - a) / (t - s); else printf "%-36s %12s\n", n, "?" }'
	}
	echo "== user-space instructions per sample (callgrind, 50 Hz, marginal between $SECS s and $((2 * SECS)) s)"
	pid=$(start ruby bench/targets.rb 10 1)
	ir_row "ruby depth 10" "$pid"
	ir_row "ruby depth 10 --native" "$pid" --native
	kill -KILL "$pid"
fi
