#!/usr/bin/env bash
# 20-clients.sh - rbpeek's speedscope, pprof, callgrind and chrome formats
# read by the real programs people open them with, from one recording of a
# real Ruby 3.1 program with a known hot spot (Hot.hot_spot on the main
# thread, a fib-computing worker thread, a sleeping watchdog thread):
#   record          `rbpeek record --pid PID -d 2 -f raw -o x.raw.gz --silent`
#   reference       self and total samples per function (label, file), from
#                   `report -f collapsed`, are the numbers every client must show
#   pprof           `go tool pprof -top -sample_index=samples`: total samples =
#                   ours, every function's flat and cum = our self and total,
#                   the hot spot on top of the main thread (-tagfocus); and
#                   the wall values = samples x period
#   callgrind       `callgrind_annotate`: PROGRAM TOTALS = ours, every
#                   function's self cost and (--inclusive=yes) inclusive cost
#                   = ours, under recursion too
#   callgrind-golden  the same for tests/golden/callgrind.txt against
#                   tests/golden/collapsed.txt (mutual recursion, a child
#                   process, C frames without a file)
#   speedscope      the JSON validates against speedscope's own
#                   file-format-schema.json (a JSON-schema check written here),
#                   one profile per thread, weights add up to samples/rate
#   chrome          the trace parses, every thread is named, X slices nest
#                   properly per thread, otherData.samples = ours
#   browser/...     tests/browser/speedscope.mjs: the speedscope app loads the
#                   speedscope file and the chrome trace (two importers) with
#                   no error, one profile per thread, the hot spot listed;
#                   and the golden speedscope and chrome files of the unit test
#   report-twice    converting the raw file twice gives the same bytes
#   direct/FORMAT   `record -f FORMAT` straight to each format (collapsed
#                   too) = `report` from the raw file that recording left in
#                   the cache directory (path read from its stderr)
# Prints "ok NAME" / "FAIL NAME: reason" / "skip NAME: reason"; exit 1 on a FAIL.
#   BUILD=build-asan tests/formats/20-clients.sh   runs it with that build
set -uo pipefail
. "$(dirname "$0")/lib.sh"
formats_init clients

write_target() {
	cat >"$work/target.rb" <<'EOF'
module Hot
  def self.hot_spot(n)
    s = 0
    n.times { |i| s += i * i % 7 }
    s
  end

  def self.cool(n) = n.times.sum

  def self.fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
end

Thread.new { sleep 60; exit!(3) }   # never outlive a broken test
worker = Thread.new { loop { Hot.fib(22) } }
worker.name = "fib-worker"
$stdout.sync = true
puts "ready"
loop do
  Hot.hot_spot(60_000)
  Hot.cool(10_000)
end
EOF
}

# sanitized FILE: whether a sanitizer reported something in FILE

# The checks written in Ruby: check.rb COMMAND ARGS... prints one line
# (a summary, or the reason) and exits 1 on a mismatch.
write_checker() {
	cat >"$work/check.rb" <<'EOF'
require "json"

# self / total samples per function "path\0label" from folded stacks
# ("label (path:line);... count"; C functions without a file have no "(...)").
def reference(collapsed)
  self_c = Hash.new(0); total = Hash.new(0); n = 0
  File.foreach(collapsed, encoding: "UTF-8") do |line|
    stack, count = line.chomp.match(/\A(.*) (\d+)\z/).captures
    count = count.to_i; n += count
    fns = stack.split(";").map do |f|
      m = f.match(/\A(.*) \((.*):-?\d+\)\z/)
      m ? "#{m[2]}\0#{m[1]}" : "\0#{f}"
    end
    self_c[fns.last] += count
    fns.uniq.each { |f| total[f] += count }
  end
  [n, self_c, total]
end

def label(f) = f.split("\0", 2)[1]

def mismatches(want, got)
  (want.keys | got.keys).filter_map do |k|
    "#{k.tr("\0", ":")} #{got[k] || 0} (want #{want[k] || 0})" if (want[k] || 0) != (got[k] || 0)
  end
end

cmd, *args = ARGV
case cmd
when "pprof"   # pprof TOP_FILE TOP_MAIN_FILE COLLAPSED HOT
  top, top_main, collapsed, hot = args
  n, self_c, total = reference(collapsed)
  text = File.read(top, encoding: "UTF-8")
  shown = text[/Showing nodes accounting for (\d+), [\d.]+% of (\d+) total/, 2]
  abort "no total in go tool pprof output: #{text[0, 300].inspect}" unless shown
  abort "go tool pprof: #{shown} samples in total, rbpeek: #{n}" unless shown.to_i == n
  rows = text.lines.filter_map do |l|
    m = l.match(/\A\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+?)\s*\z/)
    m && [m[3], m[1].to_i, m[2].to_i]
  end
  # pprof shows functions by name: compare the labels that are unique here
  by_label = self_c.keys.|(total.keys).group_by { |f| label(f) }
  unique = by_label.select { |_, fs| fs.size == 1 }.transform_values(&:first)
  flat = rows.to_h { |name, f, _| [name, f] }
  cum = rows.to_h { |name, _, c| [name, c] }
  bad = unique.filter_map do |name, f|
    "#{name}: flat #{flat[name].inspect} cum #{cum[name].inspect}, want #{self_c[f]} #{total[f]}" \
      if flat[name] != self_c[f] || cum[name] != total[f]
  end
  abort "#{bad.size} functions differ: #{bad.first(3).join("; ")}" unless bad.empty?
  main_rows = File.read(top_main, encoding: "UTF-8").lines.filter_map do |l|
    l[/\A\s*\d+\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+?)\s*\z/, 1]
  end
  abort "main thread's hottest function is #{main_rows.first.inspect}, not #{hot}" \
    unless main_rows.first&.include?(hot)
  puts "#{n} samples, #{unique.size} functions match, main thread's top: #{main_rows.first}"
when "callgrind"   # callgrind SELF_FILE INCL_FILE COLLAPSED
  self_file, incl_file, collapsed = args
  n, self_c, total = reference(collapsed)
  parse = lambda do |file|
    text = File.read(file, encoding: "UTF-8")
    tot = text[/^([\d,]+) \S*\s*PROGRAM TOTALS/, 1]&.delete(",").to_i
    fns = {}
    text.lines.each do |l|
      m = l.match(/\A\s*([\d,]+) \(\s*[\d.]+%\)\s+(.+?):(.+?)\s*\z/) or next
      # folded stacks write ';' in names as ':'
      fns["#{m[2] == "???" ? "" : m[2]}\0#{m[3].tr(";", ":")}"] = m[1].delete(",").to_i
    end
    [tot, fns]
  end
  tot, got_self = parse.(self_file)
  abort "callgrind_annotate: PROGRAM TOTALS #{tot}, rbpeek: #{n}" unless tot == n
  bad = mismatches(self_c, got_self)
  abort "self cost differs: #{bad.first(3).join("; ")}" unless bad.empty?
  _, got_incl = parse.(incl_file)
  # the synthetic per-thread roots hold every sample of their thread
  roots = got_incl.select { |k, _| k =~ /\A\0(pid \d+ )?thread \d+/ }
  got_incl = got_incl.reject { |k, _| roots.key?(k) }
  bad = mismatches(total, got_incl)
  abort "inclusive cost differs: #{bad.first(3).join("; ")}" unless bad.empty?
  # ...but for stacks whose outermost frame is a thread or process root of
  # the profile itself (--threads, --subprocesses: no file)
  own = File.foreach(collapsed, encoding: "UTF-8").sum do |l|
    l.split(";").first =~ /\A.* \(.*:-?\d+\)( \d+)?\z/ ? 0 : l.chomp[/ (\d+)\z/, 1].to_i
  end
  abort "thread roots hold #{roots.values.sum} samples, want #{n} - #{own}" unless roots.values.sum == n - own
  puts "#{n} samples, #{self_c.size} self and #{total.size} inclusive costs match, #{roots.size} threads"
when "speedscope"   # speedscope FILE SCHEMA COLLAPSED THREADS RATE
  file, schema_file, collapsed, threads, rate = args
  n, = reference(collapsed)
  doc = JSON.parse(File.read(file, encoding: "UTF-8"))
  schema = JSON.parse(File.read(schema_file))
  errors = []
  validate = lambda do |v, s, path|
    s = schema.dig(*s["$ref"].delete_prefix("#/").split("/")) while s["$ref"]
    if s["anyOf"]
      matched = s["anyOf"].any? do |alt|
        before = errors.size
        validate.(v, alt, path)
        errors.size == before || (errors.slice!(before..) && false)
      end
      errors << "#{path}: matches none of anyOf" unless matched
    end
    ok_type = case s["type"]
              when nil then true
              when "object" then v.is_a?(Hash)
              when "array" then v.is_a?(Array)
              when "string" then v.is_a?(String)
              when "number" then v.is_a?(Numeric)
              when "boolean" then v == true || v == false
              else raise "schema type #{s["type"]} not handled"
              end
    return errors << "#{path}: not a #{s["type"]}" unless ok_type
    errors << "#{path}: #{v.inspect} is not #{s["const"].inspect}" if s.key?("const") && v != s["const"]
    errors << "#{path}: #{v.inspect} not in #{s["enum"]}" if s["enum"] && !s["enum"].include?(v)
    if v.is_a?(Hash)
      (s["required"] || []).each { |k| errors << "#{path}: no #{k}" unless v.key?(k) }
      (s["properties"] || {}).each { |k, ps| validate.(v[k], ps, "#{path}.#{k}") if v.key?(k) }
    end
    v.each_with_index { |x, i| validate.(x, s["items"], "#{path}[#{i}]") } if v.is_a?(Array) && s["items"]
  end
  validate.(doc, schema, "$")
  abort "schema: #{errors.size} errors: #{errors.first(3).join("; ")}" unless errors.empty?
  profiles = doc["profiles"]
  abort "#{profiles.size} profiles, #{threads} threads" unless profiles.size == threads.to_i
  nframes = doc["shared"]["frames"].size
  samples = profiles.sum { |p| p["samples"].size }
  abort "#{samples} samples in the profiles, #{n} recorded" unless samples == n
  profiles.each do |p|
    abort "#{p["name"]}: #{p["samples"].size} samples, #{p["weights"].size} weights" \
      unless p["samples"].size == p["weights"].size
    abort "#{p["name"]}: frame index out of range" unless p["samples"].flatten.all? { |i| i.is_a?(Integer) && i >= 0 && i < nframes }
    want = p["samples"].size / rate.to_f
    sum = p["weights"].sum
    abort "#{p["name"]}: weights add up to #{sum}, want #{want}" unless (sum - want).abs < 1e-6 * [want, 1].max
    abort "#{p["name"]}: endValue #{p["endValue"]}, want #{want}" unless (p["endValue"] - p["startValue"] - want).abs < 1e-6 * [want, 1].max
  end
  puts "schema ok, #{profiles.size} profiles (#{profiles.map { |p| p["name"] }.join(", ")}), #{n} samples"
when "chrome"   # chrome FILE COLLAPSED THREADS
  file, collapsed, threads = args
  n, = reference(collapsed)
  doc = JSON.parse(File.read(file, encoding: "UTF-8"))
  ev = doc["traceEvents"]
  abort "no traceEvents array" unless ev.is_a?(Array)
  abort "displayTimeUnit #{doc["displayTimeUnit"].inspect}" unless doc["displayTimeUnit"] == "ms"
  abort "otherData.samples #{doc.dig("otherData", "samples")}, want #{n}" unless doc.dig("otherData", "samples") == n
  names = ev.select { |e| e["ph"] == "M" && e["name"] == "thread_name" }.to_h { |e| [[e["pid"], e["tid"]], e["args"]["name"]] }
  slices = ev.select { |e| e["ph"] == "X" }
  abort "events other than M and X: #{(ev.map { |e| e["ph"] }.uniq - %w[M X]).inspect}" unless ev.all? { |e| %w[M X].include?(e["ph"]) }
  by_thread = slices.group_by { |e| [e["pid"], e["tid"]] }
  abort "#{by_thread.size} threads with slices, #{names.size} named, #{threads} recorded" \
    unless by_thread.size == threads.to_i && (by_thread.keys - names.keys).empty?
  depth = 0
  by_thread.each do |key, es|
    stack = []
    es.sort_by.with_index { |e, i| [e["ts"], -e["dur"], i] }.each do |e|
      %w[name ts dur].each { |k| abort "slice without #{k}: #{e}" unless e.key?(k) }
      abort "negative duration: #{e}" if e["dur"] < 0
      stack.pop while stack.any? && stack.last[1] <= e["ts"]
      if stack.any? && e["ts"] + e["dur"] > stack.last[1]
        abort "thread #{key}: #{e["name"]} [#{e["ts"]}, #{e["ts"] + e["dur"]}] overlaps its parent's end #{stack.last[1]}"
      end
      stack << [e["ts"], e["ts"] + e["dur"]]
      depth = [depth, stack.size].max
    end
  end
  puts "#{slices.size} slices on #{by_thread.size} threads (#{names.values.join(", ")}), nested, max depth #{depth}"
when "count"   # count COLLAPSED
  puts reference(args[0])[0]
else
  abort "unknown check #{cmd}"
end
EOF
}

# go tool pprof: Debian's golang-go (tools/install-deps.sh --packaging, run
# by make test's set-up; a test installs nothing)
have_go() {
	command -v go >/dev/null
}

# report FORMAT OUT: convert the raw file; fails the check NAME on error
report() {
	local name=$1 format=$2 out=$3
	if ! timeout 60 "$RBPEEK" report --idle -i "$raw" -f "$format" -o "$out" 2>"$work/report.err"; then
		fail "$name" "report -f $format: $(tail -n 2 "$work/report.err" | tr '\n' ' ')"
		return 1
	elif sanitized "$work/report.err"; then
		fail "$name" "report -f $format: $(grep -m1 -E 'Sanitizer|runtime error' "$work/report.err")"
		return 1
	fi
}

check_pprof() {
	report pprof pprof "$work/x.pb.gz" || return
	if ! have_go; then
		skip pprof "go tool pprof not available (golang-go: tools/install-deps.sh --packaging)"
		return
	fi
	local gohome=$work/gohome msg
	mkdir -p "$gohome"
	# -sample_index=samples: counts; every node shown, no trimming
	if ! HOME=$gohome GOCACHE=$gohome/cache timeout 120 go tool pprof -top -sample_index=samples \
		-nodecount=100000 -nodefraction=0 -edgefraction=0 "$work/x.pb.gz" >"$work/top.txt" 2>&1 ||
	   ! HOME=$gohome GOCACHE=$gohome/cache timeout 120 go tool pprof -top -sample_index=samples \
		-tagfocus="thread_name=main" "$work/x.pb.gz" >"$work/top-main.txt" 2>&1; then
		fail pprof "go tool pprof failed: $(tail -n 2 "$work/top.txt" "$work/top-main.txt" | tr '\n' ' ')"
		return
	fi
	if msg=$(ruby "$work/check.rb" pprof "$work/top.txt" "$work/top-main.txt" "$work/ref.txt" hot_spot 2>&1); then
		ok "pprof: $msg"
	else
		fail pprof "$msg"
	fi
	# the wall values: samples x period (10 ms at 100 Hz)
	local wall
	wall=$(HOME=$gohome GOCACHE=$gohome/cache timeout 120 go tool pprof -top -sample_index=wall -unit=ms -nodefraction=0 \
		"$work/x.pb.gz" 2>&1 | sed -n 's/.*Showing nodes accounting for \([0-9.]*\)ms.*/\1/p')
	if [[ $wall == "$((samples * 10))" ]]; then
		ok "pprof-wall: ${wall} ms = $samples x 10 ms"
	else
		fail pprof-wall "go tool pprof shows ${wall:-nothing} ms of wall time, want $((samples * 10))"
	fi
}

check_callgrind() {
	report callgrind callgrind "$work/x.callgrind.out" || return
	if ! command -v callgrind_annotate >/dev/null; then
		skip callgrind "callgrind_annotate not found (Debian package valgrind)"
		return
	fi
	local msg
	# run elsewhere than the target's directory: it strips the working directory from fl= names
	if ! (cd / && timeout 60 callgrind_annotate --auto=no --threshold=100 "$work/x.callgrind.out") >"$work/cg-self.txt" 2>&1 ||
	   ! (cd / && timeout 60 callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$work/x.callgrind.out") \
		>"$work/cg-incl.txt" 2>&1; then
		fail callgrind "callgrind_annotate failed: $(tail -n 2 "$work/cg-self.txt" | tr '\n' ' ')"
	elif grep -q 'WARNING' "$work/cg-self.txt" "$work/cg-incl.txt"; then
		fail callgrind "callgrind_annotate: $(grep -m1 WARNING "$work/cg-self.txt" "$work/cg-incl.txt")"
	elif msg=$(ruby "$work/check.rb" callgrind "$work/cg-self.txt" "$work/cg-incl.txt" "$work/ref.txt" 2>&1); then
		ok "callgrind: $msg"
	else
		fail callgrind "$msg"
	fi
}

# The synthetic profile of tests/unit/test_formats.c (mutual recursion, a
# child process, C frames without a file): its golden callgrind file read by
# callgrind_annotate against its golden folded stacks.
check_callgrind_golden() {
	command -v callgrind_annotate >/dev/null || return
	local msg g=tests/golden cg=$PWD/tests/golden/callgrind.txt
	if ! (cd / && timeout 60 callgrind_annotate --auto=no --threshold=100 "$cg") \
		>"$work/gg-self.txt" 2>&1 ||
	   ! (cd / && timeout 60 callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$cg") \
		>"$work/gg-incl.txt" 2>&1; then
		fail callgrind-golden "callgrind_annotate failed: $(tail -n 2 "$work/gg-self.txt" | tr '\n' ' ')"
	elif msg=$(ruby "$work/check.rb" callgrind "$work/gg-self.txt" "$work/gg-incl.txt" "$g/collapsed.txt" 2>&1); then
		ok "callgrind-golden: $msg"
	else
		fail callgrind-golden "$msg"
	fi
}

check_speedscope() {
	report speedscope speedscope "$work/x.speedscope.json" || return
	local schema=tests/browser/node_modules/speedscope/dist/release/file-format-schema.json msg
	if [[ ! -f $schema ]]; then
		skip speedscope "no $schema (make test's set-up installs it: tools/install-browser-deps.sh)"
	elif msg=$(ruby "$work/check.rb" speedscope "$work/x.speedscope.json" "$schema" "$work/ref.txt" \
		"$threads" "$rate" 2>&1); then
		ok "speedscope: $msg"
	else
		fail speedscope "$msg"
	fi
}

check_chrome() {
	report chrome chrome "$work/x.trace.json" || return
	local msg
	if msg=$(ruby "$work/check.rb" chrome "$work/x.trace.json" "$work/ref.txt" "$threads" 2>&1); then
		ok "chrome: $msg"
	else
		fail chrome "$msg"
	fi
}

check_browser() {
	local why out
	if ! why=$(tools/install-browser-deps.sh --check 2>&1); then
		skip browser "${why:-tools/install-browser-deps.sh failed}"
		return
	fi
	[[ -s $work/x.speedscope.json && -s $work/x.trace.json ]] || return
	# and the unit test's synthetic profile (speedscope detects formats by content)
	cp tests/golden/speedscope.txt "$work/golden.speedscope.json"
	cp tests/golden/chrome.txt "$work/golden.trace.json"
	out=$(timeout 300 node tests/browser/speedscope.mjs --name clients/browser --screenshot-dir "$SHOTS" \
		--load "$work/x.speedscope.json" --profiles "$threads" \
		--expect 'Hot.hot_spot' --expect 'block in Hot.hot_spot' --expect 'Hot.fib' \
		--load "$work/x.trace.json" --profiles "$threads" \
		--expect 'Hot.hot_spot' --expect 'Hot.fib' \
		--load "$work/golden.speedscope.json" --profiles 3 --expect 'Weird#"odd;name"' --expect 'Ünïcödé#grüß' \
		--load "$work/golden.trace.json" --profiles 3 --expect 'Weird#"odd;name"' --expect 'Ünïcödé#grüß' 2>&1)
	node_results browser $? "$out"
}

# Converting the same raw file twice gives the same bytes, in every format.
check_report_twice() {
	local f diff=()
	for f in collapsed speedscope pprof callgrind chrome; do
		report report-twice "$f" "$work/twice.$f" || return
		cmp -s "$work/twice.$f" "$work/x.$(ext "$f")" || diff+=("$f")
	done
	if ((${#diff[@]})); then
		fail report-twice "a second conversion differs: ${diff[*]}"
	else
		ok report-twice
	fi
}

ext() {
	case $1 in
	collapsed) echo collapsed.txt ;; speedscope) echo speedscope.json ;; pprof) echo pb.gz ;;
	callgrind) echo callgrind.out ;; chrome) echo trace.json ;;
	esac
}

# record -f FORMAT straight to the format = report from that recording's raw file.
check_direct() {
	local f out rawf
	start_target || { fail direct "the Ruby target never got ready again"; return; }
	for f in collapsed speedscope pprof callgrind chrome; do
		out=$work/direct.$(ext "$f")
		rm -rf "$work/cache-direct"
		if ! XDG_CACHE_HOME=$work/cache-direct timeout 60 "$RBPEEK" record --pid "$pid" -d 1 -f "$f" \
			-o "$out" --silent 2>"$work/direct.err"; then
			fail "direct/$f" "record -f $f: $(tail -n 2 "$work/direct.err" | tr '\n' ' ')"
			continue
		fi
		rawf=$(sed -n 's/^rbpeek: raw profile: \(.*\) (convert with.*/\1/p' "$work/direct.err")
		if sanitized "$work/direct.err"; then
			fail "direct/$f" "$(grep -m1 -E 'Sanitizer|runtime error' "$work/direct.err")"
		elif [[ -z $rawf || ! -f $rawf ]]; then
			fail "direct/$f" "no raw file named on stderr: $(tail -n 2 "$work/direct.err" | tr '\n' ' ')"
		elif ! timeout 60 "$RBPEEK" report -i "$rawf" -f "$f" -o "$out.report" 2>"$work/report.err"; then
			fail "direct/$f" "report: $(tail -n 2 "$work/report.err" | tr '\n' ' ')"
		elif ! cmp -s "$out" "$out.report"; then
			fail "direct/$f" "record -f $f and report -f $f of its raw file differ"
		else
			ok "direct/$f: $(wc -c <"$out") bytes, identical"
		fi
	done
	stop_target
}

main() {
	[[ -x $RBPEEK ]] || { fail build "$RBPEEK not built (run make)"; return; }
	command -v ruby >/dev/null || { fail target "ruby not found (run tools/install-deps.sh)"; return; }
	local version
	version=$(ruby -e 'print RUBY_VERSION')
	[[ $version == 3.1.* ]] || { skip all "the host's Ruby is $version, this test is written for 3.1"; return; }
	write_checker
	start_target || { fail target "the Ruby target never got ready: $(head -c 300 "$work/target.err")"; return; }
	raw=$work/x.raw.gz
	XDG_CACHE_HOME=$work/cache timeout 60 "$RBPEEK" record --pid "$pid" -d 2 -f raw -o "$raw" \
		--silent 2>"$work/record.err"
	local rc=$?
	stop_target
	if ((rc != 0)) || [[ ! -s $raw ]]; then
		fail record "exit $rc: $(tail -n 3 "$work/record.err" | tr '\n' ' ')"
		return
	elif sanitized "$work/record.err"; then
		fail record "sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$work/record.err")"
	else
		ok record
	fi
	report reference collapsed "$work/x.collapsed.txt" || return
	cp "$work/x.collapsed.txt" "$work/ref.txt"
	report reference summary "$work/summary.txt" || return
	# "rbpeek summary: pid P (ruby V), 2.0 s at 100 Hz, N samples, T threads"
	samples=$(sed -n '1s/.* \([0-9]*\) samples, .*/\1/p' "$work/summary.txt")
	threads=$(sed -n '1s/.*, \([0-9]*\) threads$/\1/p' "$work/summary.txt")
	rate=$(sed -n '1s/.* at \([0-9]*\) Hz.*/\1/p' "$work/summary.txt")
	if [[ -z $samples || $samples != "$(ruby "$work/check.rb" count "$work/ref.txt")" || -z $threads ]]; then
		fail reference "summary says '$(head -n 1 "$work/summary.txt")', collapsed adds up to $(ruby "$work/check.rb" count "$work/ref.txt")"
		return
	fi
	ok "reference: $samples samples, $threads threads, ruby $version"
	check_pprof
	check_callgrind
	check_callgrind_golden
	check_speedscope
	check_chrome
	check_browser
	check_report_twice
	check_direct
}

main
exit $failed
