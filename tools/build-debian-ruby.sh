#!/usr/bin/env bash
# build-debian-ruby.sh - Rubies built from a Debian SOURCE package, for the
# tests that need a build shape no Debian binary package has.  The source is
# ruby3.3 of trixie (`apt-get source` with a deb-src line for the machine's
# own Debian mirror, read from its apt sources by tools/debian-mirror.sh,
# through a private apt state: the machine's apt configuration is not
# touched).  Built on the host (its gcc, its glibc; baseruby: the host's
# ruby), so the binaries run directly, and in a chroot too (glibc newer).
#
#   tools/build-debian-ruby.sh [VARIANT...]   build the missing ones (default: all)
#   tools/build-debian-ruby.sh --list         print "VARIANT DIR" for ready ones
#   tools/build-debian-ruby.sh --deps         only install the build dependencies
#                                             (apt; the build itself then uses none
#                                             of the machine's apt state)
#
# Variants, each in $RBPEEK_DEBSRC/<variant>/ (default /var/cache/rbpeek/debsrc),
# a READY file marking a finished one (an interrupted build is redone):
#   yjit      Ruby 3.3 configured --disable-shared --enable-yjit (Rust YJIT,
#             rustc from Debian's package), with Ruby's default -ggdb3 and
#             not stripped: `ruby` links Ruby statically (no libruby.so) and
#             carries full DWARF.  Installed in yjit/prefix (bin/ruby, its
#             library).  The static and split-debug-info tests, the DWARF
#             layout tests and the YJIT test use it.
#   bpcheck   miniruby of Ruby 3.3 built with -DVM_DEBUG_BP_CHECK=1 (every
#             control frame one word longer than the 3.3 table says):
#             bpcheck/miniruby (with DWARF) and bpcheck/miniruby.stripped.
#             Made from the yjit variant's tree when that is built (so
#             build yjit first, as the default order does).
#   mut-vmractor, mut-gcobjspace, mut-ecfp, mut-iseqbody
#             "future Rubies": miniruby of Ruby 3.3 with its structs edited the
#             way Ruby's development line edits them (the edits are made by
#             mutate() below on a copy of the unpacked source; no Ruby code is
#             kept in this repository), built like bpcheck (from the yjit
#             variant's configured tree, compiled -O0 -ggdb3 to keep the added
#             build time small): <variant>/miniruby (DWARF) and
#             <variant>/miniruby.stripped.
#               mut-vmractor    a field inserted in rb_vm_struct.ractor before
#                               main_thread
#               mut-gcobjspace  rb_vm_struct.objspace removed; the VM keeps a
#                               gc.global_objspace at its end (as the
#                               development line, where each Ractor owns its
#                               objspace, keeps one), every field after the
#                               old one a word lower
#               mut-ecfp        a field inserted in rb_execution_context_t
#                               before cfp, and one in rb_control_frame_t
#                               after block_code
#               mut-iseqbody    rb_iseq_constant_body reordered: iseq_encoded
#                               moved from the top to the end
#
# Each variant's log is $RBPEEK_DEBSRC/<variant>.log; its build time (s) is
# written to <variant>/BUILD_SECONDS.  Measured on 2 shared cores: see
# .ci/run.  Needs root (apt-get install of the build dependencies).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${RBPEEK_DEBSRC:-/var/cache/rbpeek/debsrc}
suite=trixie
package=ruby3.3
all=(yjit bpcheck mut-vmractor mut-gcobjspace mut-ecfp mut-iseqbody)

if [ "${1:-}" = --list ]; then
	for v in "${all[@]}"; do
		[ -f "$root/$v/READY" ] && echo "$v $root/$v"
	done
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "build-debian-ruby.sh: needs root (apt-get)" >&2; exit 1; }

# Debian's own toolchain only: never a rustup rustc from the PATH.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export RUSTC=/usr/bin/rustc

# autoconf: Debian's patches touch configure.ac, so Ruby's Makefile remakes configure
deps="build-essential dpkg-dev autoconf rustc ruby libyaml-dev libffi-dev libssl-dev zlib1g-dev libgmp-dev"
install_deps() {
	local have
	# shellcheck disable=SC2086
	# each name once: a package installed for two architectures (zlib1g-dev
	# and libssl-dev also for arm64, tools/install-deps.sh --arm64) is listed
	# twice, and counting lines took that for a missing one (rustc) found
	have=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $deps 2>/dev/null | awk '$1 == "ii" { print $2 }' | sort -u | wc -l)
	[ "$have" = "$(echo $deps | wc -w)" ] && return 0
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq $deps
}

# The unpacked, patched source of $package in $root/src (shared by the
# variants, which build out of tree); SOURCE_READY marks it.
fetch_source() {
	local src=$root/src
	[ -f "$src/SOURCE_READY" ] && return 0
	local mirror key apt tmp
	mirror=$("$here/debian-mirror.sh")
	key=$("$here/debian-mirror.sh" --keyring)
	tmp=$(mktemp -d)
	mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
	echo "deb-src ${key:+[signed-by=$key] }$mirror $suite main" >"$tmp/sources.list"
	apt=(apt-get -o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o Acquire::Check-Valid-Until=false)
	"${apt[@]}" update
	rm -rf "$src"
	mkdir -p "$src"
	(cd "$src" && "${apt[@]}" source "$package")
	rm -rf "$tmp"
	local tree
	tree=$(find "$src" -mindepth 1 -maxdepth 1 -type d -name "$package-*" | head -n 1)
	[ -x "$tree/configure" ] || { echo "no configure in $tree"; return 1; }
	ln -sfn "$(basename "$tree")" "$src/tree"
	touch "$src/SOURCE_READY"
}

build_yjit() {
	local dir=$1
	mkdir -p "$dir/build"
	cd "$dir/build"
	"$root/src/tree/configure" --prefix="$dir/prefix" --disable-shared --enable-yjit \
		--disable-install-doc --with-baseruby=/usr/bin/ruby
	grep -q '^YJIT_SUPPORT=yes' Makefile || { echo "configure did not enable YJIT"; return 1; }
	nice make -j"$(nproc)"
	make install
	"$dir/prefix/bin/ruby" --yjit -e 'exit RubyVM::YJIT.enabled? ? 0 : 1'
	# no libruby.so: the executable holds Ruby
	! ldd "$dir/prefix/bin/ruby" | grep -q libruby
	readelf -S "$dir/prefix/bin/ruby" | grep -q debug_info
}

# miniruby only (enough to run a script; the whole build would double the
# time): from a copy of the yjit variant's configured tree when there is one
# (its generated sources reused, every object rebuilt with the flag), else
# configured afresh.
build_bpcheck() {
	local dir=$1 flag=-DVM_DEBUG_BP_CHECK=1
	if [ -f "$root/yjit/READY" ] && [ -f "$root/yjit/build/Makefile" ]; then
		cp -a "$root/yjit/build" "$dir/build"
		cd "$dir/build"
		find . -name '*.o' -not -path './ext/*' -delete
		rm -f miniruby ruby
	else
		mkdir -p "$dir/build"
		cd "$dir/build"
		"$root/src/tree/configure" --disable-shared --disable-install-doc \
			--with-baseruby=/usr/bin/ruby
	fi
	# -O0, as the mutation variants: the layout does not depend on it
	nice make -j"$(nproc)" cppflags="$flag" optflags=-O0 miniruby
	cp miniruby "$dir/miniruby"
	strip -o "$dir/miniruby.stripped" "$dir/miniruby"
	"$dir/miniruby" -e 'exit 1 unless RUBY_VERSION.start_with?("3.3")'
	# the flag is in: VM_DEBUG_BP_CHECK's bp_check field is in the DWARF
	{ readelf --debug-dump=info "$dir/miniruby"; true; } | grep -q 'DW_AT_name.*: bp_check'
	rm -rf "$dir/build"
}

# Insert line text before (where=before) or after the one line of file
# matching the extended regex re; fails unless exactly one line matches.
insert_line() {
	local file=$1 re=$2 where=$3 text=$4 n
	n=$(grep -cE -- "$re" "$file" || true)
	[ "$n" = 1 ] || { echo "mutate: $n lines of $file match '$re' (want 1)"; return 1; }
	awk -v re="$re" -v where="$where" -v text="$text" '
		$0 ~ re && where == "before" { print text }
		{ print }
		$0 ~ re && where == "after" { print text }' "$file" >"$file.new"
	mv "$file.new" "$file"
}

# Edit the source copy src the way variant v says (see the top).
mutate() {
	local v=$1 src=$2 f
	f=$src/vm_core.h
	case $v in
	mut-vmractor)
		insert_line "$f" '^ +struct rb_thread_struct \*main_thread;' before \
			'        void *rbpeek_mutation_before_main_thread;'
		;;
	mut-gcobjspace)
		grep -qE '^ +struct rb_objspace \*objspace;$' "$f" || { echo "mutate: no objspace field"; return 1; }
		sed -i -E '/^ +struct rb_objspace \*objspace;$/d' "$f"
		insert_line "$f" '^} rb_vm_t;' before '    struct { struct rb_objspace *global_objspace; } gc;'
		# its users: vm.c, gc.c (rb_objspace_of), eval.c
		sed -i -E 's/(\bvm\)?|unless_objspace_vm|rb_ec_vm_ptr\(ec\))->objspace\b/\1->gc.global_objspace/g' \
			"$src/vm.c" "$src/gc.c" "$src/eval.c"
		! grep -nE '(\bvm\)?|unless_objspace_vm|rb_ec_vm_ptr\(ec\))->objspace\b' \
			"$src/vm.c" "$src/gc.c" "$src/eval.c"
		;;
	mut-ecfp)
		insert_line "$f" '^    rb_control_frame_t \*cfp;' before '    VALUE *rbpeek_mutation_before_cfp;'
		insert_line "$f" '^ +const void \*block_code; +// cfp\[5\]' after \
			'    VALUE rbpeek_mutation_in_cfp;'
		;;
	mut-iseqbody)
		grep -qE '^    VALUE \*iseq_encoded;' "$f" || { echo "mutate: no iseq_encoded"; return 1; }
		awk '
			/^struct rb_iseq_constant_body \{/ { body = 1 }
			body && /^    VALUE \*iseq_encoded;/ { next }
			body && /^\};/ { print "    VALUE *iseq_encoded; /* moved: rbpeek mutation */"; body = 0 }
			{ print }' "$f" >"$f.new"
		mv "$f.new" "$f"
		[ "$(grep -c 'iseq_encoded;' "$f")" = 1 ]
		;;
	*) echo "mutate: unknown $v"; return 1;;
	esac
}

# A mutation variant: miniruby from an edited copy of the source, built in a copy of the yjit
# variant's configured tree (its generated files reused, every object
# rebuilt), as bpcheck is.
build_mutation() {
	local v=$1 dir=$2 tree
	[ -f "$root/yjit/READY" ] && [ -f "$root/yjit/build/Makefile" ] ||
		{ echo "$v: build the yjit variant first"; return 1; }
	tree=$(readlink -f "$root/src/tree")
	cp -a "$tree" "$dir/src"   # a real copy: the build may write into its srcdir
	mutate "$v" "$dir/src"
	cp -a "$root/yjit/build" "$dir/build"
	cd "$dir/build"
	find . -name '*.o' -not -path './ext/*' -delete
	rm -f miniruby ruby
	# the copy's Makefiles name the shared tree: point them at the edited one
	grep -rlF --include=Makefile --include='*.mk' "$root/src/tree" . |
		xargs -r sed -i "s|$root/src/tree|$dir/src|g; s|$tree|$dir/src|g"
	grep -rlF --include=Makefile --include='*.mk' "$tree" . |
		xargs -r sed -i "s|$tree|$dir/src|g"
	# -O0: the structs' layout does not depend on it, and it compiles in a
	# fraction of -O3's time (the DWARF keeps Ruby's -ggdb3)
	nice make -j"$(nproc)" optflags=-O0 miniruby
	cp miniruby "$dir/miniruby"
	strip -o "$dir/miniruby.stripped" "$dir/miniruby"
	"$dir/miniruby" -e 'exit 1 unless RUBY_VERSION.start_with?("3.3"); GC.start; 3.times.map { |i| i.to_s * 3 }'
	{ readelf --debug-dump=info "$dir/miniruby"; true; } | grep -q 'DW_AT_name.*: rbpeek_mutation\|global_objspace\|iseq_encoded'
	rm -rf "$dir/build" "$dir/src"
}

one() {
	local v=$1 dir=$root/$1 t0
	[ -f "$dir/READY" ] && return 0
	case $v in yjit|bpcheck|mut-*) ;; *) echo "build-debian-ruby.sh: unknown variant $v" >&2; return 1;; esac
	echo "build-debian-ruby.sh: building $v in $dir (log: $root/$v.log)" >&2
	rm -rf "$dir"
	mkdir -p "$dir"
	t0=$(date +%s)
	case $v in
	mut-*) (build_mutation "$v" "$dir") >"$root/$v.log" 2>&1 || return 1;;
	*) ("build_$v" "$dir") >"$root/$v.log" 2>&1 || return 1;;
	esac
	echo $(($(date +%s) - t0)) >"$dir/BUILD_SECONDS"
	touch "$dir/READY"
	echo "build-debian-ruby.sh: $v ready in $dir ($(cat "$dir/BUILD_SECONDS") s)" >&2
}

mkdir -p "$root"
exec 9>"$root/.lock"
flock -w 3600 9 || { echo "build-debian-ruby.sh: $root/.lock still held after 60 min" >&2; exit 1; }
install_deps >"$root/deps.log" 2>&1 || { echo "build-debian-ruby.sh: installing $deps failed, see $root/deps.log" >&2; exit 1; }
[ "${1:-}" = --deps ] && exit 0
t0=$(date +%s)
fetch_source >"$root/src.log" 2>&1 || { echo "build-debian-ruby.sh: apt-get source $package failed, see $root/src.log" >&2; exit 1; }
echo "build-debian-ruby.sh: source ready ($(($(date +%s) - t0)) s)" >&2
status=0
for v in "${@:-${all[@]}}"; do
	one "$v" || { echo "build-debian-ruby.sh: $v failed, see $root/$v.log" >&2; status=1; }
done
exit $status
