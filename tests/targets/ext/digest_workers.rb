# frozen_string_literal: true

# digest_workers.rb - a forking server's shape with a C extension at work:
# the parent forks two workers that each hash in OpenSSL's SHA-256 (as
# digest_loop.rb), then waits.  The workers exit with the parent.
require "openssl"

data = "x" * 4_000_000
workers = Array.new(2) do
  fork do
    digest = OpenSSL::Digest.new("SHA256")
    loop do
      digest.update(data)
      exit if Process.ppid == 1
    end
  end
end
$stdout.puts "READY #{workers.join(' ')}"
$stdout.flush
Process.waitall
