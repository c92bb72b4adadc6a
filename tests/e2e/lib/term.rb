# frozen_string_literal: true
#
# term.rb - a real terminal for the end-to-end tests: a tmux server on its
# own socket (its own TMUX_TMPDIR), one window running a shell, keys sent
# with send-keys and the screen read with capture-pane.  Used by the top
# tests (75-top.rb) and the job-control tests (95-hostile-signals.rb).
require_relative "record"

# A terminal: tmux server on its own socket, one window running a shell.
class Term
  attr_reader :sock

  # shell: what the window runs ("bash --norc" for job control with fg)
  def initialize(cols: 120, rows: 30, shell: "sh")
    @dir = Record.tmp("tmux", mkdir: true)
    @sock = "rbpeek-top-#{$$}-#{rand(1 << 30)}"
    @env = { "TMUX_TMPDIR" => @dir, "TERM" => "xterm", "PS1" => "$ " }
    tmux("new-session", "-d", "-x", cols.to_s, "-y", rows.to_s, shell)
  end

  def tmux(*args)
    out = IO.popen(@env, ["tmux", "-L", @sock, *args], err: %i[child out], &:read)
    raise "tmux #{args.first} failed: #{out}" unless $?.success?

    out
  end

  def keys(*k)
    tmux("send-keys", *k)
  end

  def type(line)
    tmux("send-keys", "-l", line)
    tmux("send-keys", "Enter")
  end

  def screen
    tmux("capture-pane", "-p")
  end

  # Wait until the screen matches re; the screen, or raise with it.
  def wait_for(re, timeout: 8)
    deadline = Record.mono + timeout
    loop do
      s = screen
      return s if s =~ re
      raise "screen never matched #{re.inspect} within #{timeout} s; it shows:\n#{s.rstrip}" if Record.mono > deadline

      sleep 0.1
    end
  end

  def close
    tmux("kill-server")
  rescue StandardError
    nil
  ensure
    FileUtils.rm_rf(@dir)
  end
end

def with_term(**kw)
  t = Term.new(**kw)
  yield t
ensure
  t&.close
end
