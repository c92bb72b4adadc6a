# frozen_string_literal: true
#
# 63-trace-versions.rb - the tracer's scenarios (lib/trace_check.rb) on
# Ruby 2.7, 3.3 and 3.4: the chroots of tools/setup-rubies.sh, given
# rubyX.Y-dev and gcc by its --dev step, build the extension with
# extconf.rb + make tracer (the gem's build, tracer only) and run every
# scenario.
# It builds the extension once per chroot Ruby (2.7, 3.3, 3.4, 4.0):
# e2e-timeout: 400
require "json"
require_relative "lib/e2e"
require_relative "lib/chroot"
require_relative "lib/trace_check"
include E2E
include TraceCheck

# argv run in a private mount namespace with tracefs and /proc mounted
# inside the chroot, so the kernel streams work there too (the mounts go
# away with the namespace); argv unchanged when that is not possible (not
# root, no unshare).
def with_tracefs(dir, argv)
  return argv unless root? && system("unshare --version >/dev/null 2>&1")

  script = 'mkdir -p "$1/sys/kernel/tracing" "$1/proc" &&
    mount -t tracefs nodev "$1/sys/kernel/tracing" 2>/dev/null;
    [ -d "$1/proc/self" ] || mount -t proc proc "$1/proc" 2>/dev/null;
    shift; exec "$@"'
  ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", dir, *argv]
end

# --- the other Rubies: the extension built inside each chroot --------------
rubies, missing = Chroots.prepare
missing.each { |xy, why| (SCENARIOS + ["json"]).each { |s| skip("trace-#{xy}/#{s}", why) } }
rubies.each do |ruby|
  prefix = "trace-#{ruby.xy}"
  inner = "/tmp/rbpeek-trace.#{$$}"
  host = ruby.host_path(inner)
  at_exit { FileUtils.rm_rf(host) }
  unless File.exist?(ruby.host_path("DEV_READY"))
    (SCENARIOS + ["json"]).each { |s| skip("#{prefix}/#{s}", "no ruby#{ruby.xy}-dev/gcc in the chroot (tools/setup-tests.sh finish runs tools/setup-rubies.sh --dev)") }
    next
  end
  # The sources the gem ships; extconf.rb's Makefile builds the tracer
  # alone (make tracer) into build/rbpeek/build/ext with the project's Makefile.
  FileUtils.mkdir_p(File.join(host, "ext"))
  FileUtils.mkdir_p(File.join(host, "build", "rbpeek"))
  FileUtils.mkdir_p(File.join(host, "tools"))
  FileUtils.cp_r(File.join(ROOT, "ext", "rbpeek"), File.join(host, "ext"))
  FileUtils.cp_r(File.join(ROOT, "src"), host)
  FileUtils.cp_r(File.join(ROOT, "lib"), host)
  FileUtils.cp(File.join(ROOT, "Makefile"), host)
  FileUtils.cp(File.join(ROOT, "tools", "gen-syscalls.sh"), File.join(host, "tools"))
  FileUtils.cp(FIXTURE, host)
  b = E2E.run(["chroot", ruby.dir, "/bin/sh", "-c",
               # the suite's own BUILD (build-asan under make asan, also in MAKEFLAGS) is not the gem's
               "unset BUILD SAN MAKEFLAGS MFLAGS MAKELEVEL; cd #{inner}/build/rbpeek && #{ruby.bin} #{inner}/ext/rbpeek/extconf.rb >/dev/null && make -s tracer"],
              timeout: 180)
  unless b.status&.zero?
    (SCENARIOS + ["json"]).each { |s| fail("#{prefix}/#{s}", "building the extension in the chroot: #{b.describe} #{b.stdout[-400..]}") }
    next
  end
  run_scenarios(prefix, ruby.version, inner, host_out: ->(x) { ruby.host_path(x) }) do |s, out, fmt|
    argv = ["chroot", ruby.dir, ruby.bin, "-I#{inner}/build/rbpeek/build/ext", "#{inner}/scenarios.rb", s, out, fmt]
    E2E.run(with_tracefs(ruby.dir, argv), timeout: 30)
  end
end

finish
