# tests/formats/lib.sh - what the format tests share; sourced, not run.
#
#   formats_init NAME    cd to the repo, set BUILD/RBPEEK/SHOTS, make $work,
#                        define ok/fail/skip (lines "ok NAME/x", "FAIL
#                        NAME/x: why", "skip NAME/x: why" for tests/run) and
#                        clean up on exit (KEEP=1 keeps $work)
#   start_target         run the script's write_target, start ruby on it and
#                        wait for its "ready" line; $pid is the target
#   stop_target          kill it
#   sanitized FILE       0 when FILE holds a sanitizer report
#   node_results NAME RC OUTPUT   a browser script's result lines
# Scripts end with: exit $failed

formats_init() {
	cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
	BUILD=${BUILD:-build}
	RBPEEK=${RBPEEK_BIN:-$BUILD/rbpeek}   # tests/run's valgrind wrapper, if any
	SHOTS=${RBPEEK_TEST_OUT:-/tmp}
	FORMATS_NAME=$1
	failed=0 pid=
	work=$(mktemp -d "${TMPDIR:-/tmp}/rbpeek-$1.XXXXXX") || exit 1
	trap formats_cleanup EXIT
	trap 'exit 130' INT TERM HUP
}

ok() { echo "ok $FORMATS_NAME/$1${2:+: $2}"; }
fail() { echo "FAIL $FORMATS_NAME/$1: $2"; failed=1; }
skip() { echo "skip $FORMATS_NAME/$1: $2"; }

formats_cleanup() {
	[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
	if [[ -n ${KEEP:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
}

# Note pid (with its start time) for tests/run to kill should it outlive the test.
register_pid() {
	local s
	[[ -n ${RBPEEK_TEST_PIDS:-} ]] || return 0
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- "$1" $s
	echo "$1 ${21}" >>"$RBPEEK_TEST_PIDS"
}

start_target() {
	write_target
	ruby "$work/target.rb" >"$work/ready" 2>"$work/target.err" &
	pid=$!
	register_pid "$pid"
	for _ in $(seq 100); do
		grep -q ready "$work/ready" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

stop_target() {
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
}

sanitized() { grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$1"; }

# node_results NAME RC OUTPUT: pass on the ok/FAIL/skip lines a browser
# script (tests/browser/*.mjs) printed; a failed exit (RC) without a FAIL
# line fails NAME with the output's last lines.
node_results() {
	echo "$3" | grep -E '^(ok|FAIL|skip) '
	grep -q '^FAIL ' <<<"$3" && failed=1
	if (($2 != 0)) && ! grep -q '^FAIL ' <<<"$3"; then
		fail "$1" "node exited $2: $(tail -n 3 <<<"$3" | tr '\n' ' ')"
	fi
}
