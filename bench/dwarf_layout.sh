#!/usr/bin/env bash
# bench/dwarf_layout.sh [PREFIX|BIN...] - what reading the layout from a
# Ruby's DWARF costs at attach: rbpeek's CPU time (user + system) for
# `rbpeek inspect --layout dwarf` against `--layout table` on the same
# sleeping target, ten runs in a row, alternately, five times each, lowest
# shown (read the ratio), plus the DWARF reader's own wall time and the compile units it
# visited as inspect reports them, the size of the file's .debug_info
# (compressed when Ruby's build compressed it) and the fields that came
# from the DWARF.  Rubies: the
# arguments (a prefix such as /opt/rubies/3.3.8, or a bin/ruby), else every
# /opt/rubies/*.  A Ruby without DWARF is listed and skipped.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
REPS=${REPS:-5}
work=$(mktemp -d)
trap '[ -n "${pid:-}" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT

if [ $# -eq 0 ]; then set -- /opt/rubies/*; fi

# CPU seconds (user + system) of one run of a command, from ten runs in a
# row (time(1) counts in hundredths): steadier than the wall clock on a busy
# machine
secs() {
	/usr/bin/time -f '%U %S' -o "$work/time" sh -c \
		'for i in 1 2 3 4 5 6 7 8 9 10; do "$@" > /dev/null 2>&1; done' sh "$@"
	awk '{ print ($1 + $2) / 10 }' "$work/time"
}

fastest() { sort -g | head -1; }

printf '%-10s %-8s %12s %12s %10s %7s %6s %6s\n' ruby debuginfo table_cpu_ms dwarf_cpu_ms reader_ms ratio units fields
for r in "$@"; do
	[ -d "$r" ] && r=$r/bin/ruby
	[ -x "$r" ] || { echo "$r: not an executable"; continue; }
	read -r ver file < <("$r" -e 'lib = File.read("/proc/self/maps")[%r{/\S*/libruby[^/\s]*\.so\S*}]
		print RUBY_VERSION, " ", lib || File.readlink("/proc/self/exe")')
	hex=$(readelf -S -W "$file" 2>/dev/null | awk '$2 == ".debug_info" { print $6 }')
	if [ -z "$hex" ]; then echo "$ver: $file has no DWARF"; continue; fi
	dbg=$((16#$hex))   # bytes in the file (compressed when the flags say C)
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
	printf '%-10s %-8s %12.1f %12.1f %10s %7.1f %6s %6s\n' "$ver" "$((dbg >> 20))MiB" \
		"$(echo "$t * 1000" | bc -l)" "$(echo "$d * 1000" | bc -l)" "$reader" \
		"$(echo "$d / $t" | bc -l)" "$units" "$fromdw"
done
