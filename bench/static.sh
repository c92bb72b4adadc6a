#!/usr/bin/env bash
# bench/static.sh - the static binary (make static) against the dynamic one
# (make), in the same run on the same targets: the ratio static/dynamic is
# the figure to read (1.00: same speed).
#   1. CPU per sample of the stack walk alone: build/bench_walk and the same
#      program linked statically (build-static/bench_walk), on
#      bench/targets.rb at depth 100 with 10 threads, blocking (the GVL
#      holder stopped, as record does) and --nonblocking;
#   2. CPU per tick of a whole recording: build/rbpeek and
#      build-static/rbpeek record --pid at RATE Hz for SECS s, Ruby stacks
#      and --native (libdw linked in), rbpeek's own CPU as it reports it.
# The machine may be noisy: the two builds run alternately, REPS times
# each, and the best of each is kept.
set -u
cd "$(dirname "$0")/.."
SECS=${SECS:-3}
RATE=${RATE:-200}
REPS=${REPS:-3}
work=$(mktemp -d)
trap 'xargs -r kill -KILL < "$work/pids" 2>/dev/null; rm -rf "$work"' EXIT
: > "$work/pids"

make -s --no-print-directory build/rbpeek build/bench_walk static >/dev/null &&
	make -s --no-print-directory STATIC=1 BUILD=build-static build-static/bench_walk >/dev/null || exit 1

start() {   # depth threads -> prints pid once the target is ready
	ruby bench/targets.rb "$1" "$2" > "$work/out.$1.$2" &
	echo $! >> "$work/pids"
	for _ in $(seq 200); do grep -q ready "$work/out.$1.$2" 2>/dev/null && break; sleep 0.05; done
	echo $!
}

best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || (b != "" && b + 0 < a + 0)) ? b : a }'; }
ratio() { awk -v d="$1" -v s="$2" 'BEGIN { if (d > 0 && s > 0) printf "%.2f", s / d; else print "?" }'; }

walk() {   # build pid n flags... -> us per sample
	local b=$1; shift
	"$b/bench_walk" "$@" | sed -n 's/^\([0-9.]*\) us\/sample.*/\1/p'
}

tick() {   # build pid flags... -> rbpeek's own CPU us per tick
	local b=$1 pid=$2; shift 2
	XDG_CACHE_HOME=$work/cache "$b/rbpeek" record --pid "$pid" -r "$RATE" -d "$SECS" -f raw -o /dev/null "$@" 2>&1 |
		sed -n 's/.*own CPU .*, \([0-9.]*\) us per tick).*/\1/p'
}

row() {   # label fn args... : dynamic and static alternately, best of REPS
	local label=$1 fn=$2; shift 2
	local d="" s=""
	for _ in $(seq "$REPS"); do
		d=$(best "$d" "$("$fn" build "$@")")
		s=$(best "$s" "$("$fn" build-static "$@")")
	done
	printf "%-34s %10s %10s %7s\n" "$label" "$d" "$s" "$(ratio "$d" "$s")"
}

echo "== static vs dynamic rbpeek (best of $REPS, alternating; load $(cut -d' ' -f1 /proc/loadavg))"
echo "sizes: build/rbpeek $(stat -c %s build/rbpeek) bytes (+ shared libraries), build-static/rbpeek $(stat -c %s build-static/rbpeek) bytes"
printf "%-34s %10s %10s %7s\n" "" dynamic static "ratio"
pid=$(start 100 10)
row "walk us/sample, blocking" walk "$pid" 500
row "walk us/sample, --nonblocking" walk "$pid" 500 --nonblocking
kill -KILL "$pid"
pid=$(start 10 1)
row "record CPU us/tick" tick "$pid"
row "record CPU us/tick, --native" tick "$pid" --native
kill -KILL "$pid"
