# frozen_string_literal: true
#
# heap_target.rb N - a Ruby process holding about N million objects (half
# plain objects, half strings), for bench/heap.sh.  Prints "ready" once
# built; on SIGUSR2 it times ObjectSpace.count_objects (the in-process peer
# of `rbpeek heap`: the same walk over every slot) and prints
# "count_objects SECONDS SLOTS".
class Item
  def initialize(i)
    @i = i
  end
end

n = (Float(ARGV.fetch(0, "1")) * 1_000_000).to_i
KEEP = Array.new(n / 2) { |i| Item.new(i) } + Array.new(n / 2) { |i| "s#{i}" }
GC.start

trap("USR2") do
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c = ObjectSpace.count_objects
  $stdout.puts "count_objects #{Process.clock_gettime(Process::CLOCK_MONOTONIC) - t} #{c[:TOTAL]}"
  $stdout.flush
end
$stdout.puts "ready"
$stdout.flush
sleep
