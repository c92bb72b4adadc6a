#!/usr/bin/env bash
# tools/setup-tests.sh - make everything the test suite needs, before the
# tests that need it run (make test calls it; never a test with a time
# limit).  Cached under /var/cache/rbpeek and idempotent: seconds when
# everything is there.
#
#   tools/setup-tests.sh start    packages (tools/install-deps.sh --packaging
#                                 and --arm64), the Ruby build's dependencies,
#                                 then the long CPU-bound steps started in the
#                                 background, niced, one after the other:
#                                   debsrc  the Rubies built from Debian's
#                                           SOURCE package (tools/build-debian-ruby.sh)
#                                   arm64   the arm64 test machine's image and
#                                           Ruby roots (tools/arm64-vm image,
#                                           rubies) and the arm64 Rubies with
#                                           DWARF (tools/layout/dwarf-aarch64)
#   tools/setup-tests.sh finish   what needs the network and the disk while
#                                 that job runs: the Debian chroots with
#                                 other Rubies (tools/setup-rubies.sh --dev),
#                                 the clean Debian 12 chroot of the package
#                                 tests, the browser and docs-site tools
#   tools/setup-tests.sh wait [STEP]
#                                 wait until the background job has finished
#                                 STEP (debsrc or arm64; default: all), and
#                                 say how it ended; at once when no job runs
#   tools/setup-tests.sh          start, finish and wait, one after the other
#
# make test runs "start", builds rbpeek and the test binaries while the
# background job runs, then "finish", then tests/run.  tests/run runs first
# every test that needs nothing of the background job (the unit tests, most
# end-to-end tests, the fuzzers) while it still runs; a test file that needs
# one of its steps says so with a line "# e2e-needs: STEP" and runs after
# `tools/setup-tests.sh wait STEP`, at the end.  So the README's command and
# .ci/run run the same suite on the same set-up, and the long builds of a
# fresh machine overlap the tests instead of coming before them.
#
# A step that fails is reported and the others go on: the tests that need
# what it makes skip themselves, saying which set-up step did not make it.
# A background job that failed is not retried for 6 hours (the stamp
# $RBPEEK_DEBSRC/LAST_FAILED; remove it to retry), so that make asan after a
# failed make test does not spend another 45 minutes on it.
#
# As a user other than root nothing can be installed: this prints what is
# missing and exits 0; the tests that need root skip with the reason.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
self=$PWD/tools/setup-tests.sh

cache=${RBPEEK_CACHE:-/var/cache/rbpeek}
debsrc=${RBPEEK_DEBSRC:-$cache/debsrc}
arm64_cache=${RBPEEK_ARM64_CACHE:-$cache/arm64}
# the background job: its lock (held while it runs), its log, and a file per
# finished step ("RC SECONDS"; STEP.failed: the time a step last failed)
lock=$cache/setup-job.lock
log=$cache/setup-job.log
steps_dir=$cache/setup-job
step_limit=${RBPEEK_SETUP_STEP_LIMIT:-2700} # s per step; .ci/run's 90 minutes hold it
steps=(debsrc arm64)
# the arm64 Rubies with DWARF (tools/layout/dwarf-aarch64), for arm64/dwarf/*
dwarf_rubies=(ruby3.3 ruby3.4)

say() { echo "setup-tests: $*"; }
warn() { echo "setup-tests: warning: $*" >&2; }

# step_ready STEP: whether what STEP makes is all there (cached)
step_ready() {
	case $1 in
	debsrc)
		local want have
		want=$(sed -n 's/^all=(\(.*\))$/\1/p' tools/build-debian-ruby.sh | wc -w)
		have=$(tools/build-debian-ruby.sh --list | wc -l)
		[ "$want" -gt 0 ] && [ "$have" -ge "$want" ]
		;;
	arm64)
		[ -f "$arm64_cache/bookworm/READY" ] && [ -f "$arm64_cache/rubies.img" ] &&
			tools/layout/dwarf-aarch64 --ready "${dwarf_rubies[@]}" >/dev/null 2>&1
		;;
	*) return 1 ;;
	esac
}

# step_run STEP: make what STEP makes (the background job's work)
step_run() {
	case $1 in
	debsrc) tools/build-debian-ruby.sh ;;
	arm64)
		# the image first (debootstrap --arch arm64, CPU under qemu-user),
		# then its Ruby 3.3 and 3.4 roots, then the DWARF Rubies
		tools/arm64-vm image && tools/arm64-vm rubies &&
			tools/layout/dwarf-aarch64 "${dwarf_rubies[@]}"
		;;
	esac
}

# step_failed_recently STEP: whether STEP failed less than 6 hours ago
step_failed_recently() {
	[ -f "$steps_dir/$1.failed" ] && [ -n "$(find "$steps_dir/$1.failed" -mmin -360 2>/dev/null)" ]
}

# True while the background job holds its lock.
job_running() {
	[ -e "$lock" ] && ! flock -n "$lock" true
}

# job: every step not ready, one after the other (run in the background,
# niced, under the lock, by start)
job() {
	local st s rc
	for st in "${steps[@]}"; do
		s=$(date +%s)
		if step_ready "$st"; then
			echo "0 -" >"$steps_dir/$st"
			continue
		elif step_failed_recently "$st"; then
			echo "== $st: failed at $(cat "$steps_dir/$st.failed"); not retried for 6 hours (rm $steps_dir/$st.failed to retry)"
			rc=3
		else
			echo "== $st: started $(date -u +%FT%TZ)"
			timeout "$step_limit" bash "$self" step "$st" </dev/null
			rc=$?
			echo "== $st: exit $rc after $(($(date +%s) - s)) s"
			if [ "$rc" = 0 ]; then rm -f "$steps_dir/$st.failed"; else date -u +%FT%TZ >"$steps_dir/$st.failed"; fi
		fi
		echo "$rc $(($(date +%s) - s))" >"$steps_dir/$st"
	done
}

start() {
	if [ "$(id -u)" != 0 ]; then
		tools/install-deps.sh || true
		say "not root: nothing installed; tests that need root skip"
		return 0
	fi
	mkdir -p "$cache" "$debsrc" "$steps_dir"
	tools/install-deps.sh --packaging </dev/null || warn "tools/install-deps.sh --packaging failed"
	# the arm64 cross toolchain and test machine's packages (67-arm64)
	tools/install-deps.sh --arm64 </dev/null || warn "tools/install-deps.sh --arm64 failed: the arm64 tests skip"
	if job_running; then
		say "background set-up: a job is already running (log: $log)"
		return 0
	fi
	local st missing=()
	for st in "${steps[@]}"; do
		step_ready "$st" || missing+=("$st")
	done
	for st in "${steps[@]}"; do rm -f "$steps_dir/$st" "$steps_dir/$st.said"; done
	# the DWARF Rubies made before, into this checkout (the arm64 machine
	# sees only the checkout): a copy, no build
	if tools/layout/dwarf-aarch64 --ready "${dwarf_rubies[@]}" >/dev/null 2>&1; then
		tools/layout/dwarf-aarch64 "${dwarf_rubies[@]}" >/dev/null 2>&1 ||
			warn "tools/layout/dwarf-aarch64 failed: arm64/dwarf/* skip"
	fi
	if [ ${#missing[@]} = 0 ]; then
		say "background set-up: everything is ready ($(tools/build-debian-ruby.sh --list | awk '{ print $1 }' | paste -sd' '), arm64)"
		return 0
	fi
	# One apt at a time: the build's dependencies in the foreground; the
	# build itself uses apt only with a private state.
	tools/build-debian-ruby.sh --deps </dev/null || warn "tools/build-debian-ruby.sh --deps failed"
	say "background set-up: making ${missing[*]} (niced; log: $log)"
	# The lock is taken by the job itself; wait until it holds it, so that
	# "wait" cannot look before the job has started.  Niced: the tests that
	# run meanwhile come first.
	setsid flock -x "$lock" nice -n 10 bash "$self" job </dev/null >"$log" 2>&1 &
	local i
	for i in $(seq 1 100); do
		job_running && return 0
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
	return 0
}

# steps_done STEP...: whether the background job has finished every STEP
steps_done() {
	local st
	for st in "$@"; do
		[ -f "$steps_dir/$st" ] || [ -f "$steps_dir/$st.said" ] || return 1
	done
}

# wait_for [STEP...]: until the background job has finished each STEP (or
# has ended); then how each ended, once
wait_for() {
	local t0=$SECONDS st rc secs
	(($# > 0)) || set -- "${steps[@]}"
	for st in "$@"; do
		case " ${steps[*]} " in *" $st "*) ;; *) warn "no set-up step $st (steps: ${steps[*]})"; return 2 ;; esac
	done
	if job_running && ! steps_done "$@"; then
		say "waiting for the background set-up: $* (log: $log)"
		while job_running && ! steps_done "$@"; do sleep 2; done
		say "waited $((SECONDS - t0)) s"
	fi
	for st in "$@"; do
		[ -f "$steps_dir/$st" ] || continue
		read -r rc secs <"$steps_dir/$st"
		if [ "$rc" = 0 ] && [ "$secs" = - ]; then
			say "background set-up: $st ready"
		elif [ "$rc" = 0 ]; then
			say "background set-up: $st made in $secs s"
		else
			warn "background set-up: $st failed (exit $rc after $secs s); the tests that need it skip. Its log: $log"
			grep -n "^== $st" "$log" >&2
			tail -n 20 "$log" >&2
		fi
		# said once
		mv -f "$steps_dir/$st" "$steps_dir/$st.said"
	done
	return 0
}

case "${1:-all}" in
start) start ;;
finish) finish ;;
wait) shift; wait_for "$@" ;;
all) start && finish && wait_for ;;
job) job ;;
step) step_run "${2:?step STEP}" ;;
*) echo "usage: tools/setup-tests.sh [start|finish|wait [STEP...]]" >&2; exit 2 ;;
esac
