# frozen_string_literal: true
#
# 74-servers.rb - real Ruby software from Debian, end to end:
#   - rubocop on a directory of Ruby files: the profile shows RuboCop's own
#     methods (spawn mode: rbpeek record -- rubocop ...);
#   - puma in cluster mode, 2 workers, serving tests/targets/servers/app.ru
#     under load from wrk (or curl) on a free loopback port:
#     record --subprocesses on the master shows both workers' requests
#     (HelloApp#render_page);
#   - puma with a pool of 8 threads and one client: by default the idle
#     pool threads' waits are left out, so the requests (and their 10 ms
#     "database" wait) are most of the default flame graph, whose title says
#     how many samples were hidden; speedscope opens on the thread serving
#     them;
#   - unicorn with 2 workers, likewise; one worker is killed mid-recording,
#     the master forks a new one, which must show up with requests of its
#     own, and the recording must end normally.
# Each test is skipped (with the reason) when its package is missing.
require "socket"
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
APP = File.join(TARGETS, "servers", "app.ru")
UNICORN_CONF = File.join(TARGETS, "servers", "unicorn.conf.rb")
names = %w[servers/rubocop servers/puma-cluster servers/puma-idle-pool servers/unicorn-refork]
exit 0 if skip_unless_tracing(names)

def have(cmd)
  system("command -v #{cmd} >/dev/null 2>&1")
end

# check(name) when cmd is installed, else skip with why.
def check_with(cmd, name, why, &blk)
  have(cmd) ? check(name, &blk) : skip(name, why)
end

# A loopback port nobody listens on now (the kernel picks it).
def free_port
  s = TCPServer.new("127.0.0.1", 0)
  s.addr[1]
ensure
  s&.close
end

# Wait until GET / answers; raise with the server's log after timeout s.
def wait_http(port, pid, log, timeout: 30)
  deadline = R.mono + timeout
  loop do
    begin
      TCPSocket.open("127.0.0.1", port) do |s|
        s.write("GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        return if s.read.to_s.start_with?("HTTP/1.1 200", "HTTP/1.0 200")
      end
    rescue SystemCallError
      nil
    end
    raise "server exited: #{File.read(log)[-600..]}" if Process.waitpid(pid, Process::WNOHANG)
    raise "server not answering on port #{port} after #{timeout} s: #{File.read(log)[-600..]}" if R.mono > deadline

    sleep 0.2
  end
end

# A server started in its own process group, killed with it at the end.
def with_server(argv, env: {})
  log = R.tmp("server.log")
  R.with_server_group(argv, log, env: env, chdir: File.dirname(APP)) { |pid| yield pid, log }
end

# Loopback load for `seconds`: wrk when installed, else curl in a loop.
def with_load(port, seconds, path: "/load", clients: 4, &block)
  R.with_http_load("http://127.0.0.1:#{port}#{path}", seconds, clients: clients, &block)
end

def wait_children(pid, n, timeout: 30, except: [])
  deadline = R.mono + timeout
  loop do
    kids = R.children_of(pid) - except
    return kids if kids.size >= n
    raise "expected #{n} new workers of #{pid}, have #{kids.inspect} after #{timeout} s" if R.mono > deadline

    sleep 0.1
  end
end

# pids whose stacks include label.
def serving(procs, label)
  procs.select { |_, (_, labels)| labels.include?(label) }.keys.sort
end

check_with("rubocop", "servers/rubocop", "rubocop not installed (Debian package rubocop; tools/install-deps.sh)") do |probs|
  dir = R.tmp("rubocop-src", mkdir: true)
  %w[set ostruct tsort observer shellwords prettyprint].each do |lib|
    src = File.join(RbConfig::CONFIG["rubylibdir"], "#{lib}.rb")
    FileUtils.cp(src, dir) if File.exist?(src)
  end
  out = R.tmp("rubocop.txt")
  res = R.rec("record", "-f", "collapsed", "-o", out, "--", "rubocop", "--cache", "false", "--format", "quiet", dir,
              timeout: 120)
  # rubocop exits 1 when it finds offenses: rbpeek still writes the profile,
  # and exits as rubocop did
  next probs << "record -- rubocop: #{res.describe}" unless [0, 1].include?(res.status) && File.exist?(out)

  stacks = R.read_collapsed(out)
  total = R.total(stacks)
  cops = stacks.sum { |frames, c| frames.any? { |f| f.label.start_with?("RuboCop::Cop::") } ? c : 0 }
  own = stacks.sum { |frames, c| frames.any? { |f| f.label.start_with?("RuboCop::") } ? c : 0 }
  # the rest is start-up (require, outside any RuboCop:: method), whose
  # share grows on a loaded machine: 62 % quiet, 45 % once under make asan
  probs << "only #{own} of #{total} samples under RuboCop:: methods, expected a third at least" unless own * 3 > total
  probs << "no samples in RuboCop::Cop:: methods" unless cops.positive?
  runner = stacks.any? { |frames, _| frames.any? { |f| f.label =~ /\ARuboCop::Runner#/ && f.path.to_s.include?("rubocop") } }
  probs << "RuboCop::Runner methods missing or without their file" unless runner
  format("%.0f%% of %d samples under RuboCop::, %.0f%% in cops", 100.0 * own / total, total, 100.0 * cops / total)
end

check_with("puma", "servers/puma-cluster", "puma not installed (Debian package puma)") do |probs|
  port = free_port
  with_server(["puma", "-w", "2", "-t", "1:2", "-b", "tcp://127.0.0.1:#{port}", APP]) do |master, log|
    wait_http(port, master, log)
    workers = wait_children(master, 2)
    with_load(port, 12) do
      sleep 0.5
      out = R.tmp("puma.txt")
      # --idle: the master only waits, and must still be there
      res = R.rec("record", "--subprocesses", "--idle", "-d", "4", "-f", "collapsed", "-o", out, "--pid", master, timeout: 30)
      next probs << "record: #{res.describe}" unless res.status&.zero?

      procs = R.by_process(R.read_collapsed(out))
      busy = serving(procs, "HelloApp#render_page")
      probs << "master #{master} missing: #{procs.keys.inspect}" unless procs.key?(master)
      # both workers are followed; which of them accepts the requests is the
      # kernel's and puma's choice (on a loaded machine one may take them all)
      missing = workers.reject { |w| procs.key?(w) }
      probs << "workers #{missing.inspect} missing from the profile: #{procs.keys.inspect}" unless missing.empty?
      probs << "no worker serving in the profile (render_page in #{busy.inspect})" unless busy.any? { |b| workers.include?(b) }
      probs << "worker root lacks puma's process title: #{procs[workers.first]&.first.inspect}" unless procs[workers.first]&.first.to_s.include?("puma")
      probs << "master shows request handling" if busy.include?(master)
      "workers #{workers.inspect} followed, #{(busy & workers).inspect} serving"
    end
  end
end

check_with("puma", "servers/puma-idle-pool", "puma not installed (Debian package puma)") do |probs|
  port = free_port
  with_server(["puma", "-t", "8:8", "-b", "tcp://127.0.0.1:#{port}", APP]) do |pid, log|
    wait_http(port, pid, log)
    with_load(port, 20, path: "/db", clients: 1) do
      sleep 0.5
      # the default output, a flame graph; the same view as folded stacks from its raw file
      svg = R.tmp("pool.svg")
      raw = R.tmp("pool.raw.gz")
      res = R.rec("record", "-d", "3", "-o", svg, "--raw-file", raw, "--pid", pid, timeout: 30)
      next probs << "record: #{res.describe}" unless res.status&.zero?

      out = R.tmp("pool.folded")
      rep = R.rec("report", "-i", raw, "-o", out)
      next probs << "report: #{rep.describe}" unless rep.status&.zero?

      # in the flame graph itself: the requests' share (frame widths, data-w,
      # in samples) and the title saying how many idle samples were hidden
      boxes = File.read(svg).scan(%r{<g class="f"[^>]* data-w="(\d+)"[^>]*><title>([^<]*)</title>})
      all = boxes.find { |_, t| t.start_with?("all (") }&.first.to_i
      in_req = boxes.select { |_, t| t.start_with?("HelloApp#call (") }.sum { |w, _| w.to_i }
      title = File.read(svg)[%r{<title>(rbpeek: [^<]*)</title>}, 1].to_s
      n_idle = R.stderr_of(res)[/(\d+) of \d+ samples \(\d+%\) were threads waiting for work/, 1]
      probs << "flame graph: requests are #{in_req} of #{all} samples: not the dominant part" unless all.positive? && in_req * 2 > all
      probs << "flame graph title #{title.inspect} does not say #{n_idle.inspect} idle samples were hidden" unless n_idle && title.include?("(+#{n_idle} idle hidden")

      stacks = R.read_collapsed(out)
      total = R.total(stacks)
      req = stacks.sum { |frames, c| frames.any? { |f| f.label == "HelloApp#call" } ? c : 0 }
      db = stacks.sum { |frames, c| frames.map(&:label).each_cons(2).include?(["HelloApp#wait_for_db", "Kernel#sleep"]) ? c : 0 }
      hidden = R.stderr_of(res)[/(\d+)%\) were threads waiting for work/, 1]
      probs << "requests are #{req} of #{total} samples: not the dominant part" unless req * 2 > total
      probs << "the requests' database wait (sleep in wait_for_db) is not shown" unless db.positive?
      probs << "the hidden share of idle threads is not said: #{R.stderr_of(res).inspect}" unless hidden
      ss = R.tmp("pool.speedscope.json")
      res = R.rec("record", "-d", "2", "--idle", "-o", ss, "--pid", pid, timeout: 30)
      next probs << "record --idle -f speedscope: #{res.describe}" unless res.status&.zero?

      doc = JSON.parse(File.read(ss))
      frames = doc["shared"]["frames"]
      active = doc["profiles"][doc["activeProfileIndex"]]
      names = active["samples"].flatten.uniq.map { |i| frames[i]["name"] }
      probs << "speedscope opens on #{active['name'].inspect}, not the thread serving requests" unless names.include?("HelloApp#call")
      format("requests %.0f%% of the default flame graph (%s%% idle hidden), speedscope opens on %s",
             100.0 * in_req / all, hidden, active["name"])
    end
  end
end

check_with("unicorn", "servers/unicorn-refork", "unicorn not installed (Debian package unicorn)") do |probs|
  port = free_port
  with_server(["unicorn", "-c", UNICORN_CONF, APP], env: { "RBPEEK_PORT" => port.to_s }) do |master, log|
    wait_http(port, master, log)
    workers = wait_children(master, 2)
    with_load(port, 20) do
      out = R.tmp("unicorn.txt")
      bg = R::Background.new(["record", "--subprocesses", "-d", "7", "-f", "collapsed", "-o", out, "--pid", master])
      bg.wait_stderr(/recording process/)
      sleep 2
      victim = workers.first
      Process.kill("KILL", victim)
      fresh = wait_children(master, 1, timeout: 4, except: workers)
      res = bg.wait(timeout: 30)
      next probs << "record: #{res.describe}" unless res.status&.zero?

      bad = R.stderr_of(res).lines.grep(/error:|warning:/)
      probs << "stderr: #{bad.inspect}" unless bad.empty?
      procs = R.by_process(R.read_collapsed(out))
      busy = serving(procs, "HelloApp#render_page")
      probs << "killed worker #{victim} not in the profile (before its death)" unless busy.include?(victim)
      probs << "surviving worker #{workers.last} not serving in the profile" unless busy.include?(workers.last)
      probs << "new worker #{fresh.inspect} not picked up (serving: #{busy.inspect}, all: #{procs.keys.inspect})" unless busy.include?(fresh.first)
      "killed #{victim}, new worker #{fresh.first} picked up"
    end
  end
end

finish
