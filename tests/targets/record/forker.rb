# frozen_string_literal: true
#
# forker.rb - a process tree for --subprocesses, in the shape of a forking
# server: at start the parent forks two workers busy in `work_a` and
# spawns a non-Ruby child (`sleep`), then says it is ready.  0.3 s after a
# SIGUSR2 (the tree stays as it is until then) it kills the first worker and
# forks a replacement busy in `work_b`; 0.3 s later it spawns `sh`, which
# after 0.3 s execs a Ruby busy in `exec_work`.  The parent idles in `supervise`.  Every child ends with
# the parent (killed at its exit, or quitting once orphaned).
require_relative "ready"

def burn
  i = 0
  i += 1 while i < 10_000
end

def work_a
  loop { burn }
end

def work_b
  loop { burn }
end

def supervise(seconds)
  sleep seconds
end

def worker(name)
  parent = Process.pid
  fork do
    $0 = "forker worker #{name}"
    Thread.new { loop { exit!(0) if Process.ppid != parent; sleep 0.2 } } # orphaned: quit
    name == :a ? work_a : work_b
  end
end

EXEC_RUBY = <<~RUBY
  def exec_work; i = 0; i += 1 while i < 10_000; end
  loop { exec_work; exit!(0) if Process.ppid != #{Process.pid} }
RUBY

kids = [worker(:a), worker(:a)]
kids << Process.spawn("sleep", "10")
at_exit { kids.each { |k| Process.kill("KILL", k) rescue nil } }
Signal.trap("TERM") { exit(0) }
go = false
Signal.trap("USR2") { go = true }
RecordTarget.ready!
supervise(0.05) until go
supervise(0.3)
Process.kill("KILL", kids.shift)
Process.wait
kids << worker(:b)
supervise(0.3)
kids << Process.spawn("sh", "-c", "sleep 0.3; exec #{RbConfig.ruby} --disable-gems -e \"$0\"", EXEC_RUBY)
loop { supervise(1) }
