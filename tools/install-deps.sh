#!/bin/sh
# tools/install-deps.sh - install what building and testing rbpeek needs.
#
# Idempotent and quick when everything is present (make test and make example
# run it every time): it asks dpkg which packages are missing and only then
# runs apt-get update + install.  Debian 12 (bookworm) as root is the
# reference; as another user it prints the command to run and fails.
#
#   build-essential   cc, make, libc headers
#   zlib1g-dev        gzip output (pprof, raw files)
#   libdw-dev         elfutils' libdwfl: native stacks (--native), unwinding
#                     and symbols (pulls in libelf-dev)
#   ruby, ruby-dev    the Ruby that test targets and examples run on; ruby
#                     also runs the end-to-end tests (json is built in)
#   gdb               gcore, to make core files of test targets
#   valgrind          instruction counts (callgrind) for benchmarks
#   procps            ps/pgrep and /proc helpers
#   util-linux        setpriv (permission tests run rbpeek as nobody)
#   coreutils         timeout (every test runs under one)
#   protobuf-compiler protoc --decode checks the tracer's Perfetto files
#   ruby-prof, ruby-stackprof  peers of the tracer benchmark (bench/trace);
#                     stackprof also of make bench's target slowdown
#   clang, libclang-rt-14-dev
#                     libFuzzer (tests/fuzz, make fuzz-build)
#   sudo              the privilege tests (rbpeek run under sudo)
#   tmux              a real terminal for the `rbpeek top` and Ctrl-Z tests
#   strace            checks the flags rbpeek creates its temporary files with
#   rubocop, puma,    real Ruby software profiled end to end (tests/e2e/
#   unicorn,          74-servers.rb): a linter, two forking servers and
#   ruby-rack, wrk    Rack; wrk puts loopback load on the servers
#   bundler           `rbpeek trace -- bundle exec ...` (tests/e2e/62-trace-exec.rb)
#   ruby-rails, ruby-sqlite3
#                     a Rails app under puma for the field test
#                     (tests/e2e/69-rails.rb; about 3.5 MB to download)
#   libelf-dev, liblzma-dev, libbz2-dev, libzstd-dev, pkg-config
#                     the static archives `make static` links (libdw.a and
#                     libelf.a come with libdw-dev/libelf-dev, libz.a with
#                     zlib1g-dev; Debian 13's libdw.a also needs libzstd.a);
#                     pkg-config --static names the set libdw.a needs
#   libgraphviz-dev   Graphviz's library (libgvc, libcgraph): lays out
#                     -f callgraph (the distro build; the static binary
#                     writes DOT text instead)
#   libbpf-dev, bpftool
#                     the eBPF programs (src/bpf/*.bpf.c, compiled by clang):
#                     libbpf loads them (libbpf.a for make static), bpftool
#                     turns each object into a skeleton header
#   libssl-dev, openssl
#                     the agent's https (OpenSSL: libssl.so, and libssl.a /
#                     libcrypto.a for make static); openssl, the tests' CA
#   systemd           systemd-analyze rates the agent's unit's hardening
#
#   tools/install-deps.sh --packaging   also what packaging needs and its
#                     tests use (tests/e2e/98-install.rb, 99-deb.rb), and the
#                     other clients the tests read outputs with (the name is
#                     older than its scope: tools/setup-tests.sh installs the
#                     tests' packages with it):
#   debhelper, dpkg-dev, lintian   build and check the Debian package
#   debootstrap       the clean Debian 12 chroot the package is installed in
#   man-db            man -w rbpeek after make install
#   zsh               checks the generated zsh completion (zsh -n)
#   golang-go         go tool pprof, the real client of the pprof outputs and
#                     the agent's payloads (tests/formats, 79-agent): installed
#                     before the tests by tools/setup-tests.sh, not inside them
#   git               make dist (the release tarball the package and gem are
#                     built from is git archive of the checkout)
#
#   tools/install-deps.sh --arm64   also what the arm64 build and its test
#                     machine need (docs/install.md, "arm64"):
#   gcc-aarch64-linux-gnu  the cross compiler (make ARCH=arm64)
#   crossbuild-essential-arm64  dpkg-buildpackage -aarm64 (the arm64 .deb)
#   libc6-dev:arm64, zlib1g-dev:arm64, libdw-dev:arm64, libelf-dev:arm64,
#   liblzma-dev:arm64, libbz2-dev:arm64, libzstd-dev:arm64, libbpf-dev:arm64,
#   libssl-dev:arm64
#                     the same libraries for arm64 through multiarch (the
#                     arm64 architecture is added to dpkg first); their .a
#                     files for make static ARCH=arm64
#   ruby-dev:arm64    the tracer extension's arm64 Ruby headers and libruby
#   qemu-system-arm, qemu-efi-aarch64  boot the arm64 test machine
#                     (tools/arm64-vm; TCG, no KVM for arm64 on x86-64)
#   qemu-user-static  debootstrap's second stage of its arm64 image
#   debootstrap       makes that image from Debian's archive
#   e2fsprogs         mkfs.ext4 -d: the image as a disk, made without root mounts
#   openssh-client    tools/arm64-vm run reaches the machine over ssh
set -eu

PACKAGES="build-essential zlib1g-dev libdw-dev ruby ruby-dev gdb valgrind procps util-linux coreutils protobuf-compiler ruby-prof ruby-stackprof strace
	clang libclang-rt-14-dev sudo tmux rubocop puma unicorn ruby-rack wrk bundler ruby-rails ruby-sqlite3
	libelf-dev liblzma-dev libbz2-dev libzstd-dev pkg-config libbpf-dev bpftool libgraphviz-dev libssl-dev openssl systemd"
if [ "${1:-}" = --packaging ]; then
	PACKAGES="$PACKAGES debhelper dpkg-dev lintian debootstrap man-db zsh git golang-go"
fi
if [ "${1:-}" = --arm64 ]; then
	PACKAGES="$PACKAGES gcc-aarch64-linux-gnu crossbuild-essential-arm64
		libc6-dev:arm64 zlib1g-dev:arm64 libdw-dev:arm64 libelf-dev:arm64 liblzma-dev:arm64
		libbz2-dev:arm64 libzstd-dev:arm64 libbpf-dev:arm64 libssl-dev:arm64 ruby-dev:arm64
		qemu-system-arm qemu-efi-aarch64 qemu-user-static debootstrap e2fsprogs openssh-client"
	# Multiarch: dpkg must know the architecture before apt can see its
	# packages (dpkg-query below then finds them missing, once).
	if command -v dpkg >/dev/null 2>&1 && ! dpkg --print-foreign-architectures | grep -qx arm64; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "install-deps: run as root:  dpkg --add-architecture arm64" >&2
			exit 1
		fi
		dpkg --add-architecture arm64
	fi
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	# Not Debian-like: check the commands themselves and let the user install.
	missing=""
	for cmd in cc make ruby gcore timeout setpriv; do
		command -v "$cmd" >/dev/null 2>&1 || missing="$missing $cmd"
	done
	if [ -n "$missing" ]; then
		echo "install-deps: not a Debian system; please install:$missing (and zlib headers)" >&2
		exit 1
	fi
	exit 0
fi

missing=""
for pkg in $PACKAGES; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
	case "$status" in
	ii*) ;;
	*) missing="$missing $pkg" ;;
	esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing" >&2
	echo "install-deps: run as root:  apt-get update && apt-get install -y$missing" >&2
	exit 1
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# Wait for a dpkg lock held by another apt run instead of failing.
apt-get -o DPkg::Lock::Timeout=900 update -q </dev/null
apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing </dev/null
