#!/usr/bin/env bash
# bench/trace/run.sh - the tracer's benchmark (make bench): ns per call of
# fib(30) under RbPeek::Trace and its peers, measured in one Ruby process
# (bench/trace/fib.rb).  With CALLGRIND=1 also instructions per call from
# valgrind --tool=callgrind (fib(20) minus fib(14)): untraced, the VM's
# dispatch to an empty hook, our hook, its frame lookup.
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
# Instructions per fib call = (Ir of fib(HI) - Ir of fib(LO)) / (calls(HI) -
# calls(LO)), so start-up and loading cancel out.  Modes: untraced; the
# same hooks with a callback that returns at once (the VM's dispatch: trace
# instructions, rb_exec_event_hooks and its setjmp, the call); ours.
prog='def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
mode = ARGV[0]
require "rbpeek/trace" if mode != "none"
c = mode.end_with?("all")
RbPeek::Trace._start(1 << 16, c, false, false, false, false, mode.start_with?("null")) if mode != "none"
fib(Integer(ARGV[1]))'
calls() { ruby -e 'a, b = 1, 1; ARGV[0].to_i.times { a, b = b, a + b + 1 }; print a' "$1"; }
LO=${CG_LO:-14} HI=${CG_HI:-20}
dcalls=$(( $(calls "$HI") - $(calls "$LO") ))
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !d { gsub(",", "", $1); print $1; d = 1 }'; }
# inclusive Ir of one function (0 when absent)
incl() { callgrind_annotate --inclusive=yes "$1" 2>/dev/null | awk -v f="$2" 'index($0, ":" f " ") && !d { gsub(",", "", $1); print $1; d = 1 } END { if (!d) print 0 }'; }
declare -A ir on fr
for mode in none null-noc null-all noc all; do
	for n in "$LO" "$HI"; do
		valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$mode.$n" ruby -I"$ext" -e "$prog" "$mode" "$n" >/dev/null 2>"$tmp/log.$mode.$n"
	done
	ir[$mode]=$(( ($(total "$tmp/cg.$mode.$HI") - $(total "$tmp/cg.$mode.$LO")) / dcalls ))
	on[$mode]=$(( ($(incl "$tmp/cg.$mode.$HI" on_call) - $(incl "$tmp/cg.$mode.$LO" on_call)) / dcalls ))
	fr[$mode]=$(( ($(incl "$tmp/cg.$mode.$HI" rb_frame_method_id_and_class) - $(incl "$tmp/cg.$mode.$LO" rb_frame_method_id_and_class)) / dcalls ))
done
echo "== instructions per fib call (callgrind, fib($HI) - fib($LO) = $dcalls calls, Ruby $(ruby -e 'print RUBY_VERSION'))"
printf "%-34s %8s %8s\n" "" "no C" "all"
printf "%-34s %8d %8d\n" "untraced" "${ir[none]}" "${ir[none]}"
printf "%-34s %8d %8d\n" "VM dispatch (empty hook), added" $(( ir[null-noc] - ir[none] )) $(( ir[null-all] - ir[none] ))
printf "%-34s %8d %8d\n" "our hook (on_call, inclusive)" "${on[noc]}" "${on[all]}"
printf "%-34s %8d %8d\n" "  of which frame lookup (Ruby)" "${fr[noc]}" "${fr[all]}"
printf "%-34s %8d %8d\n" "traced, added in total" $(( ir[noc] - ir[none] )) $(( ir[all] - ir[none] ))
echo "(time stamps are one rdtsc each: 1 instruction, but see the ns figure above)"
