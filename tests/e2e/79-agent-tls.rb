# frozen_string_literal: true
# e2e-timeout: 500
#
# 79-agent-tls.rb - the agent over https with credentials, against the
# stand-in for Pyroscope (fixtures/ingest_receiver.rb, see 79-agent.rb)
# speaking TLS through Ruby's openssl.  The CA and the certificates are
# made here with the `openssl` command: a good one (for 127.0.0.1 and
# localhost), one for another name, and an expired one.
#
#   agent/tls/arrival   profiles arrive over https with --ca-file, with
#       Authorization (basic, from --basic-auth-password-file), X-Scope-OrgID
#       (--tenant-id) and a --header as given, many of them on one
#       connection (kept alive).
#   agent/tls/refused-then-fixed   without the CA, with a certificate for
#       another name, with an expired one, and a plain-HTTP server at the
#       https URL: nothing is sent, the log and the metrics name the
#       failure (unknown_ca, name_mismatch, expired, handshake), the
#       agent keeps running and retrying, and sends once the server has a
#       good certificate (the name and expired cases).
#   agent/tls/secrets   a password (a file; the user:password of the
#       server URL in a --config file), a bearer token (a file) and a
#       --header's value never appear in ps (the agent's command line), its
#       log, --status or /metrics; a secret's file others may read, and a
#       config file holding a password others may read, are refused.
#   agent/tls/static-chroot   the static binary (make static) in a chroot
#       holding only itself, the CA file and /proc: profiles arrive over
#       https.
require_relative "lib/agent"
require "tmpdir"
require "base64"
include E2E
include AgentE2E

ARRIVAL = "agent/tls/arrival"
REFUSED = "agent/tls/refused-then-fixed"
SECRETS = "agent/tls/secrets"
STATIC = "agent/tls/static-chroot"
ALL = [ARRIVAL, REFUSED, SECRETS, STATIC].freeze
exit 0 if skip_without_rbpeek(ALL)

unless root?
  ALL.each { |n| skip(n, "needs root (the agent reads every process)") }
  finish
end
if `command -v openssl 2>/dev/null`.strip.empty? || !system(RUBY, "-ropenssl", "-e", "1", err: File::NULL)
  ALL.each { |n| skip(n, "openssl (the command, and Ruby's library) not installed: apt-get install openssl") }
  finish
end
if run([RBPEEK, "agent", "--server", "https://127.0.0.1:1", "--rate", "0"]).stderr.include?("without TLS")
  ALL.each { |n| skip(n, "rbpeek built without TLS (TLS=0)") }
  finish
end

WORK = Dir.mktmpdir("rbpeek-agent-tls-", OUT)
at_exit { FileUtils.rm_rf(WORK) }
FileUtils.chmod(0o755, WORK)
MARK = "RBPEEK_AGENT_TLS_#{$$}"
PASSWORD = "pw-#{$$}-Sekr1t"
TOKEN = "tok-#{$$}-Bearer9"
HEADER_SECRET = "hdr-#{$$}-ApiKey7"
URL_PASSWORD = "url-#{$$}-Pass3"

# ---- certificates ------------------------------------------------------------
CERTS = File.join(WORK, "certs")
FileUtils.mkdir_p(CERTS)

def openssl(*args)
  r = run(["openssl", *args], timeout: 60, chdir: CERTS)
  raise "openssl #{args.first(2).join(' ')}: #{r.describe}" unless r.status&.zero?
end

def leaf(name, san, days)
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "#{name}.key", "-out", "#{name}.csr", "-subj", "/CN=#{name}")
  File.write(File.join(CERTS, "#{name}.ext"), "subjectAltName=#{san}\n")
  openssl("x509", "-req", "-in", "#{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
          "-out", "#{name}.pem", "-days", days.to_s, "-extfile", "#{name}.ext")
  [File.join(CERTS, "#{name}.pem"), File.join(CERTS, "#{name}.key")]
end

openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30",
        "-subj", "/CN=rbpeek test CA")
CA = File.join(CERTS, "ca.pem")
GOOD = leaf("good", "IP:127.0.0.1,DNS:localhost", 30)
OTHER = leaf("other", "DNS:other.example", 30)
EXPIRED = leaf("expired", "IP:127.0.0.1,DNS:localhost", -1) # notAfter a day before notBefore: expired

# A busy Ruby the agents profile.
script = busy_script(File.join(WORK, "scripts"), "tlsbusy")
BUSY_LOG = File.join(WORK, "busy.out")
BUSY = Process.spawn({ MARK => "1", "PYROSCOPE_APPLICATION_NAME" => "tls_svc" }, "nice", "-n", "19", RUBY, script,
                     out: BUSY_LOG, err: BUSY_LOG)
register_pid(BUSY)
wait_for("the busy Ruby") { File.read(BUSY_LOG).include?("ready") }

def tls_receiver(dir, cert, port = nil)
  start_receiver(dir, port, ["--tls", *cert])
end

def secret_file(name, text, mode = 0o600)
  path = File.join(WORK, name)
  File.write(path, "#{text}\n")
  File.chmod(mode, path)
  path
end

BASE = ["--require-env", MARK, "--interval", "1", "--sampler", "ptrace", "--backoff-max", "1", "--timeout", "5"].freeze

check(ARRIVAL) do |probs|
  dir = File.join(WORK, "arrival")
  rpid, port = tls_receiver(dir, GOOD)
  pw = secret_file("password", PASSWORD)
  err = File.join(WORK, "arrival.err")
  apid, mport = start_agent(["--server", "https://127.0.0.1:#{port}", "--ca-file", CA, "--basic-auth-user", "12345",
                             "--basic-auth-password-file", pw, "--tenant-id", "tenant-#{$$}",
                             "--header", "X-Extra: #{HEADER_SECRET}", *BASE], err)
  got = wait_for("3 profiles over https") { (p = payloads(dir)).size >= 3 && p }
  m = metrics(mport)
  stop_agent(apid)
  stop_receiver(rpid)
  want_auth = "Basic #{Base64.strict_encode64("12345:#{PASSWORD}")}"
  got.each do |p|
    probs << "service #{p[:service].inspect}" unless p[:service] == "tls_svc"
    probs << "Authorization #{p[:headers]['authorization'].inspect}, expected #{want_auth}" unless p[:headers]["authorization"] == want_auth
    probs << "X-Scope-OrgID #{p[:headers]['x-scope-orgid'].inspect}" unless p[:headers]["x-scope-orgid"] == "tenant-#{$$}"
    probs << "X-Extra #{p[:headers]['x-extra'].inspect}" unless p[:headers]["x-extra"] == HEADER_SECRET
  end
  conns = got.map { |p| p[:conn] }.uniq.size
  probs << "#{got.size} profiles on #{conns} connections: not kept alive" if conns >= got.size
  probs << "connections_total #{m['connections_total']}" unless m["connections_total"].to_i.between?(1, got.size - 1)
  "#{got.size} profiles on #{conns} connection(s)"
rescue RuntimeError => e
  probs << "#{e.message}; agent log: #{File.exist?(err.to_s) ? File.read(err)[-600..] : ''}"
  nil
end

check(REFUSED) do |probs|
  notes = []
  [["unknown_ca", GOOD, false, "unknown CA"], ["name_mismatch", OTHER, true, "name mismatch"],
   ["expired", EXPIRED, true, "certificate expired"],
   ["handshake", nil, true, "TLS handshake failed"]].each do |reason, cert, with_ca, words|
    dir = File.join(WORK, "refused-#{reason}")
    # handshake: a plain-HTTP server at an https URL (nothing may go to it in plain)
    rpid, port = cert ? tls_receiver(dir, cert) : start_receiver(dir)
    err = File.join(WORK, "refused-#{reason}.err")
    args = ["--server", "https://127.0.0.1:#{port}", *(with_ca ? ["--ca-file", CA] : []), *BASE]
    apid, mport = start_agent(args, err)
    begin
      wait_for("two #{reason} failures") do
        metrics_text(mport)[/tls_failures_total\{reason="#{reason}"\} (\d+)/, 1].to_i >= 2
      end
      probs << "#{reason}: something was stored: #{payloads(dir).size}" unless payloads(dir).empty?
      probs << "#{reason}: the log does not say #{words.inspect}: #{File.read(err)[-300..]}" unless File.read(err).include?(words)
      probs << "#{reason}: the agent exited" if Process.waitpid(apid, Process::WNOHANG)
      if with_ca && cert
        # the server fixed: a good certificate on the same port
        stop_receiver(rpid)
        rpid, = tls_receiver(dir, GOOD, port)
        wait_for("#{reason}: profiles once fixed") { !payloads(dir).empty? }
        wait_for("#{reason}: the 'up again' line", 30) { File.read(err).include?("up again") }
        notes << "#{reason}: recovered"
      end
    rescue RuntimeError => e
      probs << "#{reason}: #{e.message}; log: #{File.read(err)[-400..]}"
    ensure
      stop_agent(apid) unless Process.waitpid(apid, Process::WNOHANG)
      stop_receiver(rpid)
    end
  end
  notes.join(", ")
end

check(SECRETS) do |probs|
  open = secret_file("open-password", PASSWORD, 0o644)
  r = rbpeek("agent", "--server", "https://127.0.0.1:1", "--basic-auth-user", "u", "--basic-auth-password-file", open)
  probs << "a password file others may read: #{r.describe}" unless r.status == 2 && r.stderr.include?("chmod 600")
  conf_open = secret_file("open.conf", "server = https://u:#{URL_PASSWORD}@127.0.0.1:1/", 0o644)
  r = rbpeek("agent", "--config", conf_open)
  probs << "a config with a password others may read: #{r.describe}" unless r.status == 2 && r.stderr.include?("chmod 600")
  probs << "the error quotes the password" if r.stderr.include?(URL_PASSWORD)
  r = rbpeek("agent", "--server", "https://u:#{URL_PASSWORD}@127.0.0.1:1/")
  probs << "a password in --server: #{r.describe}" unless r.status == 2 && !r.stderr.include?(URL_PASSWORD)

  dir = File.join(WORK, "secrets")
  rpid, port = tls_receiver(dir, GOOD)
  tok = secret_file("token", TOKEN)
  pw = secret_file("password2", PASSWORD)
  conf = secret_file("agent.conf", "server = https://u:#{URL_PASSWORD}@127.0.0.1:#{port}/\nca-file = #{CA}\n" \
                                   "header = X-Api-Key: #{HEADER_SECRET}\n")
  runs = [
    [["--config", conf], "config: URL password, header"],
    [["--server", "https://127.0.0.1:#{port}", "--ca-file", CA, "--bearer-token-file", tok,
      "--header", "X-Api-Key: #{HEADER_SECRET}"], "bearer file, --header"],
    [["--server", "https://127.0.0.1:#{port}", "--ca-file", CA, "--basic-auth-user", "u",
      "--basic-auth-password-file", pw], "password file"],
  ]
  runs.each do |args, what|
    err = File.join(WORK, "secrets-#{what.tr(' :,', '_')}.err")
    before = payloads(dir).size
    apid, mport = start_agent([*args, *BASE], err)
    wait_for("#{what}: a profile") { payloads(dir).size > before }
    seen = {
      "ps" => File.binread("/proc/#{apid}/cmdline").tr("\0", " "),
      "--status" => rbpeek("agent", "--status", "--metrics", "127.0.0.1:#{mport}").then { |x| x.stdout + x.stderr },
      "/metrics" => metrics_text(mport),
    }
    stop_agent(apid)
    seen["the log"] = File.read(err)
    seen.each do |where, text|
      [PASSWORD, TOKEN, HEADER_SECRET, URL_PASSWORD].each do |secret|
        probs << "#{what}: #{secret} in #{where}" if text.include?(secret)
      end
    end
    last = payloads(dir).last
    auth = last[:headers]["authorization"].to_s
    case what
    when /URL/ then probs << "#{what}: Authorization #{auth}" unless auth == "Basic #{Base64.strict_encode64("u:#{URL_PASSWORD}")}"
    when /bearer/ then probs << "#{what}: Authorization #{auth}" unless auth == "Bearer #{TOKEN}"
    else probs << "#{what}: Authorization #{auth}" unless auth == "Basic #{Base64.strict_encode64("u:#{PASSWORD}")}"
    end
  end
  stop_receiver(rpid)
  nil
rescue RuntimeError => e
  probs << e.message
  nil
end

STATIC_BIN = File.join(ROOT, "build-static", "rbpeek")
if !File.executable?(STATIC_BIN)
  skip(STATIC, "no static binary (make static)")
elsif `command -v unshare 2>/dev/null`.strip.empty?
  skip(STATIC, "unshare not installed (util-linux)")
else
  check(STATIC) do |probs|
    root = File.join(WORK, "chroot")
    FileUtils.mkdir_p(File.join(root, "proc"))
    FileUtils.cp(STATIC_BIN, File.join(root, "rbpeek"))
    FileUtils.cp(CA, File.join(root, "ca.pem"))
    FileUtils.chmod_R("a+rX", root)
    dir = File.join(WORK, "static")
    rpid, port = tls_receiver(dir, GOOD)
    err = File.join(WORK, "static.err")
    # its own mount namespace: /proc mounted in the chroot goes away with it
    apid = Process.spawn("unshare", "--mount", "--propagation", "private", "sh", "-c",
                         "mount -t proc proc \"$1\"/proc && exec chroot \"$1\" /rbpeek agent --metrics 127.0.0.1:0 " \
                         "--server https://127.0.0.1:#{port} --ca-file /ca.pem #{BASE.join(' ')}", "sh", root,
                         out: File::NULL, err: err)
    register_pid(apid)
    begin
      wait_for("a profile from the static agent") { !payloads(dir).empty? }
    rescue RuntimeError => e
      probs << "#{e.message}; log: #{File.read(err)[-400..]}"
    end
    Process.kill("INT", apid) rescue nil # rubocop:disable Style/RescueModifier
    Process.waitpid(apid)
    stop_receiver(rpid)
    nil
  end
end

kill_pid(BUSY)
finish
