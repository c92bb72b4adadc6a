# frozen_string_literal: true
#
# 66-label-churn.rb - labels decoded after the stacks were copied must never
# come from another method (issue 25.4).  tests/targets/record/labelchurn.rb
# defines a method churn_N whose source starts at line N of "(churn)", runs
# it, removes it and makes garbage, round after round (iseqs collected, their
# addresses and bytecode buffers reused), and runs known_work every tenth
# round.  Recorded at 1000 Hz (default mode, and --nonblocking): every frame
# labelled churn_N must be on lines N..N+4 of "(churn)", every known_work
# frame in known_work's lines of labelchurn.rb, every frame on known_work's
# lines labelled known_work (or Integer#times, which it calls), and no other
# frame of "(churn)" may carry another label than the eval's own.  What
# could not be verified is dropped and counted in the closing line, never
# shown.
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
MODES = { "default" => [], "nonblocking" => ["--nonblocking"] }.freeze
names = MODES.keys.map { |m| "label-churn/#{m}" }
exit 0 if skip_unless_tracing(names)

SRC = File.readlines(File.join(R::DIR, "labelchurn.rb"))
KDEF = SRC.index { |l| l.start_with?("def known_work") } + 1

EVAL_LABELS = ["block in <main>", "Integer#times", "Kernel#eval", "Module#method_added"].freeze

# "what is wrong" for one frame, nil when it fits
def frame_problem(f)
  eval_frame = f.path == "(churn)"
  if f.label =~ /churn_(\d+)/
    n = Regexp.last_match(1).to_i
    return nil if eval_frame && (n..n + 4).cover?(f.line)

    "#{f} is not on churn_#{n}'s lines (churn):#{n}..#{n + 4}"
  elsif eval_frame
    # the eval's own iseq has its binding's label; C methods it (or churn_N)
    # calls take its line: Integer#times, the def's Module#method_added hook
    return nil if EVAL_LABELS.include?(f.label)

    "#{f}: another label in (churn)"
  elsif f.label.include?("known_work")
    return nil if f.path.end_with?("labelchurn.rb") && (KDEF..KDEF + 4).cover?(f.line)

    "#{f} is not on known_work's lines #{KDEF}..#{KDEF + 4}"
  elsif f.path.to_s.end_with?("labelchurn.rb") && (KDEF + 1..KDEF + 3).cover?(f.line) &&
        f.label != "Integer#times"
    "#{f}: known_work's line with another label"
  end
end

MODES.each do |mode, flags|
  check("label-churn/#{mode}") do |probs|
    R.with_script("labelchurn") do |t|
      out = R.tmp("churn-#{mode}.txt")
      args = ["record", "--pid", t.pid, "-r", 1000, "-d", 3, *flags, "-f", "collapsed", "-o", out]
      res = R.rec(*args, timeout: 60)
      next probs << "rbpeek #{args.join(' ')}: #{res.describe}" unless res.status&.zero?

      err = R.stderr_of(res)
      dropped = err[/(\d+) stacks dropped torn/, 1]
      probs << "closing line without the stacks dropped: #{err[-300..].inspect}" unless dropped
      stacks = R.read_collapsed(out)
      samples = R.total(stacks)
      bad = 0
      stacks.each do |frames, n|
        wrong = frames.filter_map { |f| frame_problem(f) }
        next if wrong.empty?

        bad += n
        probs << wrong.first if probs.size < 5
      end
      churned = stacks.sum { |frames, n| frames.any? { |f| f.label =~ /churn_\d/ } ? n : 0 }
      probs << "no sample in a churned method (of #{samples})" if churned.zero?
      probs << "#{bad} of #{samples} samples with a label from another method" if bad.positive?
      (p = t.running_problem) && probs << "afterwards: #{p}"
      "#{samples} samples, #{churned} in churned methods, #{dropped} dropped unverified"
    end
  end
end
