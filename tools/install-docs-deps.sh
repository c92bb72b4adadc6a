#!/bin/sh
# tools/install-docs-deps.sh - what `make docs` needs: Debian's mkdocs (its
# built-in "mkdocs" theme ships every script, style sheet and font it uses,
# so the site works offline from file://).  Idempotent and quick when
# mkdocs is there (make docs runs it every time); as root it installs the
# package, as another user it prints the command and fails.
# Exit 0 when mkdocs is ready, 1 when it is not (the docs test then skips
# with the reason printed here).
set -eu

command -v mkdocs >/dev/null 2>&1 && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-docs-deps: not a Debian system; please install mkdocs (1.4 or newer)" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-docs-deps: mkdocs is missing; run as root:  apt-get install -y mkdocs" >&2
	exit 1
fi
echo "install-docs-deps: installing mkdocs" >&2
export DEBIAN_FRONTEND=noninteractive
# Wait for a dpkg lock held by another apt run instead of failing.
apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null >&2 ||
	echo "install-docs-deps: apt-get update failed; trying the install anyway" >&2
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends mkdocs </dev/null >&2 || {
	echo "install-docs-deps: apt-get install mkdocs failed" >&2
	exit 1
}
command -v mkdocs >/dev/null 2>&1
