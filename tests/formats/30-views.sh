#!/usr/bin/env bash
# 30-views.sh - the views for questions beyond one flame graph, read by real
# clients, on real Ruby programs made for each:
#   speedscope-active   a main thread that worked a little, then blocked in
#                   IO#read (a wait not taken for idle: its samples are kept)
#                   beside a busy worker: the speedscope file's
#                   activeProfileIndex is the worker's, and the speedscope
#                   app (headless Chromium) opens on it, not on the blocked
#                   main thread (issue 25 item 8)
# Prints "ok NAME" / "FAIL NAME: reason" / "skip NAME: reason"; exit 1 on a FAIL.
#   BUILD=build-asan tests/formats/30-views.sh   runs it with that build
set -uo pipefail
. "$(dirname "$0")/lib.sh"
formats_init views

write_target() { :; }

browser_ready() {
	[[ -n ${browser_why+x} ]] || browser_why=$(timeout 900 tools/install-browser-deps.sh 2>&1)
	[[ -f tests/browser/node_modules/playwright-core/package.json ]]
}

# record NAME OUT ARGS...: rbpeek record ARGS (-o OUT) on a command; fails NAME on error
record_cmd() {
	local name=$1 out=$2
	shift 2
	if ! XDG_CACHE_HOME=$work/cache timeout 120 "$RBPEEK" record --silent -o "$out" "$@" \
		2>"$work/$name.err"; then
		fail "$name" "record: $(tail -n 3 "$work/$name.err" | tr '\n' ' ')"
		return 1
	elif sanitized "$work/$name.err"; then
		fail "$name" "sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$work/$name.err")"
		return 1
	fi
}

check_speedscope_active() {
	cat >"$work/blocked.rb" <<'EOF'
Thread.new { sleep 3; exit!(0) }   # the end of the recording
worker = Thread.new { loop { 50_000.times.sum } }
worker.name = "busy-worker"
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
200_000.times.sum while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.6
r, _w = IO.pipe
r.read   # blocked until the end, in a wait that is not waiting for work
EOF
	record_cmd speedscope-active "$work/blocked.speedscope.json" -r 100 -- ruby "$work/blocked.rb" || return
	local msg
	if ! msg=$(ruby -rjson -e '
		doc = JSON.parse(File.read(ARGV[0]))
		names = doc["profiles"].map { |p| "#{p["name"]}: #{p["samples"].size}" }
		active = doc["profiles"][doc["activeProfileIndex"]]["name"]
		abort "activeProfileIndex is #{active.inspect} (#{names.join(", ")})" unless active.include?("busy-worker")
		puts "opens on #{active} (#{names.join(", ")})"' "$work/blocked.speedscope.json" 2>&1); then
		fail speedscope-active "$msg"
		return
	fi
	ok speedscope-active "$msg"
	if ! browser_ready; then
		skip speedscope-active/browser "${browser_why:-tools/install-browser-deps.sh failed}"
		return
	fi
	local out
	out=$(timeout 300 node tests/browser/speedscope.mjs --name views/speedscope-active \
		--load "$work/blocked.speedscope.json" --active busy-worker 2>&1)
	node_results speedscope-active/browser $? "$out"
}

main() {
	[[ -x $RBPEEK ]] || { fail build "$RBPEEK not built (run make)"; return; }
	command -v ruby >/dev/null || { fail target "ruby not found (run tools/install-deps.sh)"; return; }
	check_speedscope_active
}

main
exit $failed
