# memtrack - build, test, demo and benchmarks.  `make V=1` prints full commands.
.DELETE_ON_ERROR:
.SECONDARY:

OUT      := build
HOST_ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
ARCH     := $(HOST_ARCH)
CC       ?= gcc
# Cross builds: `make ARCH=arm64` (or CROSS=aarch64-linux-gnu-) on x86-64
# builds the tool, its BPF objects and libmemtrack-fast.so for arm64 into
# build-arm64/ (OUT=... to choose), with Debian's cross toolchain and the
# :arm64 libraries (scripts/bootstrap.sh installs them when ARCH or CROSS
# asks); vmlinux.h then comes from the target's kernel package
# (scripts/vmlinux-h.sh), not the running kernel.
TRIPLET_x86   := x86_64-linux-gnu
TRIPLET_arm64 := aarch64-linux-gnu
DEBARCH_x86   := amd64
DEBARCH_arm64 := arm64
ifneq ($(CROSS),)
ARCH     := $(if $(findstring aarch64,$(CROSS)),arm64,$(if $(findstring x86_64,$(CROSS)),x86,$(ARCH)))
endif
ifneq ($(ARCH),$(HOST_ARCH))
ifeq ($(TRIPLET_$(ARCH)),)
$(error ARCH=$(ARCH): memtrack builds for x86 and arm64 only)
endif
CROSS    ?= $(TRIPLET_$(ARCH))-
ifeq ($(origin OUT),file)
OUT      := build-$(ARCH)
endif
CC       := $(CROSS)gcc
CXX      := $(CROSS)g++
AR       := $(CROSS)ar
CROSS_DEBARCH := $(DEBARCH_$(ARCH))
endif
CLANG    ?= clang
BPFTOOL  ?= bpftool
VERSION  := 0.1.0
# PROJECT_NAME and PROJECT_CONTACT (the package's maintainer)
include PROJECT
# the oldest kernel memtrack runs on: src/kernel/kernel_features.h's one definition
KERNEL_FLOOR := $(shell sed -n 's/^\#define MT_KERNEL_FLOOR "\(.*\)"$$/\1/p' src/kernel/kernel_features.h)
PREFIX   ?= /usr/local

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror=undef -Wmissing-field-initializers \
	    -Wno-unused-parameter -D_GNU_SOURCE -DMT_VERSION='"$(VERSION)"' \
	    -I$(OUT) $(SRC_INCLUDES) -Iinclude -MMD -MP
LDLIBS   := -lbpf -ldw -lelf -lz -lzstd -lpthread -lm -lstdc++
BPF_CFLAGS := -g -O2 -Wall
# CI builds (make check) turn every warning into an error.
ifeq ($(WERROR),1)
CFLAGS     += -Werror
BPF_CFLAGS += -Werror
endif
# SANITIZE=address,undefined or SANITIZE=thread: instrumented build (make check
# puts it in its own OUT, so the normal objects are left alone).
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

# Link order matters to bpftool 7.1's linker: ring.bpf.c (which defines the
# shared maps) first, then the objects that define no map of their own, then
# the rest; other orders fail in `gen skeleton` with "map relo failed".
BPF_SRCS := $(addprefix src/bpf/,ring.bpf.c proc.bpf.c rss.bpf.c alloc.bpf.c vm.bpf.c phys.bpf.c fast.bpf.c unwind.bpf.c python.bpf.c)
BPF_OBJS := $(patsubst src/bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
# src/ is split by phase, and each library is built from whole folders:
#   libmemtrack-core.a   util format pipeline analyze inspect kernel: all that
#                        needs no BPF skeleton, so it builds without clang,
#                        bpftool or a BTF kernel; all the unit tests link it
#                        (util: shared helpers; inspect: what memtrack reads
#                        of the tracked programs, their ELF files and rings;
#                        kernel: what the running kernel offers, from its BTF)
#   libmemtrack.a        record daemon cli: the recorder, the daemon and the commands, on the
#                        skeleton (cli/main.c is the binary's own)
#   libmemtrack-fast.so  fast (below); libmemtrack-ctl.a  ctl
CORE_DIRS := util format pipeline analyze inspect kernel
SKEL_DIRS := record daemon cli
SRC_INCLUDES := -Isrc
CORE_SRCS := $(wildcard $(addsuffix /*.c,$(addprefix src/,$(CORE_DIRS))))
CORE_OBJS := $(patsubst src/%.c,$(OUT)/obj/%.o,$(CORE_SRCS))
SKEL_SRCS := $(filter-out src/cli/main.c,$(wildcard $(addsuffix /*.c,$(addprefix src/,$(SKEL_DIRS)))))
SKEL_OBJS := $(patsubst src/%.c,$(OUT)/obj/%.o,$(SKEL_SRCS))
SRC_HDRS  := src/event.h src/bpf_abi.h src/sample.h src/compiler.h src/unwind_search.h src/stack_id.h $(wildcard src/*/*.h)
# libmemtrack-ctl.a: the control socket's client, linked by measured programs
# (include/memtrack-ctl.h) and by `memtrack ctl`.
CTL_SRCS  := $(wildcard src/ctl/*.c)
CTL_OBJS  := $(patsubst src/%.c,$(OUT)/obj/%.o,$(CTL_SRCS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRCS))
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURE_CXX_SRCS := $(wildcard tests/fixtures/*.cc)
FIXTURE_BINS := $(patsubst tests/fixtures/%.c,$(OUT)/fixtures/%,$(FIXTURE_SRCS)) \
		$(patsubst tests/fixtures/%.cc,$(OUT)/fixtures/%,$(FIXTURE_CXX_SRCS)) \
		$(OUT)/fixtures/alloc_jemalloc_static $(OUT)/fixtures/server_static \
		$(OUT)/fixtures/mapped_jemalloc $(OUT)/fixtures/mapped_mimalloc \
		$(OUT)/fixtures/alloc_rust_system $(OUT)/fixtures/alloc_rust_jemalloc
# tests/fixtures/lib/NAME.c -> $(OUT)/fixtures/libNAME.so (preloaded or linked by fixtures)
FIXTURE_LIB_SRCS := $(wildcard tests/fixtures/lib/*.c)
FIXTURE_LIBS := $(patsubst tests/fixtures/lib/%.c,$(OUT)/fixtures/lib%.so,$(FIXTURE_LIB_SRCS))
FIXTURE_BINS += $(FIXTURE_LIBS)
# call-stack fixtures (tests/fixtures/stacks): -O2, with and without frame pointers
STK_VARIANTS := fp nofp static_fp static_nofp
FIXTURE_BINS += $(addprefix $(OUT)/fixtures/stk_,$(STK_VARIANTS)) \
		$(OUT)/fixtures/libstkplugin_fp.so $(OUT)/fixtures/libstkplugin_nofp.so \
		$(OUT)/fixtures/unw_fp $(OUT)/fixtures/unw_nofp
# a cross build's: those built by the cross gcc alone (jemalloc, mimalloc,
# tcmalloc and the Rust toolchain have no :ARCH setup in the bootstrap)
ifneq ($(ARCH),$(HOST_ARCH))
FIXTURE_BINS := $(filter-out $(addprefix $(OUT)/fixtures/,alloc_jemalloc alloc_mimalloc alloc_tcmalloc \
	alloc_jemalloc_static mapped_jemalloc mapped_mimalloc alloc_rust_system alloc_rust_jemalloc),$(FIXTURE_BINS))
endif
# the aarch64 CFI fixtures: an x86-64 host's, when the cross gcc is there
CFI_AARCH64_BINS := $(OUT)/fixtures/cfi_aarch64_gcc $(OUT)/fixtures/cfi_aarch64_clang
ifeq ($(ARCH)$(HOST_ARCH)$(if $(shell command -v aarch64-linux-gnu-gcc),y),x86x86y)
FIXTURE_BINS += $(CFI_AARCH64_BINS)
endif
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(OUT)/bench/%,$(BENCH_SRCS))

# deferred (=): clang may only exist once the bootstrap has run
# (a cross build's: the target's multiarch directory for the host's)
CLANG_BPF_SYS_INCLUDES = $(subst /$(TRIPLET_$(HOST_ARCH)),/$(TRIPLET_$(ARCH)),$(shell $(CLANG) -v -E - </dev/null 2>&1 \
	| sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }'))

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.PHONY: all demo test unit-test integration-test fixtures test-kernels test-cfi-arm64 bench bench-pipeline bench-ctl clean install deps \
	check check-werror format format-check tidy cppcheck shellcheck asan-test tsan-test fuzz

all: $(OUT)/.deps $(OUT)/memtrack $(OUT)/libmemtrack-ctl.a $(OUT)/memtrack-ctl.pc $(OUT)/libmemtrack-fast.so

# Installs the Debian packages the build needs (as root), or says which.
# (a cross build's too: its toolchain and :ARCH libraries)
$(OUT)/.deps: scripts/bootstrap.sh
	$(Q)mkdir -p $(OUT)
	$(Q)scripts/bootstrap.sh $(CROSS_DEBARCH)
	$(Q)touch $@

deps:
	$(Q)scripts/bootstrap.sh $(CROSS_DEBARCH)

ifeq ($(ARCH),$(HOST_ARCH))
$(OUT)/vmlinux.h: | $(OUT)/.deps
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(OUT)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@
else
$(OUT)/vmlinux.h: scripts/vmlinux-h.sh scripts/image-btf.py | $(OUT)/.deps
	$(call msg,GEN,$@)
	$(Q)scripts/vmlinux-h.sh $(DEBARCH_$(ARCH)) $(OUT)/kernels $@
endif

$(OUT)/bpf/%.bpf.o: src/bpf/%.bpf.c src/event.h src/bpf_abi.h src/unwind_search.h $(wildcard src/bpf/*.bpf.h) $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -I$(OUT) -Isrc \
		$(CLANG_BPF_SYS_INCLUDES) -c $< -o $@

$(OUT)/memtrack.bpf.o: $(BPF_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/memtrack.skel.h: $(OUT)/memtrack.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memtrack_bpf > $@

$(CORE_OBJS) $(CTL_OBJS): $(OUT)/obj/%.o: src/%.c | $(OUT)/.deps
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# report --html's page embeds its style and script (.incbin in report_html.c)
$(OUT)/obj/analyze/report_html.o: src/analyze/report_page.css src/analyze/report_page.js

$(SKEL_OBJS) $(OUT)/obj/cli/main.o: $(OUT)/obj/%.o: src/%.c $(OUT)/memtrack.skel.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/libmemtrack-core.a: $(CORE_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# libmemtrack-fast.so: the in-process heap path (--fast), preloaded into the
# tracked programs.  Its own objects: position-independent, hidden by
# default (only the allocator entry points are exported), and with unwind
# tables, since C++ exceptions pass through its operator new.
FAST_SRCS := $(wildcard src/fast/*.c)
FAST_OBJS := $(patsubst src/%.c,$(OUT)/obj/%.o,$(FAST_SRCS))
FAST_CFLAGS := -fPIC -fvisibility=hidden -fexceptions -fno-strict-aliasing -fno-stack-protector
$(FAST_OBJS): $(OUT)/obj/%.o: src/%.c | $(OUT)/.deps
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -fsanitize=%,$(CFLAGS)) $(FAST_CFLAGS) -c $< -o $@

$(OUT)/libmemtrack-fast.so: $(FAST_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) -shared -Wl,-z,nodelete -Wl,-z,now $^ -o $@

$(OUT)/libmemtrack.a: $(SKEL_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(OUT)/libmemtrack-ctl.a: $(CTL_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(OUT)/memtrack-ctl.pc: Makefile | $(OUT)/.deps
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' 'libdir=$${prefix}/lib' '' \
		'Name: memtrack-ctl' 'Description: drive memtrack track --control from the measured program' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lmemtrack-ctl' > $@

$(OUT)/memtrack: $(OUT)/obj/cli/main.o $(OUT)/libmemtrack.a $(OUT)/libmemtrack-core.a $(OUT)/libmemtrack-ctl.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# Unit tests link the pure library only (no BPF, no skeleton).
# test_fast_unwind includes the library's files it tests (they are not in the core library)
$(OUT)/tests/test_fast_unwind: src/fast/unwind.c src/fast/own_map.c src/fast/table_pages.c
$(OUT)/tests/%: tests/unit/%.c tests/harness.h $(wildcard tests/unit/*.h) $(SRC_HDRS) $(OUT)/libmemtrack-core.a
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -DMT_SOURCE_DIR='"$(CURDIR)"' -Itests -Itests/unit $< $(OUT)/libmemtrack-core.a $(LDLIBS) -o $@

# Fixtures are built at -O0 so no allocation is optimised away.
FIXTURE_LIBS_pthreads := -lpthread
FIXTURE_LIBS_alloc_jemalloc := -ljemalloc
FIXTURE_LIBS_alloc_mimalloc := -lmimalloc
FIXTURE_LIBS_alloc_tcmalloc := -ltcmalloc_minimal
FIXTURE_LIBS_dlopen_thread := -ldl
FIXTURE_LIBS_ctl_phases := $(OUT)/libmemtrack-ctl.a
FIXTURE_LIBS_ctl_late := $(OUT)/libmemtrack-ctl.a
FIXTURE_LIBS_mapped_marks := $(OUT)/libmemtrack-ctl.a
$(OUT)/fixtures/ctl_phases $(OUT)/fixtures/ctl_late $(OUT)/fixtures/mapped_marks: $(OUT)/libmemtrack-ctl.a include/memtrack-ctl.h
# the attacker of test_hostile_ring.py writes the ring with its real layout
FIXTURE_CFLAGS_hostile_ring := -Isrc
$(OUT)/fixtures/hostile_ring: src/fast/fast_ring.h src/event.h src/bpf_abi.h
$(OUT)/fixtures/%: tests/fixtures/%.c tests/fixtures/marker.h tests/fixtures/shown.h tests/fixtures/pairs.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O0 -g -std=gnu11 -D_GNU_SOURCE -Wall -Iinclude $(FIXTURE_CFLAGS_$*) $< -o $@ $(FIXTURE_LIBS_$*) -lpthread

$(OUT)/fixtures/%: tests/fixtures/%.cc tests/fixtures/marker.h
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CXX) -O0 -g -std=gnu++17 -Wall $< -o $@

# jemalloc linked statically into a static executable (no libc.so, no ld.so)
$(OUT)/fixtures/alloc_jemalloc_static: tests/fixtures/alloc_jemalloc.c tests/fixtures/marker.h tests/fixtures/shown.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O0 -g -std=gnu11 -D_GNU_SOURCE -Wall -static $< -o $@ -l:libjemalloc.a -lpthread -lstdc++ -lm

# the server of test_attach.py, statically linked (glibc's malloc in the executable)
$(OUT)/fixtures/server_static: tests/fixtures/server.c tests/fixtures/marker.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O0 -g -std=gnu11 -D_GNU_SOURCE -Wall -static -DSERVER_STATIC $< -o $@ -lpthread

# mapped.c linked with another malloc (test_mapped.py): its mappings are its own
$(OUT)/fixtures/mapped_jemalloc $(OUT)/fixtures/mapped_mimalloc: $(OUT)/fixtures/mapped_%: tests/fixtures/mapped.c tests/fixtures/marker.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O0 -g -std=gnu11 -D_GNU_SOURCE -Wall $< -o $@ -l$* -lpthread

STK_CFLAGS := -O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -fno-optimize-sibling-calls
STK_CFLAGS_fp := -fno-omit-frame-pointer
STK_CFLAGS_nofp := -fomit-frame-pointer
$(OUT)/fixtures/stk_%: tests/fixtures/stacks/stk.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_CFLAGS_$(subst static_,,$*)) $(if $(findstring static,$*),-static -DSTK_STATIC) \
		$< -o $@ -ldl -lpthread

# the in-process unwinder next to the kernel's (test_stacks.py): its own tables, built as stacks.c does
UNW_SRCS := tests/fixtures/stacks/unw.c src/fast/unwind.c src/fast/own_map.c src/fast/table_pages.c
$(OUT)/fixtures/unw_%: $(UNW_SRCS) src/fast/unwind.h src/inspect/unwind_table.h src/bpf_abi.h src/event.h $(OUT)/libmemtrack-core.a
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_CFLAGS_$*) -Isrc $(UNW_SRCS) $(OUT)/libmemtrack-core.a $(LDLIBS) -o $@

$(OUT)/fixtures/libstkplugin_%.so: tests/fixtures/stacks/stkplugin.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_CFLAGS_$*) -fPIC -shared $< -o $@

# aarch64 CFI for test_unwind_cfi_diff on any host: the stacks fixture by the
# cross gcc and by clang, with pointer authentication (negate_ra_state rows)
CFI_AARCH64_CFLAGS := $(STK_CFLAGS) -fomit-frame-pointer -mbranch-protection=standard
$(OUT)/fixtures/cfi_aarch64_gcc: tests/fixtures/stacks/stk.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)aarch64-linux-gnu-gcc $(CFI_AARCH64_CFLAGS) $< -o $@ -ldl -lpthread

$(OUT)/fixtures/cfi_aarch64_clang: tests/fixtures/stacks/stk.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) --target=aarch64-linux-gnu $(CFI_AARCH64_CFLAGS) -Wno-unknown-attributes $< -o $@ -ldl -lpthread

# make test-cfi-arm64: the aarch64 half of test_unwind_cfi_diff, required (CI
# runs it once make ARCH=arm64 has installed the cross toolchain)
test-cfi-arm64: $(OUT)/tests/test_unwind_cfi_diff $(CFI_AARCH64_BINS)
	$(Q)OUT=$(OUT) MT_CFI_AARCH64=1 $(OUT)/tests/test_unwind_cfi_diff

# Rust fixtures, built with Debian's rustc and cargo (not a rustup toolchain
# that may come first in PATH); cargo reads only Debian's packaged crates.
RUSTC_DEB ?= /usr/bin/rustc
CARGO_DEB ?= /usr/bin/cargo
$(OUT)/fixtures/alloc_rust_system: tests/fixtures/rust/alloc_system.rs
	$(call msg,RUSTC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(RUSTC_DEB) -O -g $< -o $@

RUST_JEMALLOC_DIR := tests/fixtures/rust/jemalloc
$(OUT)/fixtures/alloc_rust_jemalloc: $(RUST_JEMALLOC_DIR)/src/main.rs $(RUST_JEMALLOC_DIR)/Cargo.toml
	$(call msg,CARGO,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)cd $(RUST_JEMALLOC_DIR) && RUSTC=$(RUSTC_DEB) $(CARGO_DEB) build -q --release --offline \
		--target-dir $(abspath $(OUT))/cargo
	$(Q)cp $(OUT)/cargo/release/alloc_rust_jemalloc $@

$(OUT)/fixtures/lib%.so: tests/fixtures/lib/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -std=gnu11 -D_GNU_SOURCE -Wall -fPIC -shared $< -o $@ -ldl

BENCH_LIBS_bench_ctl := $(OUT)/libmemtrack-ctl.a
$(OUT)/bench/bench_ctl: $(OUT)/libmemtrack-ctl.a
$(OUT)/bench/%: bench/%.c $(OUT)/libmemtrack-core.a
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $< $(OUT)/libmemtrack-core.a $(LDLIBS) $(BENCH_LIBS_$*) -o $@

BENCH_LIBS_bench_pipeline := -lmsgpackc

demo: all $(OUT)/fixtures/demo
	$(Q)$(OUT)/memtrack track -o $(OUT)/demo.mtrk -- $(OUT)/fixtures/demo
	$(Q)$(OUT)/memtrack report $(OUT)/demo.mtrk

test: all $(UNIT_BINS) $(FIXTURE_BINS)
	$(Q)tests/run.sh

# The unit tests alone need no root, BPF or BTF kernel.
unit-test: $(UNIT_BINS)
	$(Q)OUT=$(OUT) tests/run.sh --unit

integration-test: all $(FIXTURE_BINS)
	$(Q)tests/run.sh --integration

# Build what the integration tests run, without running them (for
# `tests/run.sh --integration -k NAME` on one test).
fixtures: all $(FIXTURE_BINS) $(UNIT_BINS)

# A subset of the integration tests (every feature at least once) under
# Debian 12's kernels, 6.1 and the backports' 6.12, booted under qemu with
# this checkout shared read-only (tests/kernels/run.sh); KERNELS="6.1" picks.
# ARCH=arm64: the arm64 kernels under qemu-system-aarch64, on the cross build.
test-kernels: all $(FIXTURE_BINS)
	$(Q)OUT=$(OUT) MT_KERNEL_ARCH=$(DEBARCH_$(ARCH)) tests/kernels/run.sh $(KERNELS)

# bench_report: `memtrack report` on a 50-million-event artifact, one CPU.
# bench_pipeline -m memtrack -w 2: the pipeline's capacity with a second
# encoding thread on the CPU memtrack leaves to the command.
bench-pipeline: all $(OUT)/bench/bench_pipeline $(OUT)/bench/bench_report
	$(Q)$(OUT)/bench/bench_pipeline
	$(Q)$(OUT)/bench/bench_pipeline -m memtrack -w 2 | grep '^memtrack'
	$(Q)$(OUT)/bench/bench_report -m $(OUT)/memtrack

# Round-trip latency of the control socket (enable/disable), under memtrack.
bench-ctl: all $(OUT)/bench/bench_ctl
	$(Q)rm -f $(OUT)/bench-ctl.sock
	$(Q)$(OUT)/memtrack track -q -o $(OUT)/bench-ctl.mtrk --control $(OUT)/bench-ctl.sock -- $(OUT)/bench/bench_ctl 10000

# bench: the whole overhead suite (bench/run.sh); BENCH_ARGS passes options,
# e.g. make bench BENCH_ARGS="--shard 1/3" (one CI job's part).
bench: all $(FIXTURE_BINS)
	$(Q)bench/run.sh $(BENCH_ARGS)

# --- guard rails: `make check` (run by .ci/run) -------------------------
# Each check is its own target; `check` runs them all and fails on the first.
C_FILES  := $(shell git ls-files '*.c' '*.h' 2>/dev/null)
# every tracked file that starts with a sh/bash #! line (deferred: only shellcheck needs it)
SH_FILES = $(shell for f in $$(git ls-files); do head -n1 "$$f" 2>/dev/null | \
	grep -qE '^\#!.*[/ ](ba)?sh$$' && echo "$$f"; done)
# userspace C; the BPF side is checked by clang -Wall and the verifier
TIDY_SRCS := $(filter-out src/bpf/%,$(filter src/%.c,$(C_FILES)))
PIPELINE_UNITS := test_queue test_pipeline

check: check-werror format-check tidy cppcheck shellcheck asan-test tsan-test fuzz
	@echo "make check: all guard rails passed"

# The whole tree (tool, BPF, unit tests, fixtures, benchmarks) with -Werror.
check-werror: | $(OUT)/.deps
	$(Q)$(MAKE) --no-print-directory OUT=$(OUT)/werror WERROR=1 all $(patsubst $(OUT)/%,$(OUT)/werror/%,$(UNIT_BINS) $(FIXTURE_BINS))

format:
	$(Q)clang-format -i $(C_FILES)

format-check:
	$(call msg,FORMAT,$(words $(C_FILES)) files)
	$(Q)clang-format --dry-run -Werror $(C_FILES)

# The generated skeleton's open() hands its allocations to libbpf's
# bpf_object__destroy_skeleton() on failure, which the analyzer cannot see
# into: a false "potential leak" in build/memtrack.skel.h wherever it is
# inlined (only loader.c calls it), and a generated file takes no NOLINT.
TIDY_NO_MALLOC := src/record/loader.c
# findings go to stdout; stderr only counts the warnings it suppressed in system headers
TIDY_QUIET := $(if $(filter 1,$(V)),,2>/dev/null)
TIDY_CFLAGS = $(patsubst -I$(OUT),-isystem $(OUT),$(filter-out -MMD -MP,$(CFLAGS)))
# bugprone-* and clang-analyzer-*, configured in .clang-tidy; a finding is
# fixed or silenced inline with a NOLINT(check) comment saying why.
tidy: $(OUT)/memtrack.skel.h
	$(call msg,TIDY,$(words $(TIDY_SRCS)) files)
	$(Q)printf '%s\n' $(filter-out $(TIDY_NO_MALLOC),$(TIDY_SRCS)) | xargs -P2 -I{} clang-tidy --quiet {} \
		-- $(TIDY_CFLAGS) $(TIDY_QUIET)
	$(Q)clang-tidy --quiet --checks=-clang-analyzer-unix.Malloc $(TIDY_NO_MALLOC) -- $(TIDY_CFLAGS) $(TIDY_QUIET)

cppcheck: $(OUT)/memtrack.skel.h
	$(call msg,CPPCHECK,src)
	$(Q)cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--std=c11 -D__linux__ -D_GNU_SOURCE -I$(OUT) $(SRC_INCLUDES) $(TIDY_SRCS)

shellcheck:
	$(call msg,SHCHECK,$(SH_FILES))
	$(Q)shellcheck $(SH_FILES)

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# threaded ones (queue, pipeline) under ThreadSanitizer.
asan-test: | $(OUT)/.deps
	$(Q)$(MAKE) --no-print-directory OUT=$(OUT)/asan SANITIZE=address,undefined unit-test

tsan-test: | $(OUT)/.deps
	$(Q)$(MAKE) --no-print-directory OUT=$(OUT)/tsan SANITIZE=thread \
		$(patsubst %,$(OUT)/tsan/tests/%,$(PIPELINE_UNITS))
	$(Q)OUT=$(OUT)/tsan tests/run.sh --unit

# libFuzzer target for the artifact reader: the pure format code compiled
# again with clang and the sanitizers, run FUZZ_SECONDS from the committed
# seeds (real artifacts); the corpus grows in $(OUT)/fuzz/corpus, crashes go
# to $(OUT)/fuzz/ and fail the target.
FUZZ_SECONDS ?= 60
FUZZ_SRCS := tests/fuzz/fuzz_reader.c $(wildcard src/format/*.c)
$(OUT)/fuzz/fuzz_reader: $(FUZZ_SRCS) $(SRC_HDRS) | $(OUT)/.deps
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE -DMT_VERSION='"$(VERSION)"' $(SRC_INCLUDES) \
		-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_SRCS) -lzstd -lz -o $@

# The symbolization cache's reader (a file anything may have written), the same way.
FUZZ_SYMCACHE_SRCS := tests/fuzz/fuzz_symcache.c src/analyze/symcache.c src/util/as_user.c
$(OUT)/fuzz/fuzz_symcache: $(FUZZ_SYMCACHE_SRCS) $(SRC_HDRS) | $(OUT)/.deps
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(SRC_INCLUDES) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_SYMCACHE_SRCS) -o $@

# The recorder's readers of the files tracked processes map (symbols.c,
# unwind_table.c, elf_needed.c through mapped_file.c: a program chooses what they hold).
FUZZ_MAPPED_FILE_SRCS := tests/fuzz/fuzz_mapped_file.c src/inspect/mapped_file.c src/inspect/elf_needed.c \
	src/format/open_regular.c src/inspect/symbols.c src/inspect/unwind_table.c
$(OUT)/fuzz/fuzz_mapped_file: $(FUZZ_MAPPED_FILE_SRCS) $(SRC_HDRS) | $(OUT)/.deps
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(SRC_INCLUDES) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_MAPPED_FILE_SRCS) -lelf -ldw -o $@

# The reading of a tracked program's in-process ring (memory it writes as it
# likes), the same way: the real fast_reader.c, with a checking pipeline.
FUZZ_DRAIN_SRCS := tests/fuzz/fuzz_drain.c src/inspect/fast_reader.c src/format/schema.c
$(OUT)/fuzz/fuzz_drain: $(FUZZ_DRAIN_SRCS) $(SRC_HDRS) | $(OUT)/.deps
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(SRC_INCLUDES) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_DRAIN_SRCS) -o $@

fuzz: $(OUT)/fuzz/fuzz_reader $(OUT)/fuzz/fuzz_symcache $(OUT)/fuzz/fuzz_mapped_file $(OUT)/fuzz/fuzz_drain
	$(Q)mkdir -p $(OUT)/fuzz/corpus $(OUT)/fuzz/corpus_symcache $(OUT)/fuzz/corpus_mapped_file \
		$(OUT)/fuzz/corpus_drain
	$(Q)cd $(OUT)/fuzz && ./fuzz_reader -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 corpus $(CURDIR)/tests/fuzz/seeds
	$(Q)cd $(OUT)/fuzz && ./fuzz_symcache -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 corpus_symcache $(CURDIR)/tests/fuzz/seeds_symcache
	$(Q)cd $(OUT)/fuzz && ./fuzz_mapped_file -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 corpus_mapped_file $(CURDIR)/tests/fuzz/seeds_mapped_file
	$(Q)cd $(OUT)/fuzz && ./fuzz_drain -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 corpus_drain $(CURDIR)/tests/fuzz/seeds_drain

# The symbolizer on ELF files anyone may have written (the binaries an
# artifact names), the same way; its seeds are compiled from
# tests/fuzz/seeds_symtab/seed.c: with DWARF, stripped, a shared object.
FUZZ_SYMTAB_SRCS := tests/fuzz/fuzz_symtab.c src/format/open_regular.c src/util/as_user.c \
	src/util/hash_index.c \
	$(addprefix src/analyze/,symbolize.c symtab.c objfile.c symcache.c intern.c)
$(OUT)/fuzz/fuzz_symtab: $(FUZZ_SYMTAB_SRCS) $(SRC_HDRS) | $(OUT)/.deps
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(SRC_INCLUDES) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(FUZZ_SYMTAB_SRCS) -ldw -lelf -lz -lstdc++ -o $@
$(OUT)/fuzz/seeds_symtab/stamp: tests/fuzz/seeds_symtab/seed.c | $(OUT)/.deps
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O2 -g $< -o $(dir $@)debug
	$(Q)$(CC) -O2 -s $< -o $(dir $@)stripped
	$(Q)$(CC) -O1 -g -shared -fPIC $< -o $(dir $@)shared.so
	$(Q)touch $@
.PHONY: fuzz-symtab
fuzz-symtab: $(OUT)/fuzz/fuzz_symtab $(OUT)/fuzz/seeds_symtab/stamp
	$(Q)mkdir -p $(OUT)/fuzz/corpus_symtab
	$(Q)cd $(OUT)/fuzz && LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan_symtab.supp \
		./fuzz_symtab -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 corpus_symtab seeds_symtab
fuzz: fuzz-symtab

# --- as a system tool: man page, install, uninstall -----------------------
# The manual, memtrack(1), is written in scdoc (docs/memtrack.1.scd).  Its
# date is that of the last commit of the source, so a rebuild is identical;
# .nh after .TH: no hyphenation, which would split option and key names.
.PHONY: man man-check uninstall
MAN_PAGE  := $(OUT)/memtrack.1
MAN_EPOCH := $(shell git log -1 --format=%ct -- docs/memtrack.1.scd 2>/dev/null)
$(MAN_PAGE): docs/memtrack.1.scd Makefile src/kernel/kernel_features.h | $(OUT)/.deps
	$(call msg,SCDOC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)sed -e 's/@VERSION@/$(VERSION)/g' -e 's/@KERNEL_FLOOR@/$(KERNEL_FLOOR)/g' $< > $@.scd
	$(Q)$(if $(MAN_EPOCH),SOURCE_DATE_EPOCH=$(MAN_EPOCH)) scdoc < $@.scd > $@.roff
	$(Q)sed '/^\.TH /a .nh' $@.roff > $@ && rm -f $@.scd $@.roff

man: $(MAN_PAGE)

# Any warning of man (groff) about the page fails, e.g. a bad request or a
# line that cannot be broken at 80 columns.
man-check: $(MAN_PAGE)
	$(call msg,MANCHECK,$<)
	$(Q)warn=$$(MANWIDTH=80 man --warnings -l $< 2>&1 >/dev/null); \
		if [ -n "$$warn" ]; then printf '%s\n' "$$warn" >&2; exit 1; fi
check: man-check
# the integration tests read the built page (tests/integration/test_help.py)
test integration-test: $(MAN_PAGE)

# Bash completion (scripts/bash-completion/memtrack): it has no #! line, so
# shellcheck's file list (SH_FILES) misses it.
.PHONY: shellcheck-completion
shellcheck: shellcheck-completion
shellcheck-completion:
	$(call msg,SHCHECK,scripts/bash-completion/memtrack)
	$(Q)shellcheck -s bash scripts/bash-completion/memtrack

# Every file `make install` puts under $(DESTDIR)$(PREFIX), as MODE:SOURCE:DEST
# (DEST relative to the prefix): uninstall removes exactly these.  LIBDIR:
# where libmemtrack-ctl and its .pc go (the deb: lib/<multiarch triplet>);
# libmemtrack-fast.so stays in lib/memtrack, where memtrack looks for it.
LIBDIR ?= lib
DOC_FILES := README.md docs/FORMAT.md docs/METRICS.md docs/CONTROL.md docs/DESIGN.md
INSTALL_FILES = 0755:$(OUT)/memtrack:bin/memtrack \
	0644:$(OUT)/libmemtrack-fast.so:lib/memtrack/libmemtrack-fast.so \
	0644:include/memtrack-ctl.h:include/memtrack-ctl.h \
	0644:$(OUT)/libmemtrack-ctl.a:$(LIBDIR)/libmemtrack-ctl.a \
	0644:$(OUT)/memtrack-ctl.pc:$(LIBDIR)/pkgconfig/memtrack-ctl.pc \
	0644:$(MAN_PAGE):share/man/man1/memtrack.1 \
	0644:scripts/bash-completion/memtrack:share/bash-completion/completions/memtrack \
	0644:scripts/systemd/memtrack.service:lib/systemd/system/memtrack.service \
	0644:scripts/systemd/memtrack.socket:lib/systemd/system/memtrack.socket \
	$(foreach f,$(DOC_FILES),0644:$(f):share/doc/memtrack/$(notdir $(f)))

# memtrack-ctl.pc gets the prefix and libdir it is installed under (it was
# built with the prefix make was first run with).
install: all $(MAN_PAGE)
	$(Q)for f in $(INSTALL_FILES); do \
		mode=$${f%%:*}; rest=$${f#*:}; dst="$(DESTDIR)$(PREFIX)/$${rest#*:}"; \
		printf '  %-8s %s\n' INSTALL "$$dst"; \
		install -D -m "$$mode" "$${rest%%:*}" "$$dst" || exit 1; \
	done
	$(Q)sed -i -e 's|^prefix=.*|prefix=$(PREFIX)|' -e 's|^libdir=.*|libdir=$${prefix}/$(LIBDIR)|' \
		"$(DESTDIR)$(PREFIX)/$(LIBDIR)/pkgconfig/memtrack-ctl.pc"

# Removes what install installed (the same PREFIX and DESTDIR), and the two
# directories only memtrack uses; shared ones (bin, share/man/man1, ...)
# stay, even when empty.
uninstall:
	$(Q)for f in $(INSTALL_FILES); do \
		dst="$(DESTDIR)$(PREFIX)/$${f##*:}"; \
		if [ -e "$$dst" ] || [ -L "$$dst" ]; then printf '  %-8s %s\n' RM "$$dst"; fi; \
		rm -f "$$dst" || exit 1; \
	done
	$(Q)for d in lib/memtrack share/doc/memtrack; do \
		if [ -d "$(DESTDIR)$(PREFIX)/$$d" ]; then rmdir "$(DESTDIR)$(PREFIX)/$$d" || exit 1; fi; \
	done

# The Debian package, $(OUT)/memtrack_VERSION_ARCH.deb: make install with
# PREFIX=/usr into $(OUT)/deb/debian/memtrack, shaped and packed by
# scripts/deb/build.sh (Depends from dpkg-shlibdeps, package dpkg-dev).
# `apt-get install ./build/memtrack_*.deb` installs it, with what it depends on.
.PHONY: deb
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_LIBDIR = lib/$(shell dpkg-architecture -qDEB_HOST_MULTIARCH)
DEB_MAINTAINER ?= $(PROJECT_NAME) maintainers <$(PROJECT_CONTACT)>
deb: all $(MAN_PAGE)
	$(Q)rm -rf $(OUT)/deb $(OUT)/memtrack_*.deb
	$(Q)$(MAKE) --no-print-directory install PREFIX=/usr LIBDIR=$(DEB_LIBDIR) \
		DESTDIR=$(abspath $(OUT))/deb/debian/memtrack >/dev/null
	$(Q)scripts/deb/build.sh $(OUT)/deb "$(VERSION)" "$(DEB_ARCH)" "$(DEB_MAINTAINER)" \
		"$(DEB_LIBDIR)" $(OUT)/memtrack_$(VERSION)_$(DEB_ARCH).deb "$(KERNEL_FLOOR)"

clean:
	rm -rf $(OUT)

-include $(wildcard $(OUT)/obj/*/*.d)
