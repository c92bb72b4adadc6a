#!/usr/bin/env bash
# setup-rubies.sh - Debian chroots with other Rubies, for the multi-version
# end-to-end tests.  Cached under $RBPEEK_CHROOTS (default
# /var/cache/rbpeek/chroots) so repeated runs reuse them; idempotent.
#
#   tools/setup-rubies.sh            make every Debian chroot that is missing
#   tools/setup-rubies.sh 2.7 3.3    only these
#   tools/setup-rubies.sh --list     print "VERSION DIR" for chroots that are ready
#   tools/setup-rubies.sh --dev [V]  also give the chroots (made if missing) what
#                                    building a C extension needs (rubyX.Y-dev, zlib
#                                    gcc, make): the tracer's tests build
#                                    ext/rbpeek inside each chroot
#   tools/setup-rubies.sh --bench [V]  --dev, plus the tracer benchmark's peers:
#                                    Debian's ruby-prof and ruby-stackprof
#                                    (bench/trace/versions.sh)
#
# Versions: 2.7 (bullseye, ruby2.7), 3.3 (trixie, ruby3.3), 3.4 (sid plus
# experimental, ruby3.4).  Each chroot is made with debootstrap
# --variant=minbase (about 25 s) plus the Ruby package, from the Debian
# mirror this machine's apt uses (tools/debian-mirror.sh; RBPEEK_DEBIAN_MIRROR
# overrides it); a file READY marks a complete one, so an interrupted run is
# redone, never half used.  A first run takes minutes: in CI, run it as a
# step of its own (cached) before tests/run, whose per-file timeout it would
# otherwise eat.
#
# Rubies no Debian suite packages (4.0, 4.1) are not made here: build them
# into /opt/rubies/<version> (or install them with a version manager) and
# the multi-version tests find them (tests/e2e/83-found-rubies.rb).  Rubies
# of other build shapes (static, YJIT, DWARF) come from Debian's source
# packages: tools/build-debian-ruby.sh.
set -euo pipefail

root=${RBPEEK_CHROOTS:-/var/cache/rbpeek/chroots}
all=(2.7 3.3 3.4)

suite_of() { case $1 in 2.7) echo bullseye;; 3.3) echo trixie;; 3.4) echo sid;; *) return 1;; esac; }
pkg_of() { echo "ruby$1"; }

if [ "${1:-}" = --list ]; then
	for v in "${all[@]}"; do
		[ -f "$root/$v/READY" ] && echo "$v $root/$v"
	done
	exit 0
fi

[ "$(id -u)" = 0 ] || { echo "setup-rubies.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
mirror=$("$(dirname "$0")/debian-mirror.sh")
command -v debootstrap >/dev/null || {
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq debootstrap
}

# Unmount what an interrupted run left mounted under $1 (debootstrap mounts
# proc and sys in the chroot), deepest first, so that rm -rf stays inside it.
unmount_under() {
	local m
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
		while read -r m; do umount -l "$m" || true; done
}

make_one() {
	local v=$1 suite dir
	suite=$(suite_of "$v") || { echo "setup-rubies.sh: unknown version $v" >&2; return 1; }
	dir=$root/$v
	[ -f "$dir/READY" ] && return 0
	echo "setup-rubies.sh: making $suite chroot for ruby $v in $dir" >&2
	unmount_under "$dir"
	rm -rf "$dir"
	mkdir -p "$dir"
	debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$root/$v.log" 2>&1
	local apt=(chroot "$dir" apt-get -o Acquire::Check-Valid-Until=false -y -qq)
	if [ "$v" = 3.4 ]; then
		echo "deb $mirror experimental main" >"$dir/etc/apt/sources.list.d/experimental.list"
		"${apt[@]}" update >>"$root/$v.log" 2>&1
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" -t experimental install "$(pkg_of "$v")" \
			>>"$root/$v.log" 2>&1 ||
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "$(pkg_of "$v")" >>"$root/$v.log" 2>&1
	else
		"${apt[@]}" update >>"$root/$v.log" 2>&1
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "$(pkg_of "$v")" >>"$root/$v.log" 2>&1
	fi
	chroot "$dir" "ruby$v" -e 'print RUBY_VERSION' >"$dir/RUBY_VERSION"
	touch "$dir/READY"
	echo "setup-rubies.sh: ruby $(cat "$dir/RUBY_VERSION") ready in $dir" >&2
}

# The headers and compiler for C extensions; a file DEV_READY marks it done.
dev_one() {
	local v=$1 dir=$root/$1
	[ -f "$dir/READY" ] || return 1
	[ -f "$dir/DEV_READY" ] && return 0
	echo "setup-rubies.sh: installing ruby$v-dev, gcc, make in $dir" >&2
	local apt=(chroot "$dir" apt-get -o Acquire::Check-Valid-Until=false -o DPkg::Lock::Timeout=300 -y -qq)
	local pkgs=("ruby$v-dev" gcc make libc6-dev zlib1g-dev)
	"${apt[@]}" update >>"$root/$v.log" 2>&1
	if [ "$v" = 3.4 ]; then
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" -t experimental install "${pkgs[@]}" >>"$root/$v.log" 2>&1 ||
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${pkgs[@]}" >>"$root/$v.log" 2>&1
	else
		DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${pkgs[@]}" >>"$root/$v.log" 2>&1
	fi
	touch "$dir/DEV_READY"
}
# The benchmark's peers (packaged for the chroot's Ruby); BENCH_READY marks it.
bench_one() {
	local v=$1 dir=$root/$1
	[ -f "$dir/BENCH_READY" ] && return 0
	echo "setup-rubies.sh: installing ruby-prof, ruby-stackprof in $dir" >&2
	local apt=(chroot "$dir" apt-get -o Acquire::Check-Valid-Until=false -o DPkg::Lock::Timeout=300 -y -qq)
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" install ruby-prof ruby-stackprof >>"$root/$v.log" 2>&1
	touch "$dir/BENCH_READY"
}

dev=0 bench=0
if [ "${1:-}" = --dev ]; then
	dev=1
	shift
elif [ "${1:-}" = --bench ]; then
	dev=1 bench=1
	shift
fi

mkdir -p "$root"
# One run at a time (two test files may both ask): the others wait for it.
exec 9>"$root/.lock"
flock -w 1800 9 || { echo "setup-rubies.sh: $root/.lock still held after 30 min" >&2; exit 1; }
status=0
for v in "${@:-${all[@]}}"; do
	make_one "$v" || { echo "setup-rubies.sh: ruby $v failed, see $root/$v.log" >&2; status=1; continue; }
	if [ $dev = 1 ]; then
		dev_one "$v" || { echo "setup-rubies.sh: ruby$v-dev failed, see $root/$v.log" >&2; status=1; }
	fi
	if [ $bench = 1 ]; then
		bench_one "$v" || { echo "setup-rubies.sh: ruby-prof failed, see $root/$v.log" >&2; status=1; }
	fi
done
exit $status
