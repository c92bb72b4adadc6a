#!/usr/bin/env bash
# 10-site.sh - the documentation site (docs/, mkdocs.yml) built and read the
# way a user does:
#   build        `make docs` (Debian's mkdocs, installed by
#                tools/install-docs-deps.sh; --strict) builds the site, here
#                into a scratch BUILD directory
#   strict       `mkdocs build --strict` fails on a page that links to a page
#                that does not exist (the gate make docs relies on)
#   commands     every command `rbpeek --help` lists has its page
#                docs/commands/NAME.md, and every long option its
#                `rbpeek NAME --help` lists appears on that page
#   readme       every docs/ link in README.md names an existing page
#   exit-codes   docs/troubleshooting.md's table lists each exit code once,
#                exactly 0 and the EXIT_* values of src/cli/cli.h
#   checker/...  tests/browser/docs.mjs finds the broken link, the missing
#                anchor and the asset from another host planted in a small
#                bad site (so a pass below means something)
#   site/...     tests/browser/docs.mjs: headless Chromium opens every page
#                of the site from file://: no JS or console error, no failed
#                request, no asset from another host, every internal link and
#                #anchor resolves, every page reachable from index.html
# Skipped with the reason when mkdocs or Chromium cannot be installed.
# Prints "ok NAME" / "FAIL NAME: reason" / "skip NAME: reason"; exit 1 on a FAIL.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
RBPEEK=${RBPEEK_BIN:-$BUILD/rbpeek}
failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/rbpeek-docs.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

ok() { echo "ok docs/$1${2:+: $2}"; }
fail() { echo "FAIL docs/$1: $2"; failed=1; }
skip() { echo "skip docs/$1: $2"; }

build_site() {
	local out start=$EPOCHREALTIME
	if ! out=$(make --no-print-directory docs BUILD="$work/build" 2>&1); then
		fail build "make docs failed: $(tail -n 5 <<<"$out" | tr '\n' ' ')"
		return 1
	fi
	if [[ ! -f $work/build/site/index.html ]]; then
		fail build "make docs wrote no $work/build/site/index.html"
		return 1
	fi
	ok build "$(find "$work/build/site" -name '*.html' | wc -l) pages in $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
}

# A copy of the docs with one link to a page that does not exist.
check_strict() {
	local out
	mkdir -p "$work/strict"
	cp -r docs mkdocs.yml "$work/strict/"
	printf '\nSee [nowhere](no-such-page.md).\n' >>"$work/strict/docs/install.md"
	if out=$(cd "$work/strict" && mkdocs build --strict --site-dir "$work/strict/site" 2>&1); then
		fail strict "mkdocs build --strict accepted a link to a missing page"
	elif grep -q 'no-such-page.md' <<<"$out"; then
		ok strict
	else
		fail strict "mkdocs build --strict failed for another reason: $(head -n 3 <<<"$out" | tr '\n' ' ')"
	fi
}

check_commands() {
	local cmd opt page missing=""
	if [[ ! -x $RBPEEK ]]; then
		skip commands "$RBPEEK not built (run make)"
		return
	fi
	for cmd in $("$RBPEEK" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
		page=docs/commands/$cmd.md
		if [[ ! -f $page ]]; then
			missing+=" $page"
			continue
		fi
		for opt in $("$RBPEEK" "$cmd" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
			grep -qe "$opt" "$page" || missing+=" $cmd:$opt"
		done
	done
	if [[ -n $missing ]]; then fail commands "not documented:$missing"; else ok commands; fi
}

check_readme() {
	local link missing=""
	for link in $(grep -oE '\]\(docs/[^)#]+' README.md | sed 's/^](//' | sort -u); do
		[[ -f $link ]] || missing+=" $link"
	done
	if ! grep -q '](docs/' README.md; then
		fail readme "README.md links to no docs page"
	elif [[ -n $missing ]]; then
		fail readme "README.md links to missing pages:$missing"
	else
		ok readme
	fi
}

check_exit_codes() {
	local table want
	table=$(grep -oE '^\| *[0-9]+ *\|' docs/troubleshooting.md | tr -dc '0-9\n' | sort -n | tr '\n' ' ')
	want=$( (echo 0; grep -oE 'EXIT_[A-Z]+ *= *[0-9]+' src/cli/cli.h | grep -oE '[0-9]+$') | sort -n | tr '\n' ' ')
	if [[ -z $table ]]; then
		fail exit-codes "no exit-code table in docs/troubleshooting.md"
	elif [[ $table != "$want" ]]; then
		fail exit-codes "docs/troubleshooting.md lists codes '$table', src/cli/cli.h has '$want'"
	else
		ok exit-codes "${want% }"
	fi
}

# A two-page site with three planted faults; the checker must name each.
check_checker() {
	local bad=$work/bad out
	mkdir -p "$bad"
	cat >"$bad/index.html" <<-'EOF'
	<!DOCTYPE html><html><head><title>bad</title>
	<link rel="stylesheet" href="http://fonts.example.invalid/font.css"></head>
	<body><h1 id="top">bad</h1><a href="other.html">other</a>
	<a href="missing.html">missing</a><a href="other.html#nowhere">anchor</a></body></html>
	EOF
	cat >"$bad/other.html" <<-'EOF'
	<!DOCTYPE html><html><head><title>other</title></head>
	<body><h1 id="here">other</h1><a href="index.html#top">back</a></body></html>
	EOF
	out=$(timeout 120 node tests/browser/docs.mjs "$bad" --name bad 2>&1)
	local want
	for want in 'FAIL bad/assets/index.html: .*fonts.example.invalid' \
		'FAIL bad/links/index.html: .*missing.html \(no such file\)' \
		'FAIL bad/links/index.html: .*other.html#nowhere \(no #nowhere' \
		'ok bad/links/other.html'; do
		if ! grep -qE "$want" <<<"$out"; then
			fail checker "docs.mjs on a bad site: no line matching '$want' in: $(tr '\n' ' ' <<<"$out" | head -c 600)"
			return 1
		fi
	done
	ok checker "finds a foreign asset, a missing page and a missing anchor"
}

check_site() {
	local out rc
	out=$(timeout 300 node tests/browser/docs.mjs "$work/build/site" --name docs/site 2>&1)
	rc=$?
	grep -E '^(ok|FAIL|skip) ' <<<"$out"
	grep -q '^FAIL ' <<<"$out" && failed=1
	if ((rc != 0)) && ! grep -q '^FAIL ' <<<"$out"; then
		fail site "node exited $rc: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
	fi
}

main() {
	local why
	check_readme
	check_exit_codes
	check_commands
	if ! why=$(timeout 900 tools/install-docs-deps.sh 2>&1); then
		skip build "${why:-tools/install-docs-deps.sh failed}"
		return
	fi
	check_strict
	build_site || return
	if ! why=$(tools/install-browser-deps.sh --check 2>&1); then
		skip site "${why:-tools/install-browser-deps.sh failed}"
		return
	fi
	check_checker && check_site
}

main
exit $failed
