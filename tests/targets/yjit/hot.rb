# hot.rb - threads parked in code that YJIT compiled (run it with --yjit
# --yjit-call-threshold=1, or --zjit --zjit-call-threshold=1): a thread blocked in a C method (sleep) called
# from compiled methods, and two threads spinning in compiled loops, one on a
# global variable (YJIT saves the PC before each access), one on a local
# variable only (no call, nothing that makes YJIT write cfp->pc).  With
# RBPEEK_YJIT_INFO=FILE, writes YJIT's state to FILE as JSON first: whether
# it is enabled, and how many bytes of code compiling Hot#warm produced.
# Expected stacks: hot.expect.
require_relative "../support/harness"

class Hot
  def add(a, b)
    a + b
  end

  def warm(n)
    s = 0
    i = 0
    while i < n
      s = add(s, i)
      i += 1
    end
    s
  end

  def park
    warm(1000)
    deeper
  end

  def deeper
    sleep
  end

  def spin_global
    warm(1000)
    RbpeekTarget.spinning!
    $spin += 1 while true
  end

  def spin_local
    warm(1000)
    x = 0
    RbpeekTarget.spinning!
    $spin += 1
    x += 1 while true
  end
end

if (info = ENV["RBPEEK_YJIT_INFO"])
  # YJIT, or (4.0+, run with --zjit) ZJIT: the same frames are expected
  zjit = defined?(RubyVM::ZJIT) && RubyVM::ZJIT.enabled? ? true : false
  enabled = zjit || (defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? true : false)
  # what compiling makes: YJIT's code bytes; ZJIT's compiled iseqs (its
  # code size is counted in whole pages without --zjit-stats)
  size = lambda do
    if zjit then RubyVM::ZJIT.stats[:compiled_iseq_count].to_i
    elsif enabled then RubyVM::YJIT.runtime_stats[:inline_code_size].to_i
    else 0
    end
  end
  before = size.call
  Hot.new.warm(10)
  RbpeekTarget.atomic_write(info, JSON.generate("enabled" => enabled, "warm_code_bytes" => size.call - before))
end

Thread.new { Thread.current.name = "hot-sleep"; Hot.new.park }
Thread.new { Thread.current.name = "hot-global"; Hot.new.spin_global }
Thread.new { Thread.current.name = "hot-local"; Hot.new.spin_local }

RbpeekTarget.ready!
sleep
