# frozen_string_literal: true
#
# agent.rb - helpers for the agent's end-to-end tests that run it against
# tests/e2e/fixtures/ingest_receiver.rb (a stand-in for Pyroscope) on
# loopback: start and stop the receiver and the agent, read the payloads
# and the agent's metrics.  Each helper waits at most AGENT_WAIT seconds.
require_relative "e2e"
require "socket"

module AgentE2E
  include E2E
  RECEIVER = File.join(E2E::ROOT, "tests", "e2e", "fixtures", "ingest_receiver.rb")
  AGENT_WAIT = 90 # seconds any single wait may take on a loaded machine

  module_function

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def wait_for(what, limit = AGENT_WAIT)
    t0 = now
    until (v = yield)
      raise "timed out after #{limit} s waiting for #{what}" if now - t0 > limit

      sleep 0.2
    end
    v
  end

  # A receiver writing into dir (extra: ["--tls", cert, key]); returns [pid, port].
  def start_receiver(dir, port = nil, extra = [])
    FileUtils.mkdir_p(dir)
    FileUtils.rm_f(File.join(dir, "port"))
    pid = Process.spawn(E2E::RUBY, RECEIVER, dir, *(port ? [port.to_s] : []), *extra,
                        out: File.join(dir, "receiver.out"), err: File.join(dir, "receiver.err"))
    E2E.register_pid(pid)
    p = wait_for("the receiver to listen") { File.exist?(File.join(dir, "port")) && File.read(File.join(dir, "port")).to_i }
    [pid, p]
  end

  def stop_receiver(pid)
    E2E.kill_pid(pid)
  end

  # The agent in the background (stderr to err); returns [pid, metrics port].
  def start_agent(args, err, env: {})
    pid = Process.spawn(env, E2E::RBPEEK, "agent", "--metrics", "127.0.0.1:0", *args.map(&:to_s),
                        out: File::NULL, err: err)
    E2E.register_pid(pid)
    port = wait_for("the agent's metrics address") do
      Process.waitpid(pid, Process::WNOHANG) && raise("the agent exited: #{File.read(err)}")
      File.read(err)[%r{metrics at http://127\.0\.0\.1:(\d+)/}, 1]&.to_i
    end
    [pid, port]
  end

  def metrics_text(port)
    s = TCPSocket.new("127.0.0.1", port)
    s.write("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = s.read.split("\r\n\r\n", 2)[1].to_s
    s.close
    body
  end

  def metrics(port)
    metrics_text(port).lines.grep_v(/^#/).to_h { |l| k, v = l.split; [k.sub("rbpeek_agent_", ""), v.to_f] }
  end

  # Stop the agent with SIGINT; its exit status.
  def stop_agent(pid)
    Process.kill("INT", pid)
    t0 = now
    loop do
      _, st = Process.waitpid2(pid, Process::WNOHANG)
      return st if st
      raise "the agent did not stop within 60 s of SIGINT" if now - t0 > 60

      sleep 0.1
    end
  end

  # Payloads the receiver stored: [{file:, params:, service:, labels:, headers:, conn:}]
  def payloads(dir)
    Dir.glob(File.join(dir, "*.pb")).sort.map do |pb|
      meta = JSON.parse(File.read(pb.sub(/\.pb\z/, ".json")))
      name = meta["params"]["name"]
      service, labels = name.match(/\A([^{]*)\{(.*)\}\z/)&.captures
      { file: pb, params: meta["params"], service: service, headers: meta["headers"] || {},
        conn: meta["conn"], labels: labels.to_s.split(",").to_h { |kv| kv.split("=", 2) } }
    end
  end

  # A busy Ruby script (loops in busy_TAG) in dir; its path.  pre: Ruby code
  # run first; nap: a 1 ms sleep every 100,000 turns (false: the loop is
  # always the leaf).
  def busy_script(dir, tag, pre = "", nap: true)
    FileUtils.mkdir_p(dir)
    path = File.join(dir, "#{tag}.rb")
    File.write(path, <<~RUBY)
      #{pre}
      def busy_#{tag}
        i = 0
        while true
          i += 1
          #{nap ? 'sleep 0.001 if i % 100_000 == 0' : ''}
        end
      end
      $stdout.sync = true
      puts "ready"
      busy_#{tag}
    RUBY
    path
  end
end
