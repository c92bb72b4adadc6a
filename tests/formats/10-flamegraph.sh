#!/usr/bin/env bash
# 10-flamegraph.sh - the flamegraph format end to end, against a real Ruby
# program with known hot spots:
#   record       `rbpeek record --pid PID -d 2 -o out.svg --silent` succeeds
#                (and, for an ASan build, reports nothing)
#   xml          the SVG parses as XML (REXML), its root is <svg>
#   names        the hot methods, a 100-deep recursion and a method whose name
#                holds < & > " ' and an invalid byte are drawn, the latter
#                with U+FFFD, and crunch_numbers (3x the work) is the widest
#   report       `rbpeek report -i RAW -f flamegraph` gives the same bytes
#   browser/...  tests/browser/flamegraph.mjs in headless Chromium: no JS
#                errors, frames present, click to zoom, Reset Zoom, Ctrl-F
#                search with the right "Matched:", state in the URL
#                and the idle control: the watchdog thread's Kernel#sleep
#                (idle: waiting, never working) is left out as the SVG opens
#                and shown / hidden again by the control
#   idle-shown/... the same written with --idle (report --idle): the sleep
#                drawn as the SVG opens, hidden and shown again by the control
#   processes/...  the same on a --subprocesses recording of a process and
#                its forked worker: the filter picks each process alone
# Prints "ok NAME" / "FAIL NAME: reason" / "skip NAME: reason"; exit 1 on a FAIL.
#   BUILD=build-asan tests/formats/10-flamegraph.sh   runs it with that build
set -uo pipefail
. "$(dirname "$0")/lib.sh"
formats_init flamegraph

# The target: crunch_numbers does about three times the work of
# build_strings; the awkwardly named method and the recursion a little less.
write_target() {
	cat >"$work/target.rb" <<'EOF'
EVIL = "evil<&>\"'\xff".b.to_sym
module Workload
  class Cruncher
    def crunch_numbers
      s = 0
      30_000.times { |i| s += i * i % 7 }
      s
    end

    def build_strings
      a = []
      3_000.times { |i| a << "item-#{i}" }
      a.join(",").size
    end

    define_method(EVIL) { 100_000.times.sum }

    def self.dive(n)
      n.zero? ? 100_000.times.sum : dive(n - 1)
    end
  end
end

Thread.new { sleep 60; exit!(3) }   # never outlive a broken test
# a second working thread, for the flame graph's thread filter
module Workload
  def self.background
    loop { 200_000.times.sum }   # busy: it holds the GVL about half the time, never idle
  end
end
Thread.new { Thread.current.name = "background"; Workload.background }
$stdout.sync = true
c = Workload::Cruncher.new
puts "ready"
loop do
  3.times { c.crunch_numbers }
  c.build_strings
  c.send(EVIL)
  Workload::Cruncher.dive(100)
end
EOF
}

# XML well-formedness and the names drawn, checked by Ruby's REXML.
check_svg() {
	timeout 60 ruby -rrexml/document -e '
		doc = REXML::Document.new(File.read(ARGV[0], encoding: "UTF-8"))
		abort "root is #{doc.root&.name.inspect}, not svg" unless doc.root&.name == "svg"
		titles = REXML::XPath.match(doc, "//g[@class=\"f\"]/title").map(&:text)
		want = ["Workload::Cruncher#crunch_numbers", "Workload::Cruncher#build_strings",
		        "Workload::Cruncher.dive", "Workload::Cruncher#evil<&>\"\x27\u{fffd}"]
		share = want.to_h { |w| [w, titles.select { |t| t.start_with?(w + " (") }
		                                    .sum { |t| t[/([\d.]+)%\)\z/, 1].to_f }] }
		missing = want.reject { |w| share[w] > 0 }
		abort "no frame named #{missing.join(", ")}" unless missing.empty?
		dives = titles.count { |t| t.start_with?("Workload::Cruncher.dive (") }
		abort "only #{dives} dive frames (want 101)" if dives < 101
		c, b = share.values_at(*want[0, 2])
		abort "crunch_numbers #{c}% is not wider than build_strings #{b}%" unless c > b
		puts "#{titles.size} frames, crunch_numbers #{c.round(1)}%, build_strings #{b.round(1)}%"
	' "$1"
}

run_browser() {
	local why
	if ! why=$(tools/install-browser-deps.sh --check 2>&1); then
		skip browser "${why:-tools/install-browser-deps.sh failed}"
		return
	fi
	"$RBPEEK" report -i "$raw" -f collapsed -o "$work/folded.txt" 2>/dev/null
	local out
	out=$(timeout 300 node tests/browser/flamegraph.mjs "$work/out.svg" --name flamegraph/browser \
		--expect 'Workload::Cruncher#crunch_numbers' --expect 'Workload::Cruncher#build_strings' \
		--expect 'Kernel#loop' --zoom 'Workload::Cruncher#build_strings' \
		--search 'crunch_numbers|Cruncher\.dive' --collapsed "$work/folded.txt" \
		--filter background --idle 'Kernel#sleep' --screenshot "$SHOTS/flamegraph.png" 2>&1)
	node_results browser $? "$out"
	# written with --idle: the watchdog's sleep drawn, and the control hides it
	if ! "$RBPEEK" report -i "$raw" --idle -o "$work/idle.svg" 2>"$work/idle.err"; then
		fail idle-shown "report --idle: $(tail -n 2 "$work/idle.err" | tr '\n' ' ')"
	else
		out=$(timeout 300 node tests/browser/flamegraph.mjs "$work/idle.svg" --name flamegraph/idle-shown \
			--idle 'Kernel#sleep' 2>&1)
		node_results idle-shown $? "$out"
	fi
	record_processes || return
	out=$(timeout 300 node tests/browser/flamegraph.mjs "$work/procs.svg" --name flamegraph/processes \
		--filter main --processes 2 2>&1)
	node_results processes $? "$out"
}

# $work/procs.svg: a busy Ruby process and its busy forked worker, recorded
# with --subprocesses, for the filter's process choices.
record_processes() {
	cat >"$work/forker.rb" <<'EOF'
def spin = loop { 100_000.times.sum }
Thread.new { sleep 60; exit!(3) }   # never outlive a broken test
fork { Thread.new { sleep 60; exit!(3) }; spin }
$stdout.sync = true
puts "ready"
spin
EOF
	ruby "$work/forker.rb" >"$work/forker.ready" 2>"$work/forker.err" &
	local fpid=$! rc
	register_pid "$fpid"
	for _ in $(seq 100); do
		grep -q ready "$work/forker.ready" 2>/dev/null && break
		sleep 0.1
	done
	sleep 0.3   # the worker forked before "ready": let it start spinning
	XDG_CACHE_HOME=$work/cache timeout 60 "$RBPEEK" record --pid "$fpid" --subprocesses -d 2 \
		-o "$work/procs.svg" --silent 2>"$work/procs.err"
	rc=$?
	pkill -KILL -P "$fpid" 2>/dev/null   # the worker: our forker's child only
	kill -KILL "$fpid" 2>/dev/null
	wait "$fpid" 2>/dev/null
	if ((rc != 0)) || [[ ! -s $work/procs.svg ]]; then
		fail processes "record --subprocesses: exit $rc: $(tail -n 3 "$work/procs.err" | tr '\n' ' ')"
		return 1
	fi
}

main() {
	local msg
	[[ -x $RBPEEK ]] || { fail build "$RBPEEK not built (run make)"; return; }
	command -v ruby >/dev/null || { fail target "ruby not found (run tools/install-deps.sh)"; return; }
	start_target || { fail target "the Ruby target never got ready: $(head -c 300 "$work/target.err")"; return; }
	XDG_CACHE_HOME=$work/cache timeout 60 "$RBPEEK" record --pid "$pid" -d 2 \
		-o "$work/out.svg" --silent 2>"$work/record.err"
	local rc=$?
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
	if ((rc != 0)) || [[ ! -s $work/out.svg ]]; then
		fail record "exit $rc: $(tail -n 3 "$work/record.err" | tr '\n' ' ')"
		return
	elif grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$work/record.err"; then
		fail record "sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$work/record.err")"
	else
		ok record
	fi
	if msg=$(check_svg "$work/out.svg" 2>&1); then
		ok "xml-and-names: $msg"
	else
		fail xml-and-names "$(tail -n 2 <<<"$msg" | tr '\n' ' ')"
	fi
	raw=$(ls "$work"/cache/rbpeek/*.raw.gz 2>/dev/null | head -n 1)
	if [[ -z $raw ]]; then
		fail report "record wrote no raw file: $(tail -n 3 "$work/record.err" | tr '\n' ' ')"
		return
	fi
	if ! timeout 60 "$RBPEEK" report -i "$raw" -f flamegraph -o "$work/again.svg" 2>"$work/report.err"; then
		fail report "$(tail -n 3 "$work/report.err" | tr '\n' ' ')"
	elif grep -qE 'AddressSanitizer|runtime error:' "$work/report.err"; then
		fail report "sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$work/report.err")"
	elif ! cmp -s "$work/out.svg" "$work/again.svg"; then
		fail report "the SVG written from the raw file differs from the recorded one"
	else
		ok report
	fi
	run_browser
}

main
exit $failed
