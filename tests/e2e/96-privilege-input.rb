# frozen_string_literal: true
#
# 96-privilege-input.rb - the commands that need no privilege read their
# input as the user under sudo (issue 23's follow-up: `sudo rbpeek report
# -i FILE` and `snapshot --core FILE` used to open FILE as root, so a user
# allowed to run only `sudo rbpeek` could read a root-only profile, or make
# rbpeek parse any root-only file as a core):
#
#   report-root-only    a root-only (0600) raw profile: `sudo rbpeek report`
#                       is refused (cannot read it) and writes nothing; the
#                       same file readable by the user is converted
#   core-root-only      a root-only file given as --core: refused with a
#                       permission error, never parsed ("not a valid ELF
#                       core file" would mean root opened it)
#
# Runs from copies outside the checkout (lib/sudo_user.rb).
require "fileutils"
require "rbconfig"
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/sudo_user"
include E2E

names = %w[privilege/report-root-only privilege/core-root-only]
exit 0 if skip_without_rbpeek(names)
if (why = SudoUser.why_not)
  names.each { |n| skip(n, why) }
  finish
end

raw = File.join(Dir.mktmpdir("rbpeek-input-"), "input.raw.gz")
at_exit { FileUtils.rm_rf(File.dirname(raw)) }
rec = rbpeek("record", "-d", "1", "-f", "raw", "-o", raw, "--", RbConfig.ruby, "-e", "t = Time.now; nil while Time.now - t < 3",
             timeout: 60)

test("privilege/report-root-only") do
  next fail("privilege/report-root-only", "no raw file to start from: #{rec.describe} #{rec.stderr}") unless rec.status&.zero? && File.size?(raw)

  SudoUser.session do |s|
    secret = File.join(s.shared, "secret.raw.gz")
    FileUtils.cp(raw, secret)
    File.chmod(0o600, secret)             # root's alone
    open_copy = File.join(s.shared, "open.raw.gz")
    FileUtils.cp(raw, open_copy)
    File.chmod(0o644, open_copy)
    denied = s.sudo(["report", "-i", secret, "-f", "collapsed", "-o", "out.collapsed"])
    allowed = s.sudo(["report", "-i", open_copy, "-f", "collapsed", "-o", "ok.collapsed"])
    out = File.join(s.dir, "out.collapsed")
    if denied.status&.zero? || File.exist?(out)
      fail("privilege/report-root-only", "sudo rbpeek report read a root-only file: #{denied.describe} #{denied.stderr}")
    elsif !denied.stderr.match?(/permission|cannot read|denied/i)
      fail("privilege/report-root-only", "the refusal does not say why: #{denied.describe} #{denied.stderr}")
    elsif !allowed.status&.zero? || !File.size?(File.join(s.dir, "ok.collapsed"))
      fail("privilege/report-root-only", "a raw file the user can read was not converted: #{allowed.describe} #{allowed.stderr}")
    else
      ok("privilege/report-root-only", "refused (exit #{denied.status}): #{denied.stderr.lines.first.to_s.strip}")
    end
  end
end

test("privilege/core-root-only") do
  SudoUser.session do |s|
    secret = File.join(s.shared, "secret")
    File.write(secret, "root-only bytes, not a core\n" * 64, perm: 0o600)
    res = s.sudo(["snapshot", "--core", secret])
    if res.status&.zero?
      fail("privilege/core-root-only", "accepted a root-only file as a core: #{res.describe}")
    elsif res.stderr.match?(/not a valid ELF core|not the core/)
      fail("privilege/core-root-only", "root opened and parsed the root-only file: #{res.stderr.strip}")
    elsif !res.stderr.match?(/permission|denied|cannot read/i)
      fail("privilege/core-root-only", "the refusal does not say why: #{res.describe} #{res.stderr}")
    else
      ok("privilege/core-root-only", "refused (exit #{res.status}): #{res.stderr.lines.first.to_s.strip}")
    end
  end
end
finish
