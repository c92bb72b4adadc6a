#!/usr/bin/env bash
# tools/setup-clean-chroot.sh [SUITE] - a clean Debian system to install
# rbpeek's packages into (tests/e2e/99-deb.rb): debootstrap --variant=minbase
# of SUITE (default bookworm) plus its package lists, nothing else.  Cached
# in $RBPEEK_CLEAN_CHROOTS (default /var/cache/rbpeek/clean)/SUITE, which a
# file READY marks complete; idempotent, and quick when it is there.  Prints
# the directory.  Tests never change it: they mount an overlay on it (see
# 99-deb.rb), so every run starts from the same pristine system.
#
# The Debian mirror is the machine's own, read from its apt sources
# (/etc/apt/sources.list.d/*.sources or /etc/apt/sources.list): the first
# URI that serves the host's release (not -security or -updates).
set -euo pipefail

suite=${1:-bookworm}
root=${RBPEEK_CLEAN_CHROOTS:-/var/cache/rbpeek/clean}
dir=$root/$suite

[ -f "$dir/READY" ] && { echo "$dir"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "setup-clean-chroot.sh: needs root (debootstrap)" >&2; exit 1; }

# The mirror: URIs of a deb822 stanza or a one-line "deb URI SUITE ..."
# entry whose suites include the host's codename.
host_mirror() {
	local codename
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	{
		for f in /etc/apt/sources.list.d/*.sources; do
			[ -f "$f" ] || continue
			awk -v c="$codename" '
			function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " c " ") && uris != "") { split(uris, u, " "); print u[1] }
				types = suites = uris = "" }
			/^[ \t]*$/ { flush(); next }
			/^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
			/^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
			/^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
			END { flush() }' "$f"
		done
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -f "$f" ] || continue
			sed -E 's/\[[^]]*\]//' "$f" | awk -v c="$codename" '$1 == "deb" && $3 == c { print $2 }'
		done
	} | head -n 1
}

mirror=$(host_mirror)
[ -n "$mirror" ] || { echo "setup-clean-chroot.sh: no Debian mirror for this release in /etc/apt/sources*" >&2; exit 1; }
command -v debootstrap >/dev/null || {
	echo "setup-clean-chroot.sh: debootstrap missing (tools/install-deps.sh --packaging)" >&2
	exit 1
}

mkdir -p "$root"
exec 9>"$root/.lock.$suite"   # one maker at a time; the others wait and reuse it
flock -w 900 9 || { echo "setup-clean-chroot.sh: $root/.lock.$suite held for 15 min" >&2; exit 1; }
[ -f "$dir/READY" ] && { echo "$dir"; exit 0; }

# Unmount what an interrupted run left mounted under the directory.
awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
	while read -r m; do umount -l "$m" || true; done
rm -rf "$dir"
echo "setup-clean-chroot.sh: making a minbase $suite chroot in $dir from $mirror" >&2
debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$root/$suite.log" 2>&1 ||
	{ echo "setup-clean-chroot.sh: debootstrap failed, see $root/$suite.log" >&2; exit 1; }
chroot "$dir" apt-get -q update >>"$root/$suite.log" 2>&1
touch "$dir/READY"
echo "$dir"
