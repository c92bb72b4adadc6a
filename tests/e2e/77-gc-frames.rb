# frozen_string_literal: true
#
# 77-gc-frames.rb - GC frames in samples, on the host's Ruby and on every
# chroot's (2.7, 3.3, 3.4).  The target (tests/targets/memory/gcloop.rb)
# alternates GC.start with as much CPU time of plain Ruby work, and reports
# its own GC time on SIGUSR2 (GC.stat(:time) on 3.1+, GC::Profiler before;
# both in process CPU time):
#   gc/rubyX.Y/share   rbpeek record --on-cpu: the share of samples with a
#                      "(GC: ...)" frame matches the share of CPU time Ruby
#                      says it spent in GC over the same window (within
#                      0.15); "(GC: marking)" is seen; GC frames sit on top
#                      of GC.start's frame
#   gc/rubyX.Y/no-gc   record --no-gc has samples and no GC frame
# and, on the host, gc/formats: a raw recording reported in every format
# carries the GC frame's label; gc/snapshot: snapshot --json shows a "gc"
# frame on top of the main thread's stack at least once in a few tries.
require "zlib"
require_relative "lib/memory"
include E2E

TOLERANCE = 0.15
CACHE = File.join(OUT, "xdg77.#{$$}") # record's raw files
at_exit { FileUtils.rm_rf(CACHE) }
GC_FRAME = /\A\(GC(: (marking|sweeping|compacting))?\)\z/.freeze

def names_for(xy)
  %w[share no-gc].map { |n| "gc/ruby#{xy}/#{n}" }
end
HOST_NAMES = %w[gc/formats gc/snapshot].freeze

all = HOST_NAMES + (Chroots::ALL + [RUBY_VERSION[/\A\d+\.\d+/]]).uniq.flat_map { |v| names_for(v) }
exit 0 if skip_unless_tracing(all)

def rec(*args)
  rbpeek("record", *args, "--silent", timeout: 20, env: { "XDG_CACHE_HOME" => CACHE })
end

# {[frame labels, root first] => samples} of collapsed output.
def stacks_of(text)
  text.dup.force_encoding("UTF-8").each_line.to_h do |l|
    stack, _, n = l.chomp.rpartition(" ")
    [stack.split(";").map { |f| f.sub(/ \([^()]*:\d+\)\z/, "") }, n.to_i]
  end
end

def share_test(ruby, t, raw)
  name = "gc/#{ruby.name}/share"
  test(name) do
    before = t.ask("gc")
    res = rec("--pid", t.pid, "-d", 3, "--on-cpu", "-f", "raw", "-o", raw)
    after = t.ask("gc")
    raise "rbpeek record #{res.describe}" unless res.status&.zero?

    col = rbpeek("report", "-i", raw, "-f", "collapsed", "-o", "-")
    raise "rbpeek report #{col.describe}" unless col.status&.zero?

    stacks = stacks_of(col.stdout)
    total = stacks.values.sum
    in_gc = stacks.select { |s, _| s.last.match?(GC_FRAME) }
    gc = in_gc.values.sum
    marking = in_gc.select { |s, _| s.last == "(GC: marking)" }.values.sum
    sweeping = in_gc.select { |s, _| s.last == "(GC: sweeping)" }.values.sum
    misplaced = in_gc.reject { |s, _| s[-2].to_s.match?(/GC\.start/) }
    cpu = after["cpu"] - before["cpu"]
    theirs = cpu.positive? ? (after["gc"] - before["gc"]) / cpu : 0
    ours = total.positive? ? gc.to_f / total : 0
    problems = []
    problems << "only #{total} samples" if total < 20
    problems << "GC share #{ours.round(3)} (#{gc}/#{total} samples), Ruby measured #{theirs.round(3)}" if (ours - theirs).abs > TOLERANCE
    problems << "no (GC: marking) sample" if marking.zero?
    problems << "GC frames not on top of GC.start: #{misplaced.keys.first(2).inspect}" unless misplaced.empty?
    report(name, problems, "rbpeek #{(100 * ours).round(1)}% of #{total} on-CPU samples " \
                           "(marking #{marking}, sweeping #{sweeping}), Ruby #{(100 * theirs).round(1)}% of #{cpu.round(2)} s CPU")
  end
end

def no_gc_test(ruby, t)
  name = "gc/#{ruby.name}/no-gc"
  test(name) do
    res = rec("--pid", t.pid, "-d", 1, "--no-gc", "-f", "collapsed", "-o", "-")
    raise "rbpeek record #{res.describe}" unless res.status&.zero?

    stacks = stacks_of(res.stdout)
    problems = []
    problems << "no samples" if stacks.empty?
    with_gc = stacks.keys.select { |s| s.any? { |f| f.match?(GC_FRAME) } }
    problems << "GC frames with --no-gc: #{with_gc.first.inspect}" unless with_gc.empty?
    report(name, problems, "#{stacks.values.sum} samples")
  end
end

# Every format's output (as bytes, inflated if gzip'd) mentions the label.
def formats_test(raw)
  test("gc/formats") do
    list = rbpeek("record", "--help").stdout[/^formats:\n(.*)/m, 1].to_s.scan(/^  (\S+)/).flatten - %w[raw]
    problems = []
    list.each do |fmt|
      res = rbpeek("report", "-i", raw, "-f", fmt, "-o", "-")
      next problems << "report -f #{fmt}: #{res.describe}" unless res.status&.zero?

      out = res.stdout
      out = Zlib.gunzip(out) if out.start_with?("\x1f\x8b".b)
      problems << "-f #{fmt}: no \"(GC: marking)\"" unless out.b.include?("(GC: marking)".b)
    end
    problems << "no formats listed by record --help" if list.empty?
    report("gc/formats", problems, list.join(", "))
  end
end

def snapshot_test(t)
  test("gc/snapshot") do
    seen = nil
    40.times do
      snap = json_of(rbpeek("snapshot", "--pid", t.pid, "--json"))
      main = snap["threads"].find { |th| th["main"] }
      top = main && main["frames"].first
      if top && top["kind"] == "gc"
        seen = [top["label"], main["frames"][1]&.dig("label")]
        break
      end
      sleep 0.01
    end
    problems = []
    if seen.nil?
      problems << "no GC frame on the main thread in 40 snapshots"
    else
      problems << "GC frame label #{seen[0].inspect}" unless seen[0].match?(GC_FRAME)
      problems << "under the GC frame: #{seen[1].inspect}, expected GC.start" unless seen[1].to_s.include?("GC.start")
    end
    report("gc/snapshot", problems, seen && seen.join(" on "))
  end
end

FileUtils.mkdir_p(CACHE)
rubies, missing = Memory.rubies
missing.each { |xy, why| names_for(xy).each { |n| skip(n, why) } }
rubies.each_with_index do |ruby, i|
  Memory.with_target(ruby, "gcloop") do |t|
    raw = File.join(CACHE, "gc-#{ruby.xy}.raw.gz")
    share_test(ruby, t, raw)
    no_gc_test(ruby, t)
    next unless i.zero?

    File.exist?(raw) ? formats_test(raw) : fail("gc/formats", "no raw recording to report")
    snapshot_test(t)
  end
rescue StandardError => e
  names_for(ruby.xy).each { |n| fail(n, "#{e.class}: #{e.message}") }
end

finish
