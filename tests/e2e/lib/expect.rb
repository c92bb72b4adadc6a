# frozen_string_literal: true
#
# expect.rb - the expected stacks of a test target, and the comparisons of
# rbpeek's output (JSON or text) and of Ruby's own view (the oracle dump made
# by tests/targets/support/harness.rb) against them.
#
# Format of tests/targets/NAME.expect (UTF-8):
#
#   # comment                       blank lines and comments are ignored
#   thread "NAME" [main] [name=os] [state=STATE] [gvl=true|false]
#     KIND LABEL   PATH:LINE [*N]   one frame, innermost first
#
# NAME is a JSON string.  `main` marks the main thread (listed first; the
# others follow in creation order).  `name=os` says the name comes from the
# OS thread name (comm), which core files do not record.  KIND is `ruby` or
# `cfunc`; LABEL is rbpeek's qualified label (it may contain spaces); PATH is
# relative to tests/targets (no spaces); `*N` repeats the frame N times.
#
# An expectation for one Ruby version only lives in NAME@X.Y.expect, which
# is used instead of NAME.expect when the target runs Ruby X.Y.

require "json"

module Expect
  Frame = Struct.new(:kind, :label, :path, :line) do
    def to_s
      "#{label} (#{path}:#{line}) #{kind}"
    end
  end

  ThreadSpec = Struct.new(:name, :main, :os_name, :state, :gvl, :frames)

  THREAD_RE = /\Athread\s+("(?:[^"\\]|\\.)*")((?:\s+\S+)*)\s*\z/.freeze
  FRAME_RE = /\A\s+(ruby|cfunc)\s+(.+?)\s+(\S+):(\d+)(?:\s+\*(\d+))?\s*\z/.freeze

  module_function

  # The .expect file for target NAME under Ruby version VERSION ("3.1.2"):
  # NAME@X.Y.expect of the highest X.Y not above VERSION's (what changed in
  # 3.4 holds for 4.0), else NAME.expect.
  def file_for(targets_dir, name, version)
    want = Gem::Version.new(version.split(".")[0, 2].join("."))
    specific = Dir.glob(File.join(targets_dir, "#{name}@*.expect")).map do |f|
      [Gem::Version.new(f[/@(\d+\.\d+)\.expect\z/, 1] || "99"), f]
    end
    best = specific.select { |v, _| v <= want }.max_by(&:first)
    best ? best.last : File.join(targets_dir, "#{name}.expect")
  end

  # Parse an .expect file into ThreadSpecs with absolute paths.
  def load(file, targets_dir)
    base = File.realpath(targets_dir)
    threads = []
    File.foreach(file, encoding: "UTF-8").with_index(1) do |raw, lineno|
      line = raw.chomp
      next if line.strip.empty? || line.lstrip.start_with?("#")

      if (m = THREAD_RE.match(line))
        t = ThreadSpec.new(JSON.parse("[#{m[1]}]")[0], false, false, nil, nil, [])
        m[2].split.each do |attr|
          case attr
          when "main" then t.main = true
          when "name=os" then t.os_name = true
          when /\Astate=(\S+)\z/ then t.state = Regexp.last_match(1)
          when /\Agvl=(true|false)\z/ then t.gvl = Regexp.last_match(1) == "true"
          else raise "#{file}:#{lineno}: unknown thread attribute #{attr.inspect}"
          end
        end
        threads << t
      elsif (m = FRAME_RE.match(line))
        raise "#{file}:#{lineno}: frame before any thread" if threads.empty?

        frame = Frame.new(m[1], m[2], File.join(base, m[3]), m[4].to_i)
        (m[5] ? m[5].to_i : 1).times { threads.last.frames << frame }
      else
        raise "#{file}:#{lineno}: cannot parse #{line.inspect}"
      end
    end
    threads
  end

  # Ruby <= 3.3 labels name the method alone ("block in work", "times");
  # rbpeek (and Ruby 3.4) qualify it ("block in Foo#work", "Integer#times").
  # Reduce either to the unqualified form.
  def unqualify(label)
    if (m = /\A((?:(?:block(?: \(\d+ levels\))?|rescue|ensure) in )+)(.*)\z/m.match(label))
      m[1] + unqualify_method(m[2])
    else
      unqualify_method(label)
    end
  end

  def unqualify_method(name)
    return name if name.start_with?("<")

    name.sub(/\A.*[#.](?=[^#.]+\z)/m, "")
  end

  # Differences between the frames of one thread; at most `limit` reported.
  def frame_diffs(who, expected, got, limit: 3, unqualified: false, kinds: true)
    diffs = []
    if expected.size != got.size
      diffs << "#{who}: #{got.size} frames, expected #{expected.size}"
    end
    [expected.size, got.size].max.times do |i|
      e = expected[i]
      g = got[i]
      same = e && g &&
             (unqualified ? unqualify(e.label) == unqualify(g.label) : e.label == g.label) &&
             e.path == g.path && e.line == g.line && (!kinds || e.kind == g.kind)
      next if same

      diffs << "#{who} frame #{i}: expected #{e ? e.to_s : '(none)'}, got #{g ? g.to_s : '(none)'}"
      break if diffs.size >= limit
    end
    diffs
  end

  def json_frames(thread)
    (thread["frames"] || []).map do |f|
      Frame.new(f["kind"], f["label"].to_s, f["path"].to_s, f["line"])
    end
  end

  # Compare rbpeek's JSON (a parsed Hash) with the expectation.
  #   mode: :live or :core (core files: state "unknown", OS names unknown)
  #   loose_state: accept "running" for a thread expected "sleeping" (a
  #     blocked thread does wake up now and then, inside Ruby)
  # Returns a list of difference messages (empty when all match).
  def snapshot_diffs(snap, spec, mode:, pid:, ruby_version:, loose_state: false)
    diffs = []
    diffs << "pid #{snap['pid'].inspect}, expected #{pid}" if pid && snap["pid"] != pid
    if ruby_version && snap["ruby_version"] != ruby_version
      diffs << "ruby_version #{snap['ruby_version'].inspect}, expected #{ruby_version.inspect}"
    end
    threads = snap["threads"]
    return diffs << "no \"threads\" array" unless threads.is_a?(Array)

    if threads.size != spec.size
      diffs << "#{threads.size} threads (#{threads.map { |t| t['name'] }.inspect}), expected #{spec.size} " \
               "(#{spec.map(&:name).inspect})"
    end
    spec.each_with_index do |e, i|
      g = threads[i]
      who = "thread #{i} #{e.name.inspect}"
      next diffs << "#{who}: missing" unless g

      unless mode == :core && e.os_name
        diffs << "#{who}: name #{g['name'].inspect}" if g["name"] != e.name
      end
      diffs << "#{who}: main #{g['main'].inspect}, expected #{e.main}" if g["main"] != e.main
      diffs << "#{who}: gvl #{g['gvl'].inspect}, expected #{e.gvl}" if !e.gvl.nil? && g["gvl"] != e.gvl
      want_state = mode == :core ? "unknown" : e.state
      loose = loose_state && want_state == "sleeping" && g["state"] == "running"
      if want_state && g["state"] != want_state && !loose
        diffs << "#{who}: state #{g['state'].inspect}, expected #{want_state.inspect}"
      end
      diffs << "#{who}: tid #{g['tid'].inspect} is not a positive integer" unless g["tid"].is_a?(Integer) && g["tid"] > 0
      diffs.concat(frame_diffs(who, e.frames, json_frames(g)))
    end
    tids = threads.map { |t| t["tid"] }
    diffs << "thread ids not distinct: #{tids.inspect}" if tids.uniq.size != tids.size
    diffs
  end

  # Compare Ruby's own view (harness oracle dump) with the expectation:
  # unqualified labels, paths and lines; kinds are not visible to Ruby.
  def oracle_diffs(oracle, spec)
    diffs = []
    threads = oracle["threads"]
    if threads.size != spec.size
      diffs << "Ruby sees #{threads.size} threads (#{threads.map { |t| t['name'] }.inspect}), " \
               "expected #{spec.size} (#{spec.map(&:name).inspect})"
    end
    spec.each_with_index do |e, i|
      g = threads[i]
      who = "thread #{i} #{e.name.inspect}"
      next diffs << "#{who}: missing" unless g

      diffs << "#{who}: Ruby names it #{g['name'].inspect}" unless e.os_name || g["name"] == e.name
      diffs << "#{who}: Ruby says main=#{g['main']}" if g["main"] != e.main
      frames = g["frames"].map { |f| Frame.new(nil, f["label"], f["path"], f["line"]) }
      diffs.concat(frame_diffs(who, e.frames, internal_as_ruby_shows(e.frames, frames), unqualified: true, kinds: false))
    end
    diffs
  end

  # Ruby 4.0's backtrace_locations show a method written in Ruby inside Ruby
  # (a frame at <internal:...>) at its caller's path and line, as for a C
  # method; rbpeek shows where it runs.  Such an oracle frame is taken as the
  # expected one when it sits exactly at the expected caller's line.
  def internal_as_ruby_shows(want, got)
    got.each_with_index.map do |g, j|
      w = want[j]
      outer = want[j + 1]
      if w && outer && w.path.start_with?("<internal:") && g.label == w.label &&
         [g.path, g.line] == [outer.path, outer.line]
        Frame.new(g.kind, g.label, w.path, w.line)
      else
        g
      end
    end
  end

  # Parse rbpeek's text output into the JSON shape (pid, ruby_version,
  # threads with tid, name, gvl, state, frames without kinds).
  def parse_text(text)
    lines = text.split("\n", -1)
    lines.pop while lines.last == ""
    head = /\AProcess (\d+): ruby (\S+), (\d+) threads?\z/.match(lines.shift.to_s)
    raise "first line is not \"Process PID: ruby VERSION, N threads\"" unless head

    snap = { "pid" => head[1].to_i, "ruby_version" => head[2], "threads" => [] }
    count = head[3].to_i
    lines.each_with_index do |line, i|
      if line.empty?
        next
      elsif (m = /\AThread (\d+) ("(?:[^"\\]|\\.)*") \(([^()]*)\)\z/.match(line))
        raise "line #{i + 2}: no blank line before a thread" unless lines[i - 1] == "" || i.zero?

        attrs = m[3].split(", ")
        snap["threads"] << {
          "tid" => m[1].to_i, "name" => JSON.parse("[#{m[2]}]")[0],
          "gvl" => attrs.include?("holds GVL"), "state" => (attrs - ["holds GVL"]).join(", "),
          "frames" => [],
        }
      elsif (m = /\A {4}(\S.*) \(([^()]*):(\d+)\)\z/.match(line))
        raise "line #{i + 2}: frame before any thread" if snap["threads"].empty?

        snap["threads"].last["frames"] << { "label" => m[1], "path" => m[2], "line" => m[3].to_i }
      else
        raise "line #{i + 2}: cannot parse #{line.inspect}"
      end
    end
    if snap["threads"].size != count
      raise "header says #{count} threads, #{snap['threads'].size} listed"
    end

    snap
  end

  # Compare text output (parsed) with the JSON output of the same target.
  def text_diffs(text_snap, json_snap)
    diffs = []
    %w[pid ruby_version].each do |k|
      diffs << "#{k}: text #{text_snap[k].inspect}, json #{json_snap[k].inspect}" if text_snap[k] != json_snap[k]
    end
    jt = json_snap["threads"]
    tt = text_snap["threads"]
    return diffs << "text lists #{tt.size} threads, json #{jt.size}" if tt.size != jt.size

    jt.zip(tt).each_with_index do |(j, t), i|
      who = "thread #{i} #{j['name'].inspect}"
      %w[tid name gvl state].each do |k|
        diffs << "#{who}: #{k} text #{t[k].inspect}, json #{j[k].inspect}" if t[k] != j[k]
      end
      jf = j["frames"].map { |f| [f["label"], f["path"], f["line"]] }
      tf = t["frames"].map { |f| [f["label"], f["path"], f["line"]] }
      next if jf == tf

      k = (0...[jf.size, tf.size].max).find { |n| jf[n] != tf[n] }
      diffs << "#{who} frame #{k}: text #{tf[k].inspect}, json #{jf[k].inspect}"
    end
    diffs
  end
end
