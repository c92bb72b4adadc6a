# rbpeek - plain Make.  `make` builds build/rbpeek; `make test` runs every test.
#
#   make            build the CLI (build/rbpeek)
#   make test       install test dependencies if missing, build, run all tests
#   make example    install dependencies if missing, profile examples/ and say where the result is
#   make asan       the test suite built with -fsanitize=address,undefined (in build-asan/)
#   make ext        the tracer extension for $(RUBY) (build/ext/, also part of `make`)
#   make valgrind   the end-to-end tests with every rbpeek run under valgrind
#   make fuzz       run every libFuzzer target for FUZZ_TIME seconds (default 600)
#                   on its seeds (make test runs each for FUZZ_SECONDS, 20)
#   make docs       the documentation site (docs/, mkdocs.yml) into build/site;
#                   open build/site/index.html, no server needed
#   make install    the binary, man page, completions, tracer, the agent's
#                   systemd unit and config file into PREFIX
#                   (default /usr/local; DESTDIR for staging); make uninstall
#   make dist       build/rbpeek-VERSION.tar.gz, a source tarball of HEAD
#   make static     one fully static binary (build-static/rbpeek) from Debian's
#                   static archives (libdw.a, libelf.a, libz.a, ...)
#   make BPF=0      build without eBPF (libbpf, clang, bpftool): alloc sites
#                   are approximate, --sampler=bpf falls back to ptrace
#   make NATIVE=0   build without elfutils (libdw/libelf): --native says it is
#                   not available (the gem does this when libdw-dev is missing)
#   make GRAPHVIZ=0 build without Graphviz (libgvc): -f callgraph writes DOT
#                   text (the default when pkg-config finds no libgvc)
#   make ARCH=arm64 rbpeek for arm64 (aarch64) Linux in build-arm64/, cross
#                   compiled on another machine (aarch64-linux-gnu-gcc and
#                   Debian's arm64 -dev packages: tools/install-deps.sh --arm64);
#                   make static ARCH=arm64: build-arm64-static/rbpeek
#   make clean

VERSION   := 0.1.0
# The commit rbpeek is built from, for --version: the COMMIT file that
# `make dist` puts in a source tarball, else git's HEAD (with "-dirty" when
# the tree has changes) when this directory is a git checkout of its own,
# else "unknown".
COMMIT    := $(shell cat COMMIT 2>/dev/null || \
	{ cdup=$$(git rev-parse --show-cdup 2>/dev/null) && [ -z "$$cdup" ] && \
	  c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
	  { git diff-index --quiet HEAD -- 2>/dev/null && echo $$c || echo $$c-dirty; }; } || \
	echo unknown)
# ARCH=arm64: build for arm64 Linux into build-arm64/ (build-arm64-static/
# for make static).  On a machine that is not aarch64 it cross-compiles with
# Debian's aarch64-linux-gnu- toolchain, against the arm64 libraries that
# multiarch installs in /usr/lib/aarch64-linux-gnu (pkg-config reads their
# .pc files there); on an arm64 machine plain `make` builds for arm64 too.
# The architecture-specific code is src/proc/arch*.{h,c} (see there).
ARCH      ?=
ifeq ($(ARCH),arm64)
ifneq ($(shell uname -m),aarch64)
CROSS     ?= aarch64-linux-gnu-
endif
# (a BUILD from the environment -- tests/run exports one -- is another
# architecture's: only a BUILD given on the command line is used)
ifneq ($(origin BUILD),command line)
BUILD     := build-arm64
endif
STATIC_BUILD ?= build-arm64-static
MULTIARCH := aarch64-linux-gnu
BPF_ARCH  := arm64
else ifneq ($(ARCH),)
$(error ARCH=$(ARCH): rbpeek builds for the machine's own architecture or ARCH=arm64)
endif
ifneq ($(CROSS),)
ifeq ($(origin CC),default)
CC        := $(CROSS)gcc
endif
AR        := $(CROSS)ar
PKG_CONFIG ?= PKG_CONFIG_LIBDIR=/usr/lib/$(MULTIARCH)/pkgconfig:/usr/share/pkgconfig pkg-config
# the completions come from the binary's --help: run it under qemu-user
RUN_TARGET ?= qemu-aarch64-static -L /usr/$(MULTIARCH)
endif
PKG_CONFIG ?= pkg-config
BUILD     ?= build
CC        ?= cc
CFLAGS    ?= -O2 -g
# WERROR= (what the gem's build does) keeps warnings from stopping a build
# with a newer compiler on a user's machine.
WERROR    ?= -Werror
WARN      := -std=c11 -Wall -Wextra $(WERROR) -Wshadow -Wno-unused-parameter
CPPFLAGS  += -D_GNU_SOURCE -Isrc -DRBP_VERSION='"$(VERSION)"'
# libdw/libelf (elfutils) only for --native (src/proc/native.c): --as-needed
# keeps them out of binaries that do not use it (unit tests, benches).
# NATIVE=0 builds src/proc/native_none.c and dwarf_none.c instead (no
# --native, layouts from the tables only), and needs no elfutils.
NATIVE    ?= 1
LDLIBS    += -lz $(if $(filter 0,$(NATIVE)),,-Wl,--as-needed -ldw -lelf -Wl,--no-as-needed)
# The eBPF programs (src/bpf/*.bpf.c) are compiled by clang -target bpf and
# embedded as libbpf skeletons (bpftool gen skeleton) generated into
# $(BUILD)/gen; libbpf (libbpf-dev) loads them.  BPF=0 builds
# src/proc/framecap_none.c and oncpu_none.c instead (no eBPF: alloc sites
# are approximate, --sampler=bpf falls back to ptrace) and needs no libbpf,
# clang or bpftool.
BPF       ?= 1
BPF_LOADERS := src/proc/framecap.c src/proc/oncpu.c
CLANG     ?= clang
BPFTOOL   ?= $(or $(shell command -v bpftool 2>/dev/null),$(wildcard /usr/sbin/bpftool),bpftool)
# The target's kernel headers (asm/ptrace.h) and libbpf's register macros
# (PT_REGS_PARM*) for its architecture.
MULTIARCH ?= $(shell $(CLANG) -print-multiarch 2>/dev/null)
BPF_ARCH  ?= $(if $(filter aarch64%,$(MULTIARCH)),arm64,x86)
BPF_CFLAGS := -target bpf -O2 -g -Wall -Werror -D__TARGET_ARCH_$(BPF_ARCH) -I/usr/include/$(MULTIARCH) -Isrc/bpf
ifneq ($(BPF),0)
LDLIBS    += -Wl,--as-needed -lbpf -Wl,--no-as-needed
endif

# TLS=1 (the default): the agent speaks https through OpenSSL (libssl-dev):
# the system's shared libssl in the distro build (security updates come
# with apt), its static libssl.a/libcrypto.a in `make static` (one TLS
# library for both builds, the one Debian maintains).  TLS=0 builds
# without it: https URLs are refused.
TLS       ?= 1
ifneq ($(TLS),0)
CPPFLAGS  += -DRBP_TLS
LDLIBS    += -Wl,--as-needed -lssl -lcrypto -Wl,--no-as-needed
endif

ifeq ($(FUZZ),1)
CC        := clang
CFLAGS    := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif

ifeq ($(SAN),1)
CFLAGS    := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif

# Graphviz's library (libgraphviz-dev: libgvc, libcgraph) lays out -f
# callgraph (src/output/gvrender.c); GRAPHVIZ=0, and the static build, have
# src/output/gvrender_none.c instead and write the call graph as DOT text.
GRAPHVIZ  ?= $(if $(filter 1,$(STATIC)),0,$(if $(shell $(PKG_CONFIG) --exists libgvc 2>/dev/null && echo y),1,0))
ifeq ($(GRAPHVIZ),1)
CPPFLAGS  += $(shell $(PKG_CONFIG) --cflags libgvc 2>/dev/null)
LDLIBS    += -Wl,--as-needed $(or $(shell $(PKG_CONFIG) --libs libgvc 2>/dev/null),-lgvc -lcgraph -lcdt) -Wl,--no-as-needed
endif

LIB_SRC   := $(sort $(wildcard src/util/*.c src/proc/*.c src/ruby/*.c src/ruby/tables/*.c src/profile/*.c src/output/*.c))
# Ruby's layouts are per architecture: src/ruby/tables/layouts.c (x86-64,
# tools/layout/gen) or layouts_aarch64.c (tools/layout/gen-aarch64).
TARGET_MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
LIB_SRC   := $(filter-out src/ruby/tables/layouts$(if $(filter aarch64%,$(TARGET_MACHINE)),,_aarch64).c,$(LIB_SRC))
LIB_SRC   := $(filter-out src/output/gvrender$(if $(filter 1,$(GRAPHVIZ)),_none,).c,$(LIB_SRC))
LIB_SRC   := $(filter-out src/proc/native$(if $(filter 0,$(NATIVE)),,_none).c,$(LIB_SRC))
LIB_SRC   := $(filter-out src/proc/dwarf$(if $(filter 0,$(NATIVE)),,_none).c,$(LIB_SRC))
LIB_SRC   := $(filter-out $(if $(filter 0,$(BPF)),$(BPF_LOADERS),$(BPF_LOADERS:.c=_none.c)) \
	     $(if $(filter 0,$(BPF)),src/proc/bpfcommon.c),$(LIB_SRC))
CLI_SRC   := $(sort $(wildcard src/cli/*.c))

# STATIC=1 (what `make static` sets, with BUILD=build-static): link with
# -static, from the static archives libdw.a needs (pkg-config --static
# names them: libelf, zlib, liblzma, libbz2, and libzstd where elfutils uses
# it), and OpenSSL's libssl.a/libcrypto.a (TLS=1).  src/cli/static.c stands
# in for glibc's dlopen, initgroups, getpwuid and gethostbyname, which
# cannot work in a static executable (see there: getaddrinfo reads
# /etc/hosts alone); --fatal-warnings keeps
# any other such function from slipping in unnoticed.
STATIC_BUILD ?= build-static
ifeq ($(STATIC),1)
STATIC_LIBS := $(shell $(PKG_CONFIG) --static --libs $(if $(filter 0,$(BPF)),,libbpf) libdw 2>/dev/null)
LDFLAGS   += -static -Wl,--fatal-warnings -Wl,--wrap=dlopen -Wl,--wrap=initgroups -Wl,--wrap=getpwuid \
	     -Wl,--wrap=getaddrinfo -Wl,--wrap=freeaddrinfo -Wl,--wrap=gethostbyname
LDLIBS    := $(if $(filter 0,$(TLS)),,-lssl -lcrypto) \
	     $(if $(STATIC_LIBS),$(STATIC_LIBS),$(if $(filter 0,$(BPF)),,-lbpf) -ldw -lelf -lz -llzma -lbz2) -lz
else
CLI_SRC   := $(filter-out src/cli/static.c,$(CLI_SRC))
endif
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIB       := $(BUILD)/librbpeek.a
BIN       := $(BUILD)/rbpeek
COMPLETIONS := $(BUILD)/completions/rbpeek.bash $(BUILD)/completions/_rbpeek

all: $(BIN) $(if $(filter 1,$(SAN)),,ext $(COMPLETIONS))

# The tracer, a Ruby C extension (ext/rbpeek), built against $(RUBY)'s headers
# (Debian: ruby-dev) into $(BUILD)/ext, next to a copy of lib/, so that
# `ruby -I$(BUILD)/ext -rrbpeek/trace` works; rbpeek trace finds it there.
# Without the headers it is skipped with a note (the CLI does not need it).
RUBY      ?= ruby
RUBY_CFG   = $(shell $(RUBY) -e 'c = RbConfig::CONFIG; print c["rubyhdrdir"], " ", c["rubyarchhdrdir"], " ", c["libdir"], " ", c["LIBRUBYARG_SHARED"]' 2>/dev/null)
# Cross-compiled (ARCH=arm64 on x86-64): the same Ruby's headers and
# libruby for the target, as multiarch installs them (ruby-dev:arm64:
# /usr/include/aarch64-linux-gnu/ruby-X.Y.0, /usr/lib/aarch64-linux-gnu).
ifneq ($(CROSS),)
RUBY_CFG   = $(subst /$(shell gcc -print-multiarch 2>/dev/null)/,/$(MULTIARCH)/,$(shell $(RUBY) -e 'c = RbConfig::CONFIG; print c["rubyhdrdir"], " ", c["rubyarchhdrdir"], "/ ", c["libdir"], "/$(MULTIARCH) ", c["LIBRUBYARG_SHARED"]' 2>/dev/null))
endif
EXT_DIR   := $(BUILD)/ext
EXT_SO    := $(EXT_DIR)/rbpeek/trace_ext.so
# The Ruby-facing part of the extension, compiled against Ruby's headers;
# the rest is the tracer library below.
EXT_SRC   := ext/rbpeek/trace.c ext/rbpeek/trace_save.c ext/rbpeek/trace_ext.c
# The tracer library: the tracer without Ruby (kernel streams, the writer,
# the parts of src/util they use), position-independent for the extension;
# its unit tests and bench_ktrace link it too; the CLI links ktrace.o and
# tracepoints.o (CLI_KTRACE).
TRACER_SRC := $(filter-out $(EXT_SRC),$(sort $(wildcard ext/rbpeek/*.c))) \
              src/util/hmap.c src/util/json.c src/util/safeout.c src/util/utf8.c src/util/vec.c
TRACER_OBJ := $(TRACER_SRC:%.c=$(BUILD)/tracer/%.o)
TRACER_LIB := $(BUILD)/libtracer.a
EXT_LIB   := $(patsubst lib/%,$(EXT_DIR)/%,$(wildcard lib/rbpeek/*.rb lib/rbpeek/*/*.rb))
# The Ruby ABI (RbConfig's ruby_version, e.g. 3.1.0) and headers the
# extension is built for; a change (make RUBY=other-ruby) rebuilds it.
RUBY_ABI   = $(shell $(RUBY) -e 'print RbConfig::CONFIG["ruby_version"]' 2>/dev/null)
EXT_STAMP := $(EXT_DIR)/ruby.stamp

# The tracer library first, so that the make below finds it built.
ext: $(TRACER_LIB)
	@set -- $(RUBY_CFG); \
	if [ $$# -lt 3 ] || [ ! -f "$$1/ruby.h" ]; then \
		echo "make: skipping the tracer extension: no Ruby headers for '$(RUBY)' (install ruby-dev)"; \
	else \
		mkdir -p $(EXT_DIR); \
		echo "$(RUBY_ABI) $(RUBY_CFG)" >$(EXT_STAMP).tmp; \
		if cmp -s $(EXT_STAMP).tmp $(EXT_STAMP); then rm -f $(EXT_STAMP).tmp; else mv -f $(EXT_STAMP).tmp $(EXT_STAMP); fi; \
		$(MAKE) --no-print-directory RUBY_HDR="$$1" RUBY_ARCHHDR="$$2" RUBY_LIBDIR="$$3" RUBY_LIBARG="$$4" $(EXT_SO) $(EXT_LIB); \
	fi

$(EXT_SO): $(EXT_SRC) $(wildcard ext/rbpeek/*.h) $(TRACER_LIB) $(EXT_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(RUBY_HDR) -I$(RUBY_ARCHHDR) $(WARN) $(CFLAGS) -fPIC -shared -fvisibility=hidden \
		-o $@ $(EXT_SRC) $(TRACER_LIB) $(LDFLAGS) -L$(RUBY_LIBDIR) $(RUBY_LIBARG)

$(BUILD)/tracer/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

$(BUILD)/tracer/ext/rbpeek/syscall_names.o: $(BUILD)/gen/rbk_syscalls.h
$(BUILD)/tracer/ext/rbpeek/syscall_names.o: CPPFLAGS += -I$(BUILD)/gen

$(TRACER_LIB): $(TRACER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(EXT_DIR)/%.rb: lib/%.rb
	@mkdir -p $(dir $@)
	cp $< $@

# The commit is in a generated header, rewritten only when it changes, so
# that main.o is rebuilt then and only then.
$(BUILD)/gen/rbp_commit.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define RBP_COMMIT "%s"\n' '$(COMMIT)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(BUILD)/src/cli/main.o: $(BUILD)/gen/rbp_commit.h
$(BUILD)/src/cli/main.o: CPPFLAGS += -I$(BUILD)/gen

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -MMD -MP -c $< -o $@

# The syscall-name table of this machine's architecture, generated from the
# kernel headers (<asm/unistd.h>) by tools/gen-syscalls.sh.
$(BUILD)/gen/rbk_syscalls.h: tools/gen-syscalls.sh
	@mkdir -p $(dir $@)
	tools/gen-syscalls.sh $@ "$(CC)"

# eBPF objects and their skeletons (framecap.bpf.c -> framecap.bpf.o ->
# framecap.skel.h, struct framecap_bpf), included by the loader in src/proc.
BPF_HDR   := $(wildcard src/bpf/*.h)

$(BUILD)/gen/%.bpf.o: src/bpf/%.bpf.c $(BPF_HDR)
	@mkdir -p $(dir $@)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/gen/%.skel.h: $(BUILD)/gen/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf >$@.tmp
	@mv -f $@.tmp $@

.PRECIOUS: $(BUILD)/gen/%.bpf.o
$(BUILD)/src/proc/framecap.o: $(BUILD)/gen/framecap.skel.h
$(BUILD)/src/proc/oncpu.o: $(BUILD)/gen/oncpu.skel.h
$(BPF_LOADERS:%.c=$(BUILD)/%.o): CPPFLAGS += -I$(BUILD)/gen

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# `sudo rbpeek trace` opens the program's kernel streams itself and serves
# them to its tracer (ext/rbpeek/ktrace.h, remote handles): the two tracer
# objects that do it, without Ruby.
CLI_KTRACE := $(BUILD)/tracer/ext/rbpeek/ktrace.o $(BUILD)/tracer/ext/rbpeek/tracepoints.o

$(BIN): $(CLI_OBJ) $(CLI_KTRACE) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(CLI_KTRACE) $(LIB) $(LDLIBS)

# The static binary, after checking that every archive it links is there.
static:
	@$(MAKE) --no-print-directory STATIC=1 BUILD=$(STATIC_BUILD) static-check $(STATIC_BUILD)/rbpeek

static-check:
	@missing=""; \
	for l in $(patsubst -l%,%,$(filter -l%,$(LDLIBS))) c; do \
		[ "$$($(CC) -print-file-name=lib$$l.a)" != "lib$$l.a" ] && continue; \
		case $$l in dw) p=libdw-dev;; elf) p=libelf-dev;; bpf) p=libbpf-dev;; z) p=zlib1g-dev;; lzma) p=liblzma-dev;; \
		bz2) p=libbz2-dev;; zstd) p=libzstd-dev;; ssl|crypto) p=libssl-dev;; *) p=libc6-dev;; esac; \
		missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make static: missing static libraries; install them:  apt-get install$$missing" >&2; exit 1; \
	fi

$(BUILD)/tests/%: tests/unit/%.c $(LIB) tests/unit/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/unit $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LIBS) $(LIB) $(LDLIBS)

# test_dwarf reads its own DWARF, macros included (-g3: .debug_macro)
$(BUILD)/tests/test_dwarf: CFLAGS += -g3

# The tracer's unit tests link the tracer library (not in $(LIB)).
TRACER_TESTS := $(BUILD)/tests/test_ktrace $(BUILD)/tests/test_trace_write
$(TRACER_TESTS): TEST_LIBS = $(TRACER_LIB)
$(TRACER_TESTS): $(TRACER_LIB)

# The static binary too (tests/e2e/86-static-binary.rb), except in sanitizer
# and fuzzer builds, which cannot be static.
build-tests: all $(UNIT_BIN) $(BUILD)/mkseed_walk $(if $(SAN)$(FUZZ),,static)

# libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang into build-fuzz/.
FUZZ_BUILD := build-fuzz
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/%)
FUZZ_TIME ?= 600

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(LIB)
	$(CC) $(CPPFLAGS) -Itests/fuzz $(WARN) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

fuzz-bins: $(FUZZ_BIN)

# Skipped (tests/run says so) when clang or its libFuzzer is missing.
fuzz-build:
	@if command -v clang >/dev/null; then \
		$(MAKE) -s --no-print-directory FUZZ=1 BUILD=$(FUZZ_BUILD) fuzz-bins; fi

fuzz: deps fuzz-build
	@FUZZ_SECONDS=$(FUZZ_TIME) FUZZ_BUILD=$(FUZZ_BUILD) tests/run fuzz

# A seed for fuzz_walk from a live Ruby process (see tests/fuzz/mkseed_walk.c).
$(BUILD)/mkseed_walk: tests/fuzz/mkseed_walk.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Dependencies (apt packages, Ruby chroots) are installed by our own script,
# idempotently; it does nothing when everything is present.
deps:
	@tools/install-deps.sh

# Set-up happens before the tests that need it, never inside one:
# tools/setup-tests.sh start installs the packages and starts the long builds
# (the Rubies from Debian's source, the arm64 machine) in a niced background
# job; rbpeek and the test binaries build meanwhile; finish makes the chroots
# and the browser tools.  tests/run then runs every test that needs nothing of
# that job while it works, and the files marked "# e2e-needs: STEP" last,
# each after tools/setup-tests.sh wait STEP.  Cached: seconds once
# everything is there.
test: deps
	@tools/setup-tests.sh start
	@$(MAKE) --no-print-directory build-tests
	@[ -n "$(SAN)" ] || $(MAKE) --no-print-directory fuzz-build
	@tools/setup-tests.sh finish
	@BUILD=$(BUILD) FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run

# The fuzz targets are sanitizer builds already: make test runs them.
asan:
	@$(MAKE) --no-print-directory SAN=1 BUILD=build-asan FUZZ_SECONDS=0 test

# Every end-to-end and format test, each rbpeek under valgrind (slow: ~20x).
valgrind: deps
	@$(MAKE) --no-print-directory build-tests
	@RBPEEK_VALGRIND=1 FUZZ_SECONDS=0 BUILD=$(BUILD) tests/run e2e formats

example: deps
	@$(MAKE) --no-print-directory $(BIN)
	@examples/run

# The documentation site: Debian's mkdocs (installed if missing), strict, so
# a link to a page that does not exist fails the build.  tests/docs/10-site.sh
# checks the result in Chromium.
docs:
	@tools/install-docs-deps.sh
	@mkdocs build --strict --quiet --config-file mkdocs.yml --site-dir $(abspath $(BUILD))/site
	@echo "docs: $(BUILD)/site/index.html"

# Benchmarks print tables; they are not tests (timing is noisy here).
bench: all $(BUILD)/bench_formats $(BUILD)/bench_ktrace $(BUILD)/bench_walk $(BUILD)/bench_pause $(BUILD)/bench_oncpu
	@echo "== time to write each format (1,000,000 samples)"
	@$(BUILD)/bench_formats
	@bench/sampling.sh
	@bench/slowdown.sh
	@bench/native.sh
	@bench/static.sh
	@if [ "$$(id -u)" = 0 ]; then RBPEEK=$(BIN) ruby bench/alloc.rb; \
	else echo "(bench/alloc.rb skipped: rbpeek alloc needs root)"; fi
	@if [ "$$(id -u)" = 0 ]; then BUILD=$(BUILD) ruby bench/sampler_bpf.rb; \
	else echo "(bench/sampler_bpf.rb skipped: eBPF needs root)"; fi
	@$(BUILD)/bench_ktrace
	@BUILD=$(BUILD) bench/trace/run.sh
	@bench/subprocesses.sh
	@bench/agent.sh

$(BUILD)/bench_formats: bench/bench_formats.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_ktrace: bench/bench_ktrace.c $(TRACER_LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TRACER_LIB)

$(BUILD)/bench_walk: bench/bench_walk.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_oncpu: bench/bench_oncpu.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_pause: bench/bench_pause.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Bash and zsh completions, generated from the --help texts of the binary.
$(COMPLETIONS) &: $(BIN) tools/gen-completions.sh
	RUN='$(RUN_TARGET)' tools/gen-completions.sh $(BIN) $(BUILD)/completions

completions: $(COMPLETIONS)

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, the man page, the
# completions and the tracer.  The tracer's Ruby files go to TRACERDIR and
# its extension, built for one Ruby ABI, to TRACERDIR/<ABI>/ (<ABI> is
# RbConfig's ruby_version, e.g. 3.1.0); `rbpeek trace` finds TRACERDIR as
# ../lib/rbpeek/ruby from its own binary, and lib/rbpeek/trace.rb picks the
# extension of the Ruby it runs in.  make install-tracer RUBY=other-ruby
# adds the extension for another Ruby.
PREFIX      ?= /usr/local
BINDIR      := $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
TRACERDIR   := $(PREFIX)/lib/rbpeek/ruby
# The agent's systemd unit (not enabled) and its config file (kept when
# one is there already).  The Debian package: /lib/systemd/system, /etc.
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR  ?= $(PREFIX)/etc
INSTALL     ?= install
TRACER_RB   := $(patsubst lib/%,%,$(wildcard lib/rbpeek/*.rb lib/rbpeek/*/*.rb))

install: $(BIN) $(COMPLETIONS)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	$(INSTALL) -m 755 $(BIN) $(DESTDIR)$(BINDIR)/rbpeek
	$(INSTALL) -m 644 docs/rbpeek.1 $(DESTDIR)$(MANDIR)/man1/rbpeek.1
	$(INSTALL) -m 644 $(BUILD)/completions/rbpeek.bash $(DESTDIR)$(BASHCOMPDIR)/rbpeek
	$(INSTALL) -m 644 $(BUILD)/completions/_rbpeek $(DESTDIR)$(ZSHCOMPDIR)/_rbpeek
	$(INSTALL) -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/rbpeek
	sed -e 's|/usr/bin/rbpeek|$(BINDIR)/rbpeek|' -e 's|/etc/rbpeek/|$(SYSCONFDIR)/rbpeek/|g' \
		debian/rbpeek-agent.service >$(DESTDIR)$(SYSTEMDUNITDIR)/rbpeek-agent.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/rbpeek-agent.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/rbpeek/agent.conf ] || \
		$(INSTALL) -m 644 examples/agent.conf $(DESTDIR)$(SYSCONFDIR)/rbpeek/agent.conf
	@$(MAKE) --no-print-directory install-tracer

install-tracer: ext
	@if [ ! -f $(EXT_SO) ]; then echo "make: not installing the tracer: it is not built (no ruby-dev for '$(RUBY)')"; exit 0; fi; \
	read abi rest <$(EXT_STAMP); set -x; \
	for f in $(TRACER_RB); do $(INSTALL) -D -m 644 lib/$$f $(DESTDIR)$(TRACERDIR)/$$f || exit 1; done; \
	$(INSTALL) -D -m 644 $(EXT_SO) $(DESTDIR)$(TRACERDIR)/$$abi/rbpeek/trace_ext.so

# Removes what install put there (every tracer ABI included), not the
# directories it shares with other software.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rbpeek $(DESTDIR)$(MANDIR)/man1/rbpeek.1 \
		$(DESTDIR)$(BASHCOMPDIR)/rbpeek $(DESTDIR)$(ZSHCOMPDIR)/_rbpeek \
		$(DESTDIR)$(SYSTEMDUNITDIR)/rbpeek-agent.service $(DESTDIR)$(SYSCONFDIR)/rbpeek/agent.conf
	-rmdir $(DESTDIR)$(SYSCONFDIR)/rbpeek 2>/dev/null
	rm -rf $(DESTDIR)$(PREFIX)/lib/rbpeek

# make dist: build/rbpeek-VERSION.tar.gz, the committed tree (git archive of
# HEAD) plus a COMMIT file naming it, for --version without git.
DIST := rbpeek-$(VERSION)

dist:
	@git rev-parse --verify -q HEAD >/dev/null || { echo "make dist: needs a git checkout" >&2; exit 1; }
	@git diff-index --quiet HEAD -- || echo "make dist: note: uncommitted changes are not in the tarball" >&2
	@mkdir -p $(BUILD)/dist
	git rev-parse --short=12 HEAD >$(BUILD)/dist/COMMIT
	git archive --format=tar.gz --prefix=$(DIST)/ --add-file=$(BUILD)/dist/COMMIT -o $(BUILD)/$(DIST).tar.gz HEAD
	@echo "make dist: $(BUILD)/$(DIST).tar.gz"

clean:
	rm -rf build build-asan $(STATIC_BUILD) $(FUZZ_BUILD) build-arm64 build-arm64-static


.PHONY: FORCE all ext completions install install-tracer uninstall dist static static-check build-tests deps test asan valgrind example bench clean fuzz fuzz-build fuzz-bins docs
-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TRACER_OBJ:.o=.d)
