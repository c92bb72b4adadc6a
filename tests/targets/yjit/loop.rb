# loop.rb - one thread spinning in a compiled loop that spans three lines
# (run it with --yjit --yjit-call-threshold=1, or --zjit ...).  Loop#spin is
# called a few times first, so that the JIT has compiled it before the call
# that never returns (a JIT compiles at a call: the frame already running
# stays in the interpreter).  Nothing in the method makes the JIT write
# cfp->pc or leave its code, so the pc a sampler reads is what the JIT saved
# last, not the line running.  tests/e2e/89-yjit.rb records it: the samples
# of Loop#spin must spread over the loop's lines (as in the interpreter) or
# carry rbpeek's "[jit]" mark at the method's first line, never all claim
# one line.
require_relative "../support/harness"

class Loop
  def spin(n)
    a = 0
    b = 0
    while n != 0
      a += 1
      b += a
      n -= 1
    end
    b
  end
end

# $spin (the harness's sign of a spinner going round) is set out here: a
# global variable in the loop's method could make the JIT leave it
Thread.new do
  Thread.current.name = "loop"
  RbpeekTarget.spinning!
  50.times { Loop.new.spin(10) }
  $spin += 1
  Loop.new.spin(-1)
end

RbpeekTarget.ready!
sleep
