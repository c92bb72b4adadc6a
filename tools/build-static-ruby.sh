#!/usr/bin/env bash
# build-static-ruby.sh - a Ruby 3.1.2 `ruby` executable with Ruby linked in
# statically (no libruby.so), for the tests of that build shape and of split
# debug info.  Built from the source tree that tools/layout/gen prepares
# (from a git mirror of Ruby; RUBY_GIT=... as for gen), in
# /var/cache/rbpeek-static/v3_1_2/ruby.  Idempotent: exits 0 at once when
# the binary exists.  Takes several minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/var/cache/rbpeek-static/v3_1_2
[ -x "$out/ruby" ] && exit 0
src=/var/cache/rbpeek-layout/v3_1_2
if [ ! -f "$src/Makefile" ]; then
	tools/layout/gen v3_1_2 >/dev/null   # extracts, configures (static libruby)
fi
grep -q '^ENABLE_SHARED = no' "$src/Makefile" || { echo "build-static-ruby.sh: $src is not a static build" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
rm -rf "$out.tmp"
cp -a "$src" "$out.tmp"
(cd "$out.tmp" && nice make -j"$(nproc)" ruby >build.log 2>&1) || {
	echo "build-static-ruby.sh: build failed, see $out.tmp/build.log" >&2
	exit 1
}
rm -rf "$out"
mv "$out.tmp" "$out"
