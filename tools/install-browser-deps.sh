#!/usr/bin/env bash
# install-browser-deps.sh - what the browser-driven format tests need:
# Debian's chromium, Node's playwright-core (driving that chromium, never
# downloading a browser of its own) and the speedscope app, installed into
# tests/browser/node_modules.  Idempotent; quick when everything is there.
# Exit 0 when ready, 1 when something could not be installed (callers then
# skip the browser tests with the reason printed here).
#
#   tools/install-browser-deps.sh --check   install nothing: exit 0 when all
#                                           is there, else 1 with what is
#                                           missing (what the tests call:
#                                           set-up happens before them)
set -u
cd "$(dirname "$0")/.."

if [ "${1:-}" = --check ]; then
	miss=()
	command -v chromium >/dev/null 2>&1 || miss+=(chromium)
	command -v node >/dev/null 2>&1 || miss+=(node)
	[ -f tests/browser/node_modules/playwright-core/package.json ] || miss+=(playwright-core)
	[ -f tests/browser/node_modules/speedscope/package.json ] || miss+=(speedscope)
	[ ${#miss[@]} = 0 ] && exit 0
	echo "browser tools not set up: no ${miss[*]} (make test's set-up installs them: tools/install-browser-deps.sh)" >&2
	exit 1
fi

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "browser tests need: ${need[*]} (run: sudo apt-get install -y ${need[*]})" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null 2>&1
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need[@]}" >/dev/null 2>&1 || {
		echo "could not install ${need[*]} with apt-get" >&2
		exit 1
	}
fi
if [ ! -f tests/browser/node_modules/playwright-core/package.json ] ||
   [ ! -f tests/browser/node_modules/speedscope/package.json ]; then
	(cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund \
		--loglevel=error >/dev/null 2>&1) || {
		echo "could not install playwright-core and speedscope with npm" >&2
		exit 1
	}
fi
exit 0
