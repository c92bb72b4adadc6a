# frozen_string_literal: true
#
# 10-cli.rb - options: --help, --version, usage errors (exit 2).
require_relative "lib/e2e"
include E2E

# Exit 2 and a one-line "rbpeek: error: ..." (no command at all: usage text).
USAGE_ERRORS = {
  "no-command" => [],
  "unknown-command" => %w[frobnicate],
  "snapshot-no-target" => %w[snapshot],
  "snapshot-pid-not-a-number" => %w[snapshot --pid abc],
  "snapshot-pid-missing-value" => %w[snapshot --pid],
  "snapshot-pid-and-core" => %w[snapshot --pid 1 --core /nonexistent],
  "snapshot-unknown-option" => %w[snapshot --pid 1 --bogus],
  "snapshot-extra-argument" => %w[snapshot --pid 1 extra],
  "snapshot-sysroot-without-core" => %w[snapshot --pid 1 --sysroot /],
  "heap-pid-missing-value" => %w[heap --pid],
  "heap-unknown-option" => %w[heap --pid 1 --bogus],
  "inspect-no-target" => %w[inspect],
  "inspect-pid-not-a-number" => %w[inspect --pid abc],
  "inspect-extra-argument" => %w[inspect --pid 1 extra],
  "report-unknown-option" => %w[report --bogus],
  "trace-missing-value" => %w[trace -o],
  "snapshot-layout-unknown" => %w[snapshot --pid 1 --layout bogus],
  "record-layout-unknown" => %w[record --pid 1 --layout bogus],
  "top-layout-unknown" => %w[top --pid 1 --layout bogus],
}.freeze

names = %w[cli/help cli/snapshot-help cli/version] + USAGE_ERRORS.keys.map { |k| "cli/usage-#{k}" }
exit 0 if skip_without_rbpeek(names)

test("cli/help") do
  r = rbpeek("--help")
  out = r.stdout
  if r.status != 0 then fail("cli/help", r.describe)
  elsif !out.include?("snapshot") then fail("cli/help", "does not mention the snapshot command: #{out[0, 300].inspect}")
  else ok("cli/help")
  end
end

test("cli/snapshot-help") do
  r = rbpeek("snapshot", "--help")
  missing = %w[--pid --core --json --nonblocking].reject { |o| r.stdout.include?(o) }
  if r.status != 0 then fail("cli/snapshot-help", r.describe)
  elsif !missing.empty? then fail("cli/snapshot-help", "does not mention #{missing.join(', ')}")
  else ok("cli/snapshot-help")
  end
end

test("cli/version") do
  r = rbpeek("--version")
  if r.status != 0 then fail("cli/version", r.describe)
  elsif r.stdout !~ /\Arbpeek 0\.1\.0 \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n\z/
    fail("cli/version", "printed #{r.stdout.inspect}, expected \"rbpeek 0.1.0 (commit <12 hex digits>)\\n\"")
  elsif File.exist?(File.join(ROOT, ".git")) && (c = r.stdout[/commit ([0-9a-f]{12})/, 1]) &&
        !system("git", "-C", ROOT, "rev-parse", "--verify", "-q", "#{c}^{commit}", out: File::NULL)
    # (not HEAD: the binary may predate the last commit until make runs)
    fail("cli/version", "printed #{r.stdout.inspect}, but this checkout has no commit #{c}")
  else ok("cli/version", r.stdout.strip)
  end
end

USAGE_ERRORS.each do |key, args|
  name = "cli/usage-#{key}"
  test(name) do
    r = rbpeek(*args)
    if r.status != 2 then fail(name, "rbpeek #{args.join(' ')}: #{r.describe}, expected exit 2")
    elsif !args.empty? && (p = error_format_problem(r)) then fail(name, "rbpeek #{args.join(' ')}: #{p}")
    else ok(name)
    end
  end
end
finish
