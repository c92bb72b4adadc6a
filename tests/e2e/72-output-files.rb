# frozen_string_literal: true
#
# 72-output-files.rb - where rbpeek writes: a regular file is written
# through a temporary file and renamed into place, but a device or a FIFO
# given as -o must be written in place (renaming over /dev/null once
# replaced the device with a regular file).
require_relative "lib/e2e"
require "tmpdir"
include E2E

names = %w[output/dev-null output/fifo output/regular-file-replaced]
exit 0 if skip_unless_tracing(names)

with_target("threads") do |t|
  test("output/dev-null") do
    res = rbpeek("record", "--pid", t.pid, "-d", "0.3", "-f", "summary", "-o", "/dev/null", "--silent")
    st = File.stat("/dev/null")
    if !res.status&.zero?
      fail("output/dev-null", "rbpeek #{res.describe}")
    elsif !st.chardev?
      fail("output/dev-null", "/dev/null is no longer a character device (#{st.ftype})")
    else
      ok("output/dev-null")
    end
  end

  Dir.mktmpdir("rbpeek-out") do |dir|
    test("output/fifo") do
      fifo = File.join(dir, "fifo")
      File.mkfifo(fifo)
      reader = Thread.new { File.read(fifo) }
      res = rbpeek("record", "--pid", t.pid, "-d", "0.3", "-f", "summary", "-o", fifo, "--silent")
      text = reader.join(20)&.value.to_s
      if !res.status&.zero?
        fail("output/fifo", "rbpeek #{res.describe}")
      elsif !File.pipe?(fifo)
        fail("output/fifo", "the FIFO was replaced by a #{File.ftype(fifo)}")
      elsif !text.start_with?("rbpeek summary")
        fail("output/fifo", "read #{text[0, 80].inspect} from the FIFO")
      else
        ok("output/fifo")
      end
    end

    test("output/regular-file-replaced") do
      out = File.join(dir, "old.txt")
      File.write(out, "old contents\n")
      res = rbpeek("record", "--pid", t.pid, "-d", "0.3", "-f", "summary", "-o", out, "--silent")
      leftovers = Dir.children(dir).grep(/\.tmp\d+\z/)
      if !res.status&.zero?
        fail("output/regular-file-replaced", "rbpeek #{res.describe}")
      elsif !File.read(out).start_with?("rbpeek summary")
        fail("output/regular-file-replaced", "old contents still there")
      elsif !leftovers.empty?
        fail("output/regular-file-replaced", "temporary files left: #{leftovers.inspect}")
      else
        ok("output/regular-file-replaced")
      end
    end
  end
end
finish
