# frozen_string_literal: true

# native_main.rb EXT.so [late] - the --native test target: a known Ruby
# stack around a known C call chain (tests/targets/ext/native_test.c):
#
#   <main> -> Work.run -> NativeTest.call_back (C: ext_call_back -> ext_yielder
#   -> rb_yield) -> block in Work.run -> Work.deep -> NativeTest.spin
#   (C: ext_outer -> ext_inner, forever)
#
# With "late", READY comes first and the extension is loaded a second later
# (a library mapped after rbpeek attached).
late = ARGV[1] == "late"
if late
  $stdout.puts "READY"
  $stdout.flush
  sleep 1
end
require ARGV[0]

module Work
  def self.run
    NativeTest.call_back { deep }
  end

  def self.deep
    NativeTest.spin(1_000_000)
  end
end

unless late
  $stdout.puts "READY"
  $stdout.flush
end
Work.run
