# frozen_string_literal: true

# digest_loop.rb - a real C extension from the distribution at work: OpenSSL's
# SHA-256 over a large string, in a loop (ossl_digest_update -> libcrypto).
require "openssl"

digest = OpenSSL::Digest.new("SHA256")
data = "x" * 4_000_000
$stdout.puts "READY"
$stdout.flush
loop { digest.update(data) }
