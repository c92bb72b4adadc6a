#!/usr/bin/env bash
# 30-views.sh - the views for questions beyond one flame graph, read by real
# clients, on real Ruby programs made for each:
#   speedscope-active   a main thread that worked a little, then blocked in
#                   IO#read (a wait not taken for idle: its samples are kept)
#                   beside a busy worker: the speedscope file's
#                   activeProfileIndex is the worker's, and the speedscope
#                   app (headless Chromium) opens on it, not on the blocked
#                   main thread (issue 25 item 8)
#   diff/...        one program run twice, Target#work sleeping twice as long
#                   the second time (sleeps: shares that load does not move),
#                   Legacy#old_path only in the first run, Fresh#new_path only
#                   in the second: `record --diff BASE -f summary` and
#                   `report --diff BASE -i NEW -f summary` give the same table,
#                   Target#work x2 (+-20 %), Steady#work and Other#work within
#                   3 points, Fresh "new", Legacy "gone"; the differential
#                   flame graph in Chromium (tests/browser/views.mjs diff:
#                   Target red with its ratio, the others pale, the scale,
#                   the new and gone functions named, nothing outside the
#                   image, no NaN); and `-f pprof`, read by go tool pprof,
#                   shows every function's flat and cum as `go tool pprof
#                   -normalize -diff_base BASE.pb.gz NEW.pb.gz` does (+-1
#                   sample of rounding), Target#work's change the table's
#   callgraph/...   a recursive-descent parser over generated input (mutual
#                   recursion), fib and Ackermann: in `-f dot` each recursive
#                   function is one node whose self and total are those of
#                   the folded stacks (within 2 %), fib and ack have a loop
#                   edge, expr -> term -> factor -> expr a cycle; `-f
#                   callgraph` (Graphviz's SVG) in Chromium: one node per
#                   function, nothing outside the image, no NaN, a click on
#                   Parser#term leaves it, its callers and callees undimmed
#   sandwich/...    the flame graph of the same recording in Chromium: a
#                   click on Parser#factor, then "Callers & callees": its
#                   total (outermost occurrences only) within 2 % of the
#                   folded stacks' (once per sample), Parser#term among its
#                   callers, Parser#expr among its callees, the view in the
#                   URL, Esc back; a search for Object#fib the same
#   flamegraph-deep/... tests/browser/flamegraph.mjs on that flame graph,
#                   whose dive(90) recursion holds a third of the samples 90
#                   levels up: it opens with that level near the top of the
#                   window (it opened scrolled to the bottom, level 90 unseen)
#   real/...        rubocop (a big real program) linting lib/, recorded
#                   twice: its flame graph (and callers & callees of its
#                   widest frame), call graph and differential flame graph in
#                   Chromium: no JS error, no NaN, every frame or node inside
#                   the image
# Prints "ok NAME" / "FAIL NAME: reason" / "skip NAME: reason"; exit 1 on a FAIL.
#   BUILD=build-asan tests/formats/30-views.sh   runs it with that build
# e2e-timeout: 600 (five recordings, rubocop twice, about 20 Chromium pages: 100-120 s on a loaded 2-core machine)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
formats_init views

write_target() { :; }

browser_ready() {
	[[ -n ${browser_why+x} ]] || browser_why=$(tools/install-browser-deps.sh --check 2>&1)
	[[ -f tests/browser/node_modules/playwright-core/package.json ]]
}

# record NAME OUT ARGS...: rbpeek record ARGS (-o OUT) on a command; fails NAME on error
record_cmd() {
	local name=$1 out=$2 err
	shift 2
	err=$work/${name//\//-}.err
	if ! XDG_CACHE_HOME=$work/cache timeout 120 "$RBPEEK" record --silent -o "$out" "$@" 2>"$err"; then
		fail "$name" "record: $(tail -n 3 "$err" | tr '\n' ' ')"
		return 1
	elif sanitized "$err"; then
		fail "$name" "sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$err")"
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

# go tool pprof: Debian's golang-go (tools/install-deps.sh --packaging, run
# by make test's set-up; a test installs nothing)
have_go() {
	command -v go >/dev/null
}

gopprof() {
	HOME=$work/gohome GOCACHE=$work/gohome/cache timeout 120 go tool pprof "$@"
}

write_diff_target() {
	cat >"$work/twice.rb" <<'EOF'
# twice.rb K VARIANT: Target#work sleeps K times as long as Steady#work and
# Other#work, in a loop of fixed period (Pad#rest sleeps the rest), so the
# shares of the others do not move when K does, whatever the load (no CPU
# work to slow down).  The thread only sleeps, so it is taken for one that
# waits for work: the test keeps idle samples (--idle)
k = Float(ARGV[0])
variant = ARGV[1]
STEP = 0.05
class Steady; def work = sleep(STEP); end
class Other; def work = sleep(STEP); end
class Target; def work(k) = sleep(STEP * k); end
class Legacy; def old_path = sleep(0.02); end
class Fresh; def new_path = sleep(0.02); end
class Pad
  def rest(t0)
    left = t0 + 0.45 - Process.clock_gettime(Process::CLOCK_MONOTONIC)
    sleep(left) if left > 0
  end
end
s, o, t, pad = Steady.new, Other.new, Target.new, Pad.new
stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 4.5
loop do
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  break if t0 > stop
  s.work
  t.work(k)
  o.work
  variant == "base" ? Legacy.new.old_path : Fresh.new.new_path
  pad.rest(t0)
end
EOF
}

check_diff() {
	write_diff_target
	record_cmd diff/record-base "$work/base.raw.gz" -r 200 -- ruby --disable-gems "$work/twice.rb" 1 base || return
	record_cmd diff/record-new "$work/rec-diff.txt" -r 200 --idle --diff "$work/base.raw.gz" -f summary \
		--raw-file "$work/new.raw.gz" -- ruby --disable-gems "$work/twice.rb" 2 new || return
	local msg out
	if ! timeout 60 "$RBPEEK" report --idle --diff "$work/base.raw.gz" -i "$work/new.raw.gz" -f summary \
		-o "$work/diff.txt" 2>"$work/diff.err"; then
		fail diff/report "$(tail -n 2 "$work/diff.err" | tr '\n' ' ')"
		return
	elif ! cmp -s "$work/diff.txt" "$work/rec-diff.txt"; then
		fail diff/report "report --diff and record --diff tables differ: $(diff "$work/rec-diff.txt" "$work/diff.txt" | head -n 4 | tr '\n' ' ')"
	else
		ok diff/report "record --diff and report --diff write the same table"
	fi
	if msg=$(ruby -e '
		rows = {}
		File.foreach(ARGV[0]) do |l|
		  m = l.match(/\A\s*([\d.]+)\s+([\d.]+)\s+([+-][\d.]+)\s+(\S+)\s+[\d.]+\s+[\d.]+\s+(\S+)/) or next
		  rows[m[5]] = { base: m[1].to_f, new: m[2].to_f, change: m[3].to_f, ratio: m[4] }
		end
		t = rows["Target#work"] or abort "no Target#work row"
		r = t[:ratio].delete_prefix("x").to_f
		abort "Target#work: #{t}, not x2 within 20 %" unless (1.6..2.4).cover?(r) && t[:change] > 0
		%w[Steady#work Other#work].each do |n|
		  x = rows[n] or abort "no #{n} row"
		  abort "#{n} moved #{x[:change]} points: #{x}" if x[:change].abs >= 3
		end
		abort "Fresh#new_path: #{rows["Fresh#new_path"]}, not new" unless rows.dig("Fresh#new_path", :ratio) == "new"
		abort "Legacy#old_path: #{rows["Legacy#old_path"]}, not gone" unless rows.dig("Legacy#old_path", :ratio) == "gone"
		puts "Target#work #{t[:base]}% -> #{t[:new]}% (x#{r}), Steady#work #{rows["Steady#work"][:change]}, " \
		     "Other#work #{rows["Other#work"][:change]} points"' "$work/diff.txt" 2>&1); then
		ok diff/summary "$msg"
	else
		fail diff/summary "$msg"
	fi
	if ! timeout 60 "$RBPEEK" report --idle --diff "$work/base.raw.gz" -i "$work/new.raw.gz" -o "$work/diff.svg" \
		2>"$work/diff.err"; then
		fail diff/flamegraph "$(tail -n 2 "$work/diff.err" | tr '\n' ' ')"
	elif ! browser_ready; then
		skip diff/browser "${browser_why:-tools/install-browser-deps.sh failed}"
	else
		out=$(timeout 300 node tests/browser/views.mjs diff "$work/diff.svg" --name views/diff/browser \
			--red 'Target#work' --ratio 2 --neutral 'Steady#work' --neutral 'Other#work' \
			--new 'Fresh#new_path' --gone 'Legacy#old_path' --screenshot "$SHOTS/diff.png" 2>&1)
		node_results diff/browser $? "$out"
	fi
	check_diff_pprof
}

# Our pprof diff read by go tool pprof against its own -diff_base of the two
# recordings' plain pprof files.
check_diff_pprof() {
	if ! have_go; then
		skip diff/pprof "go tool pprof not available (golang-go: tools/install-deps.sh --packaging)"
		return
	fi
	mkdir -p "$work/gohome"
	local f
	for f in base new; do
		timeout 60 "$RBPEEK" report --idle -i "$work/$f.raw.gz" -o "$work/$f.pb.gz" 2>/dev/null
	done
	if ! timeout 60 "$RBPEEK" report --idle --diff "$work/base.raw.gz" -i "$work/new.raw.gz" -o "$work/diff.pb.gz" \
		2>"$work/diff.err"; then
		fail diff/pprof "report --diff -f pprof: $(tail -n 2 "$work/diff.err" | tr '\n' ' ')"
		return
	fi
	local opts=(-top -sample_index=samples -nodecount=100000 -nodefraction=0 -edgefraction=0)
	if ! gopprof "${opts[@]}" "$work/diff.pb.gz" >"$work/ours.txt" 2>&1 ||
	   ! gopprof "${opts[@]}" -normalize -diff_base "$work/base.pb.gz" "$work/new.pb.gz" >"$work/theirs.txt" 2>&1; then
		fail diff/pprof "go tool pprof failed: $(tail -n 2 "$work/ours.txt" "$work/theirs.txt" | tr '\n' ' ')"
		return
	fi
	local msg
	if msg=$(ruby -e '
		def rows(f)
		  h = Hash.new { |x, k| x[k] = [0, 0] }
		  File.foreach(f) do |l|
		    m = l.match(/\A\s*(-?\d+)\s+[\d.]+%\s+[\d.]+%\s+(-?\d+)\s+[\d.]+%\s+(.+?)\s*\z/) or next
		    h[m[3]][0] += m[1].to_i
		    h[m[3]][1] += m[2].to_i
		  end
		  h
		end
		ours, theirs = rows(ARGV[0]), rows(ARGV[1])
		abort "go tool pprof shows no functions" if ours.empty? || theirs.empty?
		bad = (ours.keys | theirs.keys).reject do |k|
		  a, b = ours[k], theirs[k]
		  (a[0] - b[0]).abs <= 1 && (a[1] - b[1]).abs <= 1
		end
		abort "#{bad.size} functions differ: " + bad.first(3).map { |k| "#{k}: ours #{ours[k]}, -diff_base #{theirs[k]}" }.join("; ") unless bad.empty?
		base_total = File.read(ARGV[2])[/against BASE, (\d+) samples/, 1].to_i
		change = File.foreach(ARGV[2]).find { |l| l =~ /\sTarget#work\s/ }.split[2].to_f
		got = 100.0 * ours["Target#work"][1] / base_total
		abort "Target#work: pprof cum #{ours["Target#work"][1]} of #{base_total} is #{got.round(2)} points, the table #{change}" if (got - change).abs > 0.5
		puts "#{ours.size} functions agree with go tool pprof -normalize -diff_base; Target#work cum #{ours["Target#work"][1]} (#{got.round(2)} points, table #{change})"
	' "$work/ours.txt" "$work/theirs.txt" "$work/diff.txt" 2>&1); then
		ok diff/pprof "$msg"
	else
		fail diff/pprof "$msg"
	fi
}
write_recursion_target() {
	cat >"$work/recursion.rb" <<'EOF'
# Mutual and deep recursion: a recursive-descent parser over generated
# arithmetic (expr -> term -> factor -> "(" expr ")"), fib, Ackermann
class Parser
  def initialize(src) = (@s = src; @i = 0)
  def parse = expr
  def expr
    v = term
    while @s[@i] == "+" || @s[@i] == "-"
      op = @s[@i]; @i += 1
      v = op == "+" ? v + term : v - term
    end
    v
  end
  def term
    v = factor
    while @s[@i] == "*"
      @i += 1
      v *= factor
    end
    v
  end
  def factor
    if @s[@i] == "("
      @i += 1
      v = expr
      @i += 1
      v
    else
      j = @i
      @i += 1 while @s[@i] =~ /\d/
      @s[j...@i].to_i
    end
  end
end

def gen(r, d) = d.zero? || r.rand < 0.3 ? r.rand(9).to_s : "(#{gen(r, d - 1)}#{%w[+ - *].sample(random: r)}#{gen(r, d - 1)})"
def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
def ack(m, n) = m.zero? ? n + 1 : n.zero? ? ack(m - 1, 1) : ack(m - 1, ack(m, n - 1))
def dive(n) = n.zero? ? 300_000.times.sum : dive(n - 1)   # 90 deep, a third of the time at the bottom

r = Random.new(1)
src = Array.new(12) { gen(r, 12) }.join("+")
stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
n = 0
# for 3 s, and 8 rounds at least: each function sampled, however loaded the machine
until (n += 1) > 8 && Process.clock_gettime(Process::CLOCK_MONOTONIC) > stop
  Parser.new(src).parse
  fib(19)
  ack(2, 120)
  dive(90)
end
EOF
}

# Self and total of every function in the DOT file against the folded stacks.
check_recursion_numbers() {
	ruby -e '
		ref_self = Hash.new(0); ref_total = Hash.new(0); n = 0
		File.foreach(ARGV[1], encoding: "UTF-8") do |l|
		  stack, c = l.chomp.match(/\A(.*) (\d+)\z/).captures
		  c = c.to_i; n += c
		  fns = stack.split(";").map { |f| f.sub(/ \((.*):-?\d+\)\z/, "") }
		  ref_self[fns.last] += c
		  fns.uniq.each { |f| ref_total[f] += c }
		end
		dot = File.read(ARGV[0], encoding: "UTF-8")
		nodes = dot.scan(/^(N\d+) \[label="((?:[^"\\]|\\.)*?)\\n.*?self [\d.]+% \((\d+)\)\\ntotal [\d.]+% \((\d+)\)"/)
		edges = dot.scan(/^(N\d+) -> (N\d+) /)
		id = nodes.to_h { |i, l, _, _| [l, i] }
		out = []
		%w[Parser#expr Parser#term Parser#factor Object#fib Object#ack].each do |f|
		  rows = nodes.select { |_, l, _, _| l == f }
		  abort "#{f}: #{rows.size} nodes, want one" unless rows.size == 1
		  _, _, s, t = rows[0]
		  [[s.to_i, ref_self[f], "self"], [t.to_i, ref_total[f], "total"]].each do |got, want, what|
		    abort "#{f}: #{what} #{got} samples, the folded stacks say #{want}" if (got - want).abs > [0.02 * want, 1].max
		  end
		  out << "#{f} self #{s}/#{ref_self[f]} total #{t}/#{ref_total[f]}"
		end
		%w[Object#fib Object#ack].each { |f| abort "no loop edge on #{f}" unless edges.include?([id[f], id[f]]) }
		[%w[Parser#expr Parser#term], %w[Parser#term Parser#factor], %w[Parser#factor Parser#expr]].each do |a, b|
		  abort "no call #{a} -> #{b}" unless edges.include?([id[a], id[b]])
		end
		puts "#{n} samples: #{out.join("; ")}; loops on fib and ack, the cycle expr -> term -> factor -> expr"
	' "$1" "$2"
}

check_callgraph() {
	write_recursion_target
	record_cmd callgraph/record "$work/recursion.raw.gz" -r 200 -- ruby --disable-gems "$work/recursion.rb" || return
	local msg out f
	for f in recursion.dot recursion.callgraph.svg recursion.txt; do
		# nothing pruned: every function with samples is compared, in the DOT and drawn
		if ! timeout 60 "$RBPEEK" report -i "$work/recursion.raw.gz" -o "$work/$f" \
			$([[ $f == *.txt ]] && echo -f collapsed) $([[ $f != *.txt ]] && echo --node-fraction 0 --edge-fraction 0) \
			2>"$work/cg-$f.err"; then
			fail callgraph/report "report -o $f: $(tail -n 2 "$work/cg-$f.err" | tr '\n' ' ')"
			return
		fi
	done
	if msg=$(check_recursion_numbers "$work/recursion.dot" "$work/recursion.txt" 2>&1); then
		ok callgraph/recursion "$msg"
	else
		fail callgraph/recursion "$msg"
	fi
	# the SVG is Graphviz's drawing of the same DOT (a build without it writes DOT text)
	if grep -q 'built without Graphviz' "$work/cg-recursion.callgraph.svg.err"; then
		skip callgraph/svg "this rbpeek is built without Graphviz (install libgraphviz-dev and rebuild)"
		check_sandwich
		return
	elif ! grep -q '<svg' "$work/recursion.callgraph.svg"; then
		fail callgraph/svg "no SVG written: $(head -c 200 "$work/recursion.callgraph.svg")"
		return
	fi
	if ! browser_ready; then
		skip callgraph/browser "${browser_why:-tools/install-browser-deps.sh failed}"
		return
	fi
	out=$(timeout 300 node tests/browser/views.mjs callgraph "$work/recursion.callgraph.svg" \
		--name views/callgraph/browser --dot "$work/recursion.dot" --focus 'Parser#term' \
		--screenshot "$SHOTS/callgraph.png" 2>&1)
	node_results callgraph/browser $? "$out"
	check_sandwich
}

# The flame graph's callers and callees of the recursive functions: totals
# as the folded stacks count them (once per sample).
check_sandwich() {
	local totals factor fib out
	if ! timeout 60 "$RBPEEK" report -i "$work/recursion.raw.gz" -o "$work/recursion.svg" 2>"$work/sw.err"; then
		fail sandwich "report: $(tail -n 2 "$work/sw.err" | tr '\n' ' ')"
		return
	fi
	totals=$(ruby -e '
		t = Hash.new(0)
		File.foreach(ARGV[0], encoding: "UTF-8") do |l|
		  s, c = l.chomp.match(/\A(.*) (\d+)\z/).captures
		  s.split(";").map { |f| f.sub(/ \((.*):-?\d+\)\z/, "") }.uniq.each { |f| t[f] += c.to_i }
		end
		puts t["Parser#factor"], t["Object#fib"]' "$work/recursion.txt")
	{ read -r factor; read -r fib; } <<<"$totals"
	out=$(timeout 300 node tests/browser/views.mjs sandwich "$work/recursion.svg" --name views/sandwich \
		--fn 'Parser#factor' --total "$factor" --caller 'Parser#term' --callee 'Parser#expr' \
		--search '^Object#fib ' --search-total "$fib" --screenshot "$SHOTS/sandwich.png" 2>&1)
	node_results sandwich $? "$out"
	# where the flame graph of this deep recursion opens (issue 25 item 5)
	out=$(timeout 300 node tests/browser/flamegraph.mjs "$work/recursion.svg" --name views/flamegraph-deep \
		--expect 'Object#dive' 2>&1)
	node_results flamegraph-deep $? "$out"
}

# A big real program (rubocop linting rbpeek's lib/, twice) in every view:
# nothing outside the image, no NaN, no JS error.
check_real() {
	if ! command -v rubocop >/dev/null; then
		skip real "rubocop not installed (Debian package rubocop)"
		return
	fi
	local run out f
	for run in 1 2; do   # rubocop exits 1 when it finds offences: only the file matters
		XDG_CACHE_HOME=$work/cache timeout 120 "$RBPEEK" record --silent -r 200 -o "$work/rubocop-$run.raw.gz" \
			-- rubocop --cache false lib >/dev/null 2>"$work/real.err"
		[[ -s $work/rubocop-$run.raw.gz ]] ||
			{ fail real/record "record -- rubocop: $(tail -n 3 "$work/real.err" | tr '\n' ' ')"; return; }
	done
	for f in rubocop.svg rubocop.callgraph.svg; do
		timeout 120 "$RBPEEK" report -i "$work/rubocop-2.raw.gz" -o "$work/$f" 2>"$work/real.err" ||
			{ fail real/report "report -o $f: $(tail -n 2 "$work/real.err" | tr '\n' ' ')"; return; }
	done
	timeout 120 "$RBPEEK" report --diff "$work/rubocop-1.raw.gz" -i "$work/rubocop-2.raw.gz" \
		-o "$work/rubocop-diff.svg" 2>"$work/real.err" ||
		{ fail real/report "report --diff: $(tail -n 2 "$work/real.err" | tr '\n' ' ')"; return; }
	browser_ready || { skip real/browser "${browser_why:-tools/install-browser-deps.sh failed}"; return; }
	for f in rubocop.svg rubocop.callgraph.svg rubocop-diff.svg; do
		out=$(timeout 300 node tests/browser/views.mjs sane "$work/$f" --name "views/real/${f%.svg}" 2>&1)
		node_results "real/$f" $? "$out"
	done
}

main() {
	[[ -x $RBPEEK ]] || { fail build "$RBPEEK not built (run make)"; return; }
	command -v ruby >/dev/null || { fail target "ruby not found (run tools/install-deps.sh)"; return; }
	check_speedscope_active
	check_diff
	check_callgraph
	check_real
}

main
exit $failed
