# memtrack - build, test, demo and benchmarks.  `make V=1` prints full commands.
.DELETE_ON_ERROR:
.SECONDARY:

OUT      := build
ARCH     := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
VERSION  := 0.1.0

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror=undef -Wmissing-field-initializers \
	    -Wno-unused-parameter -D_GNU_SOURCE -DMT_VERSION='"$(VERSION)"' \
	    -I$(OUT) $(SRC_INCLUDES) -MMD -MP
LDLIBS   := -lbpf -lelf -lz -lzstd -lpthread -lm

# Link order matters to bpftool 7.1's linker: ring.bpf.c (which defines the
# shared maps) first, then the objects that define no map of their own, then
# the rest; other orders fail in `gen skeleton` with "map relo failed".
BPF_SRCS := $(addprefix src/bpf/,ring.bpf.c proc.bpf.c rss.bpf.c alloc.bpf.c vm.bpf.c phys.bpf.c)
BPF_OBJS := $(patsubst src/bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
# src/ is split by phase.  The pure phases (format, pipeline, analyze) go
# into libmemtrack-core.a, which builds without clang, bpftool or a BTF
# kernel and is all the unit tests link; record/ and cli/ need the skeleton.
SRC_DIRS  := format pipeline analyze record cli
SRC_INCLUDES := -Isrc $(addprefix -Isrc/,$(SRC_DIRS))
CORE_SRCS := $(wildcard $(addsuffix /*.c,$(addprefix src/,format pipeline analyze)))
CORE_OBJS := $(patsubst src/%.c,$(OUT)/obj/%.o,$(CORE_SRCS))
SKEL_SRCS := $(filter-out src/cli/main.c,$(wildcard src/record/*.c src/cli/*.c))
SKEL_OBJS := $(patsubst src/%.c,$(OUT)/obj/%.o,$(SKEL_SRCS))
SRC_HDRS  := src/event.h $(wildcard src/*/*.h)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRCS))
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURE_BINS := $(patsubst tests/fixtures/%.c,$(OUT)/fixtures/%,$(FIXTURE_SRCS))
# tests/fixtures/lib/NAME.c -> $(OUT)/fixtures/libNAME.so (preloaded or linked by fixtures)
FIXTURE_LIB_SRCS := $(wildcard tests/fixtures/lib/*.c)
FIXTURE_LIBS := $(patsubst tests/fixtures/lib/%.c,$(OUT)/fixtures/lib%.so,$(FIXTURE_LIB_SRCS))
FIXTURE_BINS += $(FIXTURE_LIBS)
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(OUT)/bench/%,$(BENCH_SRCS))

# deferred (=): clang may only exist once the bootstrap has run
CLANG_BPF_SYS_INCLUDES = $(shell $(CLANG) -v -E - </dev/null 2>&1 \
	| sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }')

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.PHONY: all demo test unit-test integration-test bench bench-pipeline clean install deps

all: $(OUT)/.deps $(OUT)/memtrack

# Installs the Debian packages the build needs (as root), or says which.
$(OUT)/.deps: scripts/bootstrap.sh
	$(Q)mkdir -p $(OUT)
	$(Q)scripts/bootstrap.sh
	$(Q)touch $@

deps:
	$(Q)scripts/bootstrap.sh

$(OUT)/vmlinux.h: | $(OUT)/.deps
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(OUT)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(OUT)/bpf/%.bpf.o: src/bpf/%.bpf.c src/event.h $(wildcard src/bpf/*.bpf.h) $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) -g -O2 -Wall -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -I$(OUT) -Isrc \
		$(CLANG_BPF_SYS_INCLUDES) -c $< -o $@

$(OUT)/memtrack.bpf.o: $(BPF_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/memtrack.skel.h: $(OUT)/memtrack.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memtrack_bpf > $@

$(CORE_OBJS): $(OUT)/obj/%.o: src/%.c | $(OUT)/.deps
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(SKEL_OBJS) $(OUT)/obj/cli/main.o: $(OUT)/obj/%.o: src/%.c $(OUT)/memtrack.skel.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/libmemtrack-core.a: $(CORE_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(OUT)/libmemtrack.a: $(SKEL_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(OUT)/memtrack: $(OUT)/obj/cli/main.o $(OUT)/libmemtrack.a $(OUT)/libmemtrack-core.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# Unit tests link the pure library only (no BPF, no skeleton).
$(OUT)/tests/%: tests/unit/%.c tests/harness.h $(wildcard tests/unit/*.h) $(SRC_HDRS) $(OUT)/libmemtrack-core.a
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -Itests -Itests/unit $< $(OUT)/libmemtrack-core.a $(LDLIBS) -o $@

# Fixtures are built at -O0 so no allocation is optimised away.
FIXTURE_LIBS_pthreads := -lpthread
$(OUT)/fixtures/%: tests/fixtures/%.c tests/fixtures/marker.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O0 -g -std=gnu11 -D_GNU_SOURCE -Wall $< -o $@ -lpthread $(FIXTURE_LIBS_$*)

$(OUT)/fixtures/lib%.so: tests/fixtures/lib/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -std=gnu11 -D_GNU_SOURCE -Wall -fPIC -shared $< -o $@ -ldl

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
	$(Q)tests/run.sh --unit

integration-test: all $(FIXTURE_BINS)
	$(Q)tests/run.sh --integration

# bench_report: `memtrack report` on a 50-million-event artifact, one CPU.
bench-pipeline: all $(OUT)/bench/bench_pipeline $(OUT)/bench/bench_report
	$(Q)$(OUT)/bench/bench_pipeline
	$(Q)$(OUT)/bench/bench_report -m $(OUT)/memtrack

bench: all $(FIXTURE_BINS)
	$(Q)bench/run.sh

install: all
	install -D -m 0755 $(OUT)/memtrack $(DESTDIR)/usr/local/bin/memtrack

clean:
	rm -rf $(OUT)

-include $(wildcard $(OUT)/obj/*/*.d)
