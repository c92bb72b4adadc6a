#!/usr/bin/env bash
# bench/dwarf_layout.sh [PREFIX|BIN...] - what reading the layout from a
# Ruby's DWARF costs at attach: `rbpeek inspect --layout dwarf` against
# `--layout table` on the same sleeping target, alternately, five times
# each, fastest shown (the machine may be noisy: read the ratio), plus the
# DWARF reader's own time and the compile units it visited as inspect
# reports them, and the size of the file's .debug_info.  Rubies: the
# arguments (a prefix such as /opt/rubies/3.3.8, or a bin/ruby), else every
# /opt/rubies/*.  A Ruby without DWARF is listed and skipped.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
REPS=${REPS:-5}
work=$(mktemp -d)
trap '[ -n "${pid:-}" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT

if [ $# -eq 0 ]; then set -- /opt/rubies/*; fi

# wall-clock seconds of one command (bash's own clock: no fork of time(1))
secs() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" > /dev/null 2>&1
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

fastest() { sort -g | head -1; }

printf '%-10s %-8s %10s %10s %10s %7s %10s %6s\n' ruby debuginfo table_ms dwarf_ms reader_ms ratio units fields
for r in "$@"; do
	[ -d "$r" ] && r=$r/bin/ruby
	[ -x "$r" ] || { echo "$r: not an executable"; continue; }
	read -r ver file < <("$r" -e 'c = RbConfig::CONFIG; print RUBY_VERSION, " ",
		(c["ENABLE_SHARED"] == "yes" ? File.join(c["libdir"], c["LIBRUBY_SO"]) : RbConfig.ruby)')
	dbg=$(readelf -S -W "$file" 2>/dev/null | awk '$2 == ".debug_info" { print strtonum("0x" $6) }')
	if [ -z "$dbg" ]; then echo "$ver: $file has no DWARF"; continue; fi
	"$r" -e 'STDOUT.puts "ready"; STDOUT.flush; sleep' > "$work/out" &
	pid=$!
	for _ in $(seq 200); do grep -q ready "$work/out" 2>/dev/null && break; sleep 0.05; done
	: > "$work/t"; : > "$work/d"
	for _ in $(seq "$REPS"); do
		secs "$RBPEEK" inspect --pid "$pid" --layout table >> "$work/t"
		secs "$RBPEEK" inspect --pid "$pid" --layout dwarf >> "$work/d"
	done
	line=$("$RBPEEK" inspect --pid "$pid" --layout dwarf --fields)
	kill -KILL "$pid"; wait "$pid" 2>/dev/null; pid=
	t=$(fastest < "$work/t"); d=$(fastest < "$work/d")
	reader=$(echo "$line" | sed -n 's/^layout: .* compile units read in \([0-9.]*\) ms.*/\1/p')
	units=$(echo "$line" | sed -n 's/^layout: .*; \([0-9]*\) compile units.*/\1/p')
	fromdw=$(echo "$line" | sed -n '/^fields:/,$p' | grep -vc -e '(table)' -e '^fields:')
	printf '%-10s %-8s %10.1f %10.1f %10s %7.2f %10s %6s\n' "$ver" "$((dbg >> 20))MiB" \
		"$(echo "$t * 1000" | bc -l)" "$(echo "$d * 1000" | bc -l)" "$reader" \
		"$(echo "$d / $t" | bc -l)" "$units" "$fromdw"
done
