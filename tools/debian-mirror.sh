#!/bin/sh
# debian-mirror.sh - print the Debian archive this machine's apt uses (the
# first URI of a "deb" source that is not a security or updates archive),
# read from /etc/apt/sources.list, /etc/apt/sources.list.d/*.list and the
# deb822 /etc/apt/sources.list.d/*.sources.  The chroots (setup-rubies.sh)
# and the Debian source builds (build-debian-ruby.sh) fetch from it.
# RBPEEK_DEBIAN_MIRROR overrides it; exits 1 when none is found.
#
#   tools/debian-mirror.sh          print the mirror's URI
#   tools/debian-mirror.sh --keyring  print the Signed-By keyring of that
#                                   source (empty when it names none)
set -eu
etc=${RBPEEK_APT_ETC:-/etc/apt}

# "URI KEYRING" of every deb source, one a line, in apt's reading order.
sources() {
	for f in "$etc/sources.list" "$etc"/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [opts] URI suite comp...; the keyring is the signed-by= option
		awk '$1 == "deb" {
			key = "-"; i = 2
			if ($2 ~ /^\[/) {
				for (; i <= NF; i++) {
					if ($i ~ /signed-by=/) { key = $i; sub(/.*signed-by=/, "", key); sub(/\].*/, "", key) }
					if ($i ~ /\]$/) { i++; break }
				}
			}
			print $i, key
		}' "$f"
	done
	for f in "$etc"/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# stanzas separated by blank lines; Types must include deb
		awk 'function out() { if (types ~ /(^| )deb( |$)/ && uri != "" && enabled != "no") print uri, (key == "" ? "-" : key); types = uri = key = enabled = "" }
			/^[ \t]*$/ { out(); next }
			/^#/ { next }
			tolower($1) == "types:" { types = $0; sub(/^[^:]*:[ \t]*/, "", types) }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "signed-by:" { key = $2 }
			tolower($1) == "enabled:" { enabled = tolower($2) }
			END { out() }' "$f"
	done
}

if [ -n "${RBPEEK_DEBIAN_MIRROR:-}" ]; then
	line="$RBPEEK_DEBIAN_MIRROR -"
else
	line=$(sources | grep -Ev -- '-security|/security|-updates|-backports' | grep -E '^(https?|file)://' | head -n 1)
fi
[ -n "$line" ] || { echo "debian-mirror.sh: no Debian archive in $etc's sources" >&2; exit 1; }
uri=${line% *}
key=${line##* }
if [ "${1:-}" = --keyring ]; then
	[ "$key" = - ] || echo "$key"
else
	echo "${uri%/}"
fi
