#!/usr/bin/env bash
# bench/trace/versions.sh - the tracer benchmark (bench/trace/fib.rb) under
# the other Rubies: for each chroot of tools/setup-rubies.sh (3.3, 3.4 by
# default), build ext/rbpeek there with extconf.rb + make (as gem install
# would) and run fib.rb with that Ruby.  The peers (ruby-prof, stackprof)
# are Debian's packages, installed by `tools/setup-rubies.sh --bench`;
# where Debian has none for that Ruby, their rows are absent.  Needs root
# (chroot).  Usage: bench/trace/versions.sh [X.Y...]   (FIB_N, ROUNDS as run.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "bench/trace/versions.sh: needs root (chroot)"; exit 0; }
vs=("$@")
[ ${#vs[@]} -gt 0 ] || vs=(3.3 3.4)
tools/setup-rubies.sh --bench "${vs[@]}" >/dev/null 2>&1 || true
root=${RBPEEK_CHROOTS:-/var/cache/rbpeek/chroots}
for v in "${vs[@]}"; do
	dir=$root/$v
	[ -f "$dir/DEV_READY" ] || { echo "== ruby $v: no chroot with ruby$v-dev (tools/setup-rubies.sh --bench $v)"; continue; }
	inner=/tmp/rbpeek-bench.$$
	host=$dir$inner
	rm -rf "$host"
	mkdir -p "$host/src" "$host/ext" "$host/tools" "$host/build/rbpeek" "$host/bench"
	cp -r ext/rbpeek "$host/ext/"
	cp -r src/util "$host/src/"
	cp -r lib "$host/"
	cp tools/gen-syscalls.sh "$host/tools/"
	cp bench/trace/fib.rb "$host/bench/"
	echo "== ruby $v (chroot $dir)"
	if chroot "$dir" /bin/sh -c "cd $inner/build/rbpeek && ruby$v $inner/ext/rbpeek/extconf.rb >/dev/null && make -s V=0 >/dev/null"; then
		# /proc (the tracer reads /proc/cpuinfo to use the TSC) and tracefs
		# in a private mount namespace, as in tests/e2e/63-trace-versions.rb
		unshare --mount --propagation private sh -c 'mkdir -p "$1/sys/kernel/tracing" "$1/proc" &&
			mount -t tracefs nodev "$1/sys/kernel/tracing" 2>/dev/null;
			[ -d "$1/proc/self" ] || mount -t proc proc "$1/proc" 2>/dev/null;
			shift; exec "$@"' sh "$dir" chroot "$dir" "ruby$v" -I"$inner/lib" -I"$inner/build" \
			"$inner/bench/fib.rb" "${FIB_N:-30}" "${ROUNDS:-3}" 2>&1 | grep -v "kernel streams"
	else
		echo "building ext/rbpeek in the chroot failed"
	fi
	rm -rf "$host"
done
