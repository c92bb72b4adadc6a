# frozen_string_literal: true
#
# unicorn.conf.rb - two workers on the loopback port given in $RBPEEK_PORT
# (tests/e2e/74-servers.rb); the app is loaded once in the master, so a
# worker the master re-forks serves at once.
worker_processes 2
preload_app true
listen "127.0.0.1:#{ENV.fetch('RBPEEK_PORT')}"
timeout 30
