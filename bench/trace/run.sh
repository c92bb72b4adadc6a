#!/usr/bin/env bash
# bench/trace/run.sh - the tracer's benchmark (make bench): ns per call of
# fib(30) under RbPeek::Trace and its peers, measured in one Ruby process
# (bench/trace/fib.rb).  With CALLGRIND=1 also instructions per call from
# valgrind --tool=callgrind on fib(20), untraced and traced, and where the
# traced instructions go (the top functions).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
ext=$BUILD/ext
[ -f "$ext/rbpeek/trace_ext.so" ] || { echo "bench/trace: $ext/rbpeek/trace_ext.so not built (make; needs ruby-dev)"; exit 0; }
echo "== tracer: ns per call of fib(30) (ruby -I$ext bench/trace/fib.rb)"
ruby -I"$ext" bench/trace/fib.rb "${FIB_N:-30}" "${ROUNDS:-3}"

[ "${CALLGRIND:-0}" = 1 ] || exit 0
command -v valgrind >/dev/null || { echo "bench/trace: valgrind missing"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog='def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
mode = ARGV[0]
require "rbpeek/trace" if mode != "none"
RbPeek::Trace.start(c_calls: mode == "all") if mode != "none"
fib(20)'
calls=21891
declare -A ir
for mode in none noc all; do
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$mode" ruby -I"$ext" -e "$prog" "$mode" >/dev/null 2>"$tmp/log.$mode"
	ir[$mode]=$(callgrind_annotate "$tmp/cg.$mode" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
done
# startup (loading the extension, start) is measured by fib(0) runs
echo "== instructions (callgrind, fib(20) = $calls calls; includes start-up)"
for mode in none noc all; do
	echo "$mode: ${ir[$mode]} Ir"
done
echo "per call over untraced: no C calls $(( (ir[noc] - ir[none]) / calls )) Ir, all streams $(( (ir[all] - ir[none]) / calls )) Ir"
echo "== where the traced instructions go (all streams, top 15)"
callgrind_annotate "$tmp/cg.all" 2>/dev/null | sed -n '/file:function/,$p' | head -17
