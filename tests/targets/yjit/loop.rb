# loop.rb - one thread spinning in a compiled loop that spans three lines
# (run it with --yjit --yjit-call-threshold=1, or --zjit ...): nothing in
# the method makes the JIT write cfp->pc or leave its code, so the pc a
# sampler reads is what the JIT saved last, not the line running.  tests/e2e/89-yjit.rb records it: the
# samples of Loop#spin must spread over the loop's lines (as in the
# interpreter) or carry rbpeek's "[jit]" mark at the method's first line,
# never all claim one line.
require_relative "../support/harness"

class Loop
  def spin
    a = 0
    b = 0
    while true
      a += 1
      b += a
      b = 0 if b > 1_000_000
    end
  end
end

# $spin (the harness's sign of a spinner going round) is set out here: a
# global variable in the loop's method could make the JIT leave it
Thread.new { Thread.current.name = "loop"; RbpeekTarget.spinning!; $spin += 1; Loop.new.spin }

RbpeekTarget.ready!
sleep
