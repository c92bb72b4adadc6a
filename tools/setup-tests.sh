#!/usr/bin/env bash
# tools/setup-tests.sh - make everything the test suite needs, before the
# tests run (make test calls it; never a test with a time limit).  Cached
# under /var/cache/rbpeek and idempotent: seconds when everything is there.
#
#   tools/setup-tests.sh start    packages (tools/install-deps.sh --packaging),
#                                 the Ruby build's dependencies, then the
#                                 Rubies built from Debian's SOURCE package
#                                 (tools/build-debian-ruby.sh: the longest
#                                 step, all CPU) started in the background
#   tools/setup-tests.sh finish   what needs the network and the disk while
#                                 that build runs: the Debian chroots with
#                                 other Rubies (tools/setup-rubies.sh --dev),
#                                 the clean Debian 12 chroot of the package
#                                 tests, the browser and docs-site tools;
#                                 then waits for the Ruby build
#   tools/setup-tests.sh          both, one after the other
#
# make test runs "start", builds rbpeek and the test binaries while the Ruby
# build runs, then "finish", then tests/run: the README's command and .ci/run
# run the same suite on the same set-up.
#
# A step that fails is reported and the others go on: the tests that need
# what it makes skip themselves, saying which set-up step did not make it.
# A Ruby build that failed is not retried for 6 hours (the stamp
# $RBPEEK_DEBSRC/LAST_FAILED; remove it to retry), so that make asan after a
# failed make test does not spend another 45 minutes on it.
#
# As a user other than root nothing can be installed: this prints what is
# missing and exits 0; the tests that need root skip with the reason.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

cache=${RBPEEK_CACHE:-/var/cache/rbpeek}
debsrc=${RBPEEK_DEBSRC:-$cache/debsrc}
lock=$cache/ruby-build.lock
log=$cache/ruby-build.log
status_file=$cache/ruby-build.status
stamp=$debsrc/LAST_FAILED
build_limit=${RBPEEK_RUBY_BUILD_LIMIT:-2700} # s; .ci/run's 90 minutes hold it

say() { echo "setup-tests: $*"; }
warn() { echo "setup-tests: warning: $*" >&2; }

# True when every variant of build-debian-ruby.sh is built.
ruby_builds_ready() {
	local want have
	want=$(sed -n 's/^all=(\(.*\))$/\1/p' tools/build-debian-ruby.sh | wc -w)
	have=$(tools/build-debian-ruby.sh --list | wc -l)
	[ "$want" -gt 0 ] && [ "$have" -ge "$want" ]
}

# True when the arm64 test machine's image is made (tools/arm64-vm).
arm64_image_ready() {
	[ -f "${RBPEEK_ARM64_CACHE:-$cache/arm64}/bookworm/READY" ] &&
		[ -f "${RBPEEK_ARM64_CACHE:-$cache/arm64}/rubies.img" ]
}

# True while the background build holds its lock.
ruby_build_running() {
	[ -e "$lock" ] && ! flock -n "$lock" true
}

start() {
	if [ "$(id -u)" != 0 ]; then
		tools/install-deps.sh || true
		say "not root: nothing installed; tests that need root skip"
		return 0
	fi
	mkdir -p "$cache" "$debsrc"
	tools/install-deps.sh --packaging </dev/null || warn "tools/install-deps.sh --packaging failed"
	# the arm64 cross toolchain and test machine's packages (67-arm64)
	tools/install-deps.sh --arm64 </dev/null || warn "tools/install-deps.sh --arm64 failed: the arm64 tests skip"
	if ruby_builds_ready && arm64_image_ready; then
		say "Rubies from Debian's source: ready ($(tools/build-debian-ruby.sh --list | awk '{ print $1 }' | paste -sd' '))"
		return 0
	fi
	if ruby_build_running; then
		say "Rubies from Debian's source: a build is already running (log: $log)"
		return 0
	fi
	if [ -f "$stamp" ] && [ -n "$(find "$stamp" -mmin -360 2>/dev/null)" ]; then
		warn "the last Ruby build failed at $(cat "$stamp"); not retried for 6 hours (rm $stamp to retry; log: $log)"
		return 0
	fi
	# One apt at a time: the build's dependencies in the foreground; the
	# build itself uses apt only with a private state.
	tools/build-debian-ruby.sh --deps </dev/null || warn "tools/build-debian-ruby.sh --deps failed"
	rm -f "$status_file"
	say "Rubies from Debian's source: building in the background (log: $log)"
	# The lock is taken by the background job itself; wait until it holds it,
	# so that "finish" cannot look before the build has started.
	setsid flock -x "$lock" bash -c '
		s=$(date +%s)
		timeout "$1" tools/build-debian-ruby.sh </dev/null >"$2" 2>&1
		rc=$?
		# the arm64 test machine image (debootstrap --arch arm64, CPU under
		# qemu-user): after the Ruby build, not beside it, on 2 cores
		timeout "$1" tools/arm64-vm image </dev/null >>"$2" 2>&1 || echo "arm64-vm image failed" >>"$2"
		# and its Ruby 3.3 and 3.4 (arm64 roots of trixie and sid on a disk of their own)
		timeout "$1" tools/arm64-vm rubies </dev/null >>"$2" 2>&1 || echo "arm64-vm rubies failed" >>"$2"
		echo "$rc $(( $(date +%s) - s ))" >"$3"
		[ "$rc" = 0 ] && rm -f "$4" || date -u +%FT%TZ >"$4"' \
		_ "$build_limit" "$log" "$status_file" "$stamp" </dev/null >/dev/null 2>&1 &
	local i
	for i in $(seq 1 100); do
		ruby_build_running && return 0
		[ -f "$status_file" ] && return 0
		sleep 0.1
	done
	return 0
}

finish() {
	if [ "$(id -u)" != 0 ]; then
		say "not root: no chroots, no Ruby builds; tests that need them skip"
		return 0
	fi
	local t0=$SECONDS
	tools/setup-rubies.sh --dev </dev/null || warn "tools/setup-rubies.sh --dev failed: the multi-version tests of the missing chroots skip"
	tools/setup-clean-chroot.sh bookworm </dev/null >/dev/null || warn "no clean bookworm chroot: the package tests skip"
	tools/install-browser-deps.sh </dev/null || warn "no browser tools: the browser tests skip"
	tools/install-docs-deps.sh </dev/null >/dev/null || warn "no mkdocs: the docs-site test skips"
	say "chroots, browser and docs tools: $((SECONDS - t0)) s"
	if ruby_build_running; then
		say "waiting for the Ruby build from Debian's source (log: $log)"
		flock -x "$lock" true
	fi
	if [ -f "$status_file" ]; then
		local rc secs
		read -r rc secs <"$status_file"
		if [ "$rc" = 0 ]; then
			say "Rubies from Debian's source: built in $secs s"
		else
			warn "the Ruby build from Debian's source failed (exit $rc after $secs s); its tests skip. Last lines of $log:"
			tail -n 20 "$log" >&2
		fi
		rm -f "$status_file"
	fi
	return 0
}

case "${1:-all}" in
start) start ;;
finish) finish ;;
all) start && finish ;;
*) echo "usage: tools/setup-tests.sh [start|finish]" >&2; exit 2 ;;
esac
