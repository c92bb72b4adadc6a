# frozen_string_literal: true
#
# labelchurn.rb - method definitions and the collector churning while known
# methods run (issue 25.4: labels decoded after the copy must not come from
# another method).  Each round evals a method churn_N whose source starts at
# line N of the file "(churn)" (so a frame of churn_N is on lines N..N+4 and
# nowhere else), runs it, removes it and makes garbage; every tenth round runs
# known_work (its loop on the KNOWN line).  Removed methods' iseqs are
# collected and their addresses reused by the next ones.
require_relative "ready"

def known_work
  s = 0
  4_000.times { |i| s += i } # KNOWN
  s
end

RecordTarget.ready!
i = 0
junk = []
loop do
  i += 1
  n = (i % 3000) + 100
  name = :"churn_#{n}"
  eval("def #{name}(k)\n  t = 0\n  k.times { |j| t += j }\n  t\nend\n", binding, "(churn)", n)
  send(name, 200)
  known_work if (i % 10).zero?
  Object.send(:remove_method, name)
  junk << Array.new(50) { "x#{i}" }
  junk.clear if junk.size > 200
  GC.start if (i % 500).zero?
end
