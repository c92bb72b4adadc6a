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
#   make clean

VERSION   := 0.1.0
BUILD     ?= build
CC        ?= cc
CFLAGS    ?= -O2 -g
WARN      := -std=c11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CPPFLAGS  += -D_GNU_SOURCE -Isrc -DRBP_VERSION='"$(VERSION)"'
# libdw/libelf (elfutils) only for --native (src/proc/native.c): --as-needed
# keeps them out of binaries that do not use it (unit tests, benches).
LDLIBS    += -lz -Wl,--as-needed -ldw -lelf -Wl,--no-as-needed

ifeq ($(FUZZ),1)
CC        := clang
CFLAGS    := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif

ifeq ($(SAN),1)
CFLAGS    := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif

LIB_SRC   := $(sort $(wildcard src/util/*.c src/proc/*.c src/ruby/*.c src/profile/*.c src/output/*.c))
# The tracer's kernel streams (ext/rbpeek/ktrace.c) are plain C: in the
# library so unit tests link them; the CLI does not use them.
LIB_SRC   += ext/rbpeek/ktrace.c
CLI_SRC   := $(sort $(wildcard src/cli/*.c))
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIB       := $(BUILD)/librbpeek.a
BIN       := $(BUILD)/rbpeek

all: $(BIN) $(if $(filter 1,$(SAN)),,ext)

# The tracer, a Ruby C extension (ext/rbpeek), built against $(RUBY)'s headers
# (Debian: ruby-dev) into $(BUILD)/ext, next to a copy of lib/, so that
# `ruby -I$(BUILD)/ext -rrbpeek/trace` works; rbpeek trace finds it there.
# Without the headers it is skipped with a note (the CLI does not need it).
RUBY      ?= ruby
RUBY_CFG   = $(shell $(RUBY) -e 'c = RbConfig::CONFIG; print c["rubyhdrdir"], " ", c["rubyarchhdrdir"], " ", c["libdir"], " ", c["LIBRUBYARG_SHARED"]' 2>/dev/null)
EXT_DIR   := $(BUILD)/ext
EXT_SO    := $(EXT_DIR)/rbpeek/trace_ext.so
EXT_SRC   := ext/rbpeek/trace.c ext/rbpeek/trace_write.c ext/rbpeek/ktrace.c \
             src/util/hmap.c src/util/json.c src/util/utf8.c src/util/vec.c
EXT_LIB   := $(patsubst lib/%,$(EXT_DIR)/%,$(wildcard lib/rbpeek/*.rb lib/rbpeek/*/*.rb))

ext:
	@set -- $(RUBY_CFG); \
	if [ $$# -lt 3 ] || [ ! -f "$$1/ruby.h" ]; then \
		echo "make: skipping the tracer extension: no Ruby headers for '$(RUBY)' (install ruby-dev)"; \
	else \
		$(MAKE) --no-print-directory RUBY_HDR="$$1" RUBY_ARCHHDR="$$2" RUBY_LIBDIR="$$3" RUBY_LIBARG="$$4" $(EXT_SO) $(EXT_LIB); \
	fi

$(EXT_SO): $(EXT_SRC) ext/rbpeek/trace.h ext/rbpeek/ktrace.h src/util/pb.h src/util/gz.h $(BUILD)/gen/rbk_syscalls.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(BUILD)/gen -I$(RUBY_HDR) -I$(RUBY_ARCHHDR) $(WARN) $(CFLAGS) -fPIC -shared -fvisibility=hidden \
		-o $@ $(EXT_SRC) $(LDFLAGS) -L$(RUBY_LIBDIR) $(RUBY_LIBARG)

$(EXT_DIR)/%.rb: lib/%.rb
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -MMD -MP -c $< -o $@

# The syscall-name table of this machine's architecture, generated from the
# kernel headers (<asm/unistd.h>) by tools/gen-syscalls.sh.
$(BUILD)/gen/rbk_syscalls.h: tools/gen-syscalls.sh
	@mkdir -p $(dir $@)
	tools/gen-syscalls.sh $@ "$(CC)"

$(BUILD)/ext/rbpeek/ktrace.o: $(BUILD)/gen/rbk_syscalls.h
$(BUILD)/ext/rbpeek/ktrace.o: CPPFLAGS += -I$(BUILD)/gen

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(LIB) tests/unit/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/unit $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# test_dwarf reads its own DWARF, macros included (-g3: .debug_macro)
$(BUILD)/tests/test_dwarf: CFLAGS += -g3

# test_trace_write compiles the tracer's writer from its source (not in $(LIB))
$(BUILD)/tests/test_trace_write: ext/rbpeek/trace_write.c ext/rbpeek/trace.h ext/rbpeek/ktrace.h

build-tests: all $(UNIT_BIN) $(BUILD)/mkseed_walk

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

test: deps
	@$(MAKE) --no-print-directory build-tests
	@[ -n "$(SAN)" ] || $(MAKE) --no-print-directory fuzz-build
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

# Benchmarks print tables; they are not tests (timing is noisy here).
bench: all $(BUILD)/bench_formats $(BUILD)/bench_ktrace $(BUILD)/bench_walk $(BUILD)/bench_pause
	@echo "== time to write each format (1,000,000 samples)"
	@$(BUILD)/bench_formats
	@bench/sampling.sh
	@bench/slowdown.sh
	@bench/native.sh
	@if [ "$$(id -u)" = 0 ]; then RBPEEK=$(BIN) ruby bench/alloc.rb; \
	else echo "(bench/alloc.rb skipped: rbpeek alloc needs root)"; fi
	@$(BUILD)/bench_ktrace
	@BUILD=$(BUILD) bench/trace/run.sh
	@bench/subprocesses.sh

$(BUILD)/bench_formats: bench/bench_formats.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_ktrace: bench/bench_ktrace.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_walk: bench/bench_walk.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_pause: bench/bench_pause.c $(LIB)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

clean:
	rm -rf build build-asan $(FUZZ_BUILD)


.PHONY: all ext build-tests deps test asan valgrind example bench clean fuzz fuzz-build fuzz-bins
-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
