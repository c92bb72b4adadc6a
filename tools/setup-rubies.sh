#!/usr/bin/env bash
# setup-rubies.sh - Debian chroots with other Rubies, for the multi-version
# end-to-end tests.  Cached under $RBPEEK_CHROOTS (default
# /var/cache/rbpeek/chroots) so repeated runs reuse them; idempotent.
#
#   tools/setup-rubies.sh            make every Debian chroot that is missing
#   tools/setup-rubies.sh 2.7 4.0    only these (4.0 is built only when named)
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
# --variant=minbase (about 25 s) plus the Ruby package; a file READY marks
# a complete one, so an interrupted run is redone, never half used.  A
# first run takes minutes: in CI, run it as a step of its own (cached)
# before tests/run, whose per-file timeout it would otherwise eat.
#
# 4.0: no Debian suite packages Ruby 4.0 yet, so its chroot (sid) gets Ruby
# 4.0.5 built from source the way a user or a container image builds it
# (./configure --enable-shared --prefix=/usr/local; make install), from the
# v4.0.5 tag of a git mirror of Ruby ($RUBY_GIT, default
# /work/.mirror/Shopify+ruby/repo).  About 10-20 minutes on two cores, so
# it is made only when named (tools/setup-rubies.sh --dev 4.0, as .ci/run
# does), never by a test's call without arguments.
set -euo pipefail

root=${RBPEEK_CHROOTS:-/var/cache/rbpeek/chroots}
mirror=${RBPEEK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
ruby_git=${RUBY_GIT:-/work/.mirror/Shopify+ruby/repo}
all=(2.7 3.3 3.4 4.0)
debian=(2.7 3.3 3.4)   # made when no version is named
source_tag=v4.0.5      # what 4.0 is built from

suite_of() { case $1 in 2.7) echo bullseye;; 3.3) echo trixie;; 3.4|4.0) echo sid;; *) return 1;; esac; }
pkg_of() { echo "ruby$1"; }

if [ "${1:-}" = --list ]; then
	for v in "${all[@]}"; do
		[ -f "$root/$v/READY" ] && echo "$v $root/$v"
	done
	exit 0
fi

[ "$(id -u)" = 0 ] || { echo "setup-rubies.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
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
	if [ "$v" = 4.0 ]; then
		build_from_source "$dir" >>"$root/$v.log" 2>&1
	elif [ "$v" = 3.4 ]; then
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

# Ruby $source_tag into chroot $1's /usr/local, built there by its own gcc
# (baseruby: sid's ruby), from the git mirror's tag; ruby4.0 names it.
build_from_source() {
	local dir=$1 src=$1/usr/src/ruby
	local apt=(chroot "$dir" apt-get -o Acquire::Check-Valid-Until=false -y -qq)
	[ -d "$ruby_git" ] || { echo "no git mirror of Ruby at $ruby_git (set RUBY_GIT)"; return 1; }
	"${apt[@]}" update
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" install ruby gcc make autoconf libc6-dev \
		zlib1g-dev libyaml-dev libffi-dev libssl-dev
	mkdir -p "$src"
	git --git-dir="$ruby_git" archive "$source_tag" | tar -x -C "$src"
	# a git tree (unlike a release tarball) downloads the bundled gems
	# (minitest, rake, ...) from rubygems.org, which is not reachable here:
	# this Ruby has its default gems only
	: >"$src/gems/bundled_gems"
	chroot "$dir" /bin/sh -ec "cd /usr/src/ruby && ./autogen.sh && ./configure --prefix=/usr/local \
		--enable-shared --disable-install-doc && nice make -j$(nproc) && make install"
	ln -sf ruby "$dir/usr/local/bin/ruby4.0"
	rm -rf "$src"
}

# The headers and compiler for C extensions; a file DEV_READY marks it done.
dev_one() {
	local v=$1 dir=$root/$1
	[ -f "$dir/READY" ] || return 1
	[ -f "$dir/DEV_READY" ] && return 0
	if [ "$v" = 4.0 ]; then   # built from source: headers and gcc are there
		touch "$dir/DEV_READY"
		return 0
	fi
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
for v in "${@:-${debian[@]}}"; do
	make_one "$v" || { echo "setup-rubies.sh: ruby $v failed, see $root/$v.log" >&2; status=1; continue; }
	if [ $dev = 1 ]; then
		dev_one "$v" || { echo "setup-rubies.sh: ruby$v-dev failed, see $root/$v.log" >&2; status=1; }
	fi
	if [ $bench = 1 ]; then
		bench_one "$v" || { echo "setup-rubies.sh: ruby-prof failed, see $root/$v.log" >&2; status=1; }
	fi
done
exit $status
