# Makefile - builds librota.so, rotad, the rota tool, simcuda and the tests into an out-of-tree build folder.
#
# Layout of the build (BUILD defaults to build/, or build-$(SANITIZER)/):
#   $(B)/lib   libcuda.so.1 (simcuda), libcuda.so, librota.so
#   $(B)/bin   rotad, rota, simcuda-stat, ...
#   $(B)/tests TAP programs, mirroring tests/
#   $(B)/obj   objects and dependency files
#
# Every module directory is globbed, so adding a file needs no Makefile edit:
#   tools/simcuda/*.c        -> libcuda.so.1 (except *-main.c, which are programs linked with it)
#   shim/*.c                 -> librota.so
#   runtime/lib/*.c          -> librota-common.a, linked into librota.so, rotad and the rota tool
#   runtime/*.c              -> rotad (runtime/rotad-main.c holds main)
#   tools/rota/*.c           -> the rota tool
#   tests/tap/*.c            -> libtap.a
#   tests/<dir>/*-t.c        -> $(B)/tests/<dir>/*-t (one TAP program per module)
#   tests/**/*.t             -> shell TAP tests, run in place
.SUFFIXES:
# Keep intermediate objects (test objects are built through a pattern chain) so rebuilds stay incremental.
.SECONDARY:

PREFIX    ?= /usr/local
BINDIR    ?= $(PREFIX)/bin
LIBDIR    ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
# systemd looks for units under /usr/local/lib/systemd/system too; packagers set /usr/lib/systemd/system.
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
DESTDIR   ?=
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
# PTX for the oldest architecture CUDA 13 supports; the driver JITs it for newer chips (H100/H200 included).
PTX_ARCH  ?= compute_75
SANITIZER ?=
WERROR    ?= 1

ifeq ($(SANITIZER),)
  B ?= build
else
  B ?= build-$(SANITIZER)
endif

# Every goal but clean needs the toolkit (make clean works on a machine without it).
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
  ifeq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
    $(error cuda.h not found under CUDA_HOME=$(CUDA_HOME): install the CUDA toolkit or run make CUDA_HOME=/path/to/cuda)
  endif
endif

CC      ?= cc
ROTA_WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
ifeq ($(WERROR),1)
  ROTA_WARN += -Werror
endif
ROTA_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -pthread -MMD -MP $(ROTA_WARN) \
               -I$(CUDA_HOME)/include -I. -I$(B)/gen
ROTA_LDFLAGS := -pthread
ifneq ($(SANITIZER),)
  ifeq ($(filter $(SANITIZER),address undefined thread),)
    $(error SANITIZER must be address, undefined or thread, not '$(SANITIZER)')
  endif
  ROTA_CFLAGS += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer
  ROTA_LDFLAGS += -fsanitize=$(SANITIZER)
  ifeq ($(SANITIZER),undefined)
    ROTA_CFLAGS += -fno-sanitize-recover=all
  endif
endif
# Shared libraries refuse undefined symbols, except under sanitizers: clang leaves the sanitizer runtime's
# symbols to the executable that loads the library.
ZDEFS := $(if $(SANITIZER),,-Wl,-z,defs)
# User CFLAGS/LDFLAGS are appended, never replaced.
ALL_CFLAGS  = $(ROTA_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(ROTA_LDFLAGS) $(LDFLAGS)

O := $(B)/obj

# ---- sources ---------------------------------------------------------------------------------------------
SIM_MAIN_SRC := $(wildcard tools/simcuda/*-main.c)
SIM_SRC      := $(filter-out $(SIM_MAIN_SRC),$(wildcard tools/simcuda/*.c))
SHIM_SRC     := $(wildcard shim/*.c)
COMMON_SRC   := $(wildcard runtime/lib/*.c)
ROTAD_SRC    := $(wildcard runtime/*.c)
ROTA_SRC     := $(wildcard tools/rota/*.c)
TOOL_SRC     := $(wildcard tools/*.c)
TAP_SRC      := $(wildcard tests/tap/*.c)
TEST_SRC     := $(wildcard tests/*/*-t.c)
TEST_SH      := $(wildcard tests/*/*.t)
KERNEL_CU    := $(wildcard tools/kernels/*.cu)

obj = $(patsubst %.c,$(O)/%.o,$(1))

SIMCUDA   := $(B)/lib/libcuda.so.1
SIMNVML   := $(B)/lib/libnvidia-ml.so.1
LIBROTA   := $(B)/lib/librota.so
COMMON_A  := $(B)/obj/librota-common.a
TAP_A     := $(B)/obj/libtap.a
KERNELS_C := $(B)/gen/kernels-ptx.c
KERNELS_PTX_O := $(O)/gen/kernels-ptx.o
# what a program that runs the kernels links: the PTX, and the loader that lowers its version for older drivers
KERNELS_O := $(KERNELS_PTX_O) $(O)/tools/kernels/load.o
PROGS     := $(patsubst tools/simcuda/%-main.c,$(B)/bin/%,$(SIM_MAIN_SRC)) \
             $(if $(ROTAD_SRC),$(B)/bin/rotad) $(if $(ROTA_SRC),$(B)/bin/rota) \
             $(patsubst tools/%.c,$(B)/bin/%,$(TOOL_SRC)) \
             $(patsubst tools/bench/%.c,$(B)/bin/%,$(wildcard tools/bench/*.c))
TESTS     := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))

.PHONY: all test install uninstall clean demo bench fuzz
all: $(SIMCUDA) $(B)/lib/libcuda.so $(SIMNVML) $(if $(SHIM_SRC),$(LIBROTA)) $(PROGS) $(TESTS)

# ---- objects ---------------------------------------------------------------------------------------------
$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---- simcuda: our libcuda.so.1 ---------------------------------------------------------------------------
# simcuda shares only the strict parser and the PTX versions (ptxver) with rota; its programs (simcuda-stat)
# link its objects directly, since the library exports nothing but the cu* names.
SIM_OBJ := $(call obj,$(SIM_SRC)) $(O)/runtime/lib/parse.o $(O)/runtime/lib/ptxver.o
$(SIMCUDA): $(SIM_OBJ) tools/simcuda/simcuda.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,--version-script=tools/simcuda/simcuda.map $(ZDEFS) \
	    -Wl,-Bsymbolic-functions -o $@ $(SIM_OBJ) $(ALL_LDFLAGS) -ldl -lrt -lm
$(B)/lib/libcuda.so: $(SIMCUDA)
	ln -sf libcuda.so.1 $@
# simcuda's libnvidia-ml.so.1 (tools/simnvml): NVML on the same simulated node, with its own copy of the model.
NVML_OBJ  := $(call obj,$(wildcard tools/simnvml/*.c)) $(SIM_OBJ)
$(SIMNVML): $(NVML_OBJ) tools/simnvml/nvml.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,--version-script=tools/simnvml/nvml.map $(ZDEFS) \
	    -Wl,-Bsymbolic-functions -o $@ $(NVML_OBJ) $(ALL_LDFLAGS) -ldl -lrt -lm
$(B)/bin/%: $(O)/tools/simcuda/%-main.o $(SIM_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SIM_OBJ) $(ALL_LDFLAGS) -ldl -lrt -lm

# ---- librota.so ------------------------------------------------------------------------------------------
$(COMMON_A): $(call obj,$(COMMON_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(LIBROTA): $(call obj,$(SHIM_SRC)) $(COMMON_A) shim/librota.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--version-script=shim/librota.map $(ZDEFS) \
	    -o $@ $(call obj,$(SHIM_SRC)) $(COMMON_A) $(ALL_LDFLAGS) -ldl -lrt

# ---- rotad and the rota tool ------------------------------------------------------------------------------
# GNU libmicrohttpd serves rotad --metrics-listen (runtime/metrics.c); without it rotad builds and refuses the option.
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
ifneq ($(MHD_LIBS),)
$(O)/runtime/metrics.o: ROTA_CFLAGS += -DROTA_HAVE_MICROHTTPD $(shell pkg-config --cflags libmicrohttpd)
endif
$(B)/bin/rotad: $(call obj,$(ROTAD_SRC)) $(COMMON_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(call obj,$(ROTAD_SRC)) $(COMMON_A) $(ALL_LDFLAGS) $(MHD_LIBS) -lrt -lm
$(B)/bin/rota: $(call obj,$(ROTA_SRC)) $(COMMON_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(call obj,$(ROTA_SRC)) $(COMMON_A) $(ALL_LDFLAGS) -lrt -lm
# Stand-alone tools in tools/*.c (workloads) and tools/bench/*.c (benchmarks) are Driver-API programs linked with
# -lcuda. Built where no CUDA driver is installed (SIMCUDA_RPATH=auto: ldconfig knows no libcuda.so.1), they carry
# a RUNPATH to simcuda beside them (build/lib; PREFIX/lib/rota from PREFIX/libexec/rota), so they run without
# LD_LIBRARY_PATH. A RUNPATH comes before the system's libraries, so where a driver is installed they get none
# and use it; a build carried to a GPU machine must be made there, or with SIMCUDA_RPATH=0.
SIMCUDA_RPATH ?= auto
ifeq ($(SIMCUDA_RPATH),auto)
  override SIMCUDA_RPATH := $(if $(shell PATH="$$PATH:/sbin:/usr/sbin" ldconfig -p 2>/dev/null | grep -F 'libcuda.so.1 '),0,1)
endif
comma := ,
TOOL_RPATH := $(if $(filter 1,$(SIMCUDA_RPATH)),-Wl$(comma)--enable-new-dtags$(comma)-rpath$(comma)'$$ORIGIN/../lib:$$ORIGIN/../../lib/rota')
$(B)/bin/%: $(O)/tools/%.o $(KERNELS_O) $(COMMON_A) $(SIMCUDA)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(KERNELS_O) $(COMMON_A) $(ALL_LDFLAGS) $(TOOL_RPATH) -L$(B)/lib -lcuda -ldl -lrt -lm
$(B)/bin/%: $(O)/tools/bench/%.o $(KERNELS_O) $(COMMON_A) $(SIMCUDA)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(KERNELS_O) $(COMMON_A) $(ALL_LDFLAGS) $(TOOL_RPATH) -L$(B)/lib -lcuda -ldl -lrt -lm

# ---- kernels: CUDA C -> PTX -> a C array embedded in test programs ----------------------------------------
$(B)/gen/kernels.ptx: $(KERNEL_CU)
	@mkdir -p $(dir $@)
	@test -x $(NVCC) || { echo "nvcc not found at $(NVCC): set CUDA_HOME or NVCC" >&2; exit 1; }
	$(NVCC) -ptx -arch=$(PTX_ARCH) -o $@ $(KERNEL_CU)
$(B)/bin/embed: scripts/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -o $@ $<
$(KERNELS_C): $(B)/gen/kernels.ptx $(B)/bin/embed
	$(B)/bin/embed rota_kernels_ptx $< > $@
$(KERNELS_PTX_O): $(KERNELS_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
# A real nvcc fatbin (cubin + PTX) of tests/kernels/*.cu, embedded in the tests as rota_foreign_fatbin: what
# cudart hands cuLibraryLoadData (tests/shim/library-t.c).
FATBIN_ARCH ?= -gencode arch=compute_75,code=[sm_75,compute_75]
FATBIN_O := $(O)/gen/foreign-fatbin.o
$(B)/gen/foreign.fatbin: $(wildcard tests/kernels/*.cu)
	@mkdir -p $(dir $@)
	@test -x $(NVCC) || { echo "nvcc not found at $(NVCC): set CUDA_HOME or NVCC" >&2; exit 1; }
	$(NVCC) -fatbin $(FATBIN_ARCH) -o $@ $^
$(B)/gen/foreign-fatbin.c: $(B)/gen/foreign.fatbin $(B)/bin/embed
	$(B)/bin/embed rota_foreign_fatbin $< > $@
$(FATBIN_O): $(B)/gen/foreign-fatbin.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---- tests -----------------------------------------------------------------------------------------------
$(TAP_A): $(call obj,$(TAP_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
# Every TAP program links libtap, the embedded kernels and the common library; per-directory extras below.
# Test programs link the simcuda libcuda at build time; at run time LD_LIBRARY_PATH picks the driver, so the
# same binaries run on a real GPU.
TEST_LIBS_clients := -L$(B)/lib -lcuda
TEST_LIBS_simcuda := -L$(B)/lib -lcuda
TEST_LIBS_shim    := -L$(B)/lib -lcuda
TEST_LIBS_lib     :=
TEST_LIBS_runtime := $(filter-out $(O)/runtime/rotad-main.o,$(call obj,$(ROTAD_SRC))) $(MHD_LIBS)
TEST_DEPS_runtime := $(filter-out -l%,$(TEST_LIBS_runtime))
# The rota tool's rates (tests/tools/sample-t).
TEST_LIBS_tools   := $(O)/tools/rota/sample.o
TEST_DEPS_tools   := $(TEST_LIBS_tools)
# The device-model unit test calls simcuda internals, which libcuda.so.1 does not export: link the objects.
TEST_LIBS_simcuda/node-t := $(SIM_OBJ)
TEST_DEPS_simcuda/node-t := $(SIM_OBJ)
# memq-t's stand-in for PyTorch's libc10_cuda.so (ROTA_MEM_RETRY=auto looks for it by name and on the stack).
FAKE_C10 := $(B)/tests/fake/libc10_cuda.so
$(FAKE_C10): tests/runtime/fake-c10.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libc10_cuda.so -o $@ $< $(ALL_LDFLAGS) -ldl
TEST_DEPS_runtime/memq-t := $(FAKE_C10)
.SECONDEXPANSION:
# The test's directory name (tests/runtime/x-t -> runtime); a function, since a literal % in a pattern
# rule's prerequisites would be replaced by the stem.
test_dir = $(patsubst %/,%,$(dir $(1)))
$(B)/tests/%: $(O)/tests/%.o $(TAP_A) $(KERNELS_O) $(FATBIN_O) $(COMMON_A) $(SIMCUDA) \
              $$(TEST_DEPS_$$(call test_dir,$$*)) $$(TEST_DEPS_$$*)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(TEST_LIBS_$*) $(TEST_LIBS_$(call test_dir,$*)) $(KERNELS_O) $(FATBIN_O) $(TAP_A) \
	    $(COMMON_A) $(ALL_LDFLAGS) -ldl -lrt -lm

# Tests find build outputs through these variables (never by guessing paths).
export ROTA_BUILD := $(abspath $(B))
export ROTA_SRCDIR := $(abspath .)
export ROTA_SANITIZER := $(SANITIZER)
# The shared sanitizer runtime that an uninstrumented program (sh, cat) must preload before librota.so, where
# librota.so does not load one itself: clang links its runtimes statically into instrumented programs and leaves
# librota.so's references to them undefined. Empty otherwise (gcc's librota.so names its libasan/libtsan).
SAN_RT_address   := asan
SAN_RT_thread    := tsan
SAN_RT_undefined := ubsan_standalone
SAN_CLANG := $(if $(SANITIZER),$(findstring clang,$(shell $(CC) --version 2>/dev/null)))
export ROTA_SANITIZER_RT := $(if $(SAN_CLANG),$(shell $(CC) -print-file-name=libclang_rt.$(SAN_RT_$(SANITIZER))-$$($(CC) -dumpmachine | cut -d- -f1).so))
# ThreadSanitizer refuses threads started in a child forked from a threaded process unless told otherwise; the
# fork-without-exec tests (client-t, lifecycle-t) do exactly that, and TSan keeps checking in the child.
ifeq ($(SANITIZER),thread)
export TSAN_OPTIONS := die_after_fork=0$(if $(TSAN_OPTIONS),:$(TSAN_OPTIONS))
endif
test: all
	LD_LIBRARY_PATH=$(abspath $(B))/lib prove -f -e '' $(sort $(TESTS)) $(sort $(TEST_SH))

# ---- fuzzing: the libFuzzer harnesses tests/fuzz/fuzz-*.c (clang); make test runs each for 10 s (fuzz.t) ----
FUZZ_SECONDS ?= 300
fuzz:
	FUZZ_T_SECONDS=$(FUZZ_SECONDS) ROTA_SRCDIR=$(CURDIR) tests/fuzz/fuzz.t

# ---- the demo and the benchmark suite: scripts/bench writes results/<timestamp>/ (report.md, plots, traces) --
DEMO_FLAGS  ?=
BENCH_FLAGS ?= --scale 3
BENCH_MIXES ?= one-gpu four-gpu
demo: all
	scripts/demo $(DEMO_FLAGS)
bench: all
	scripts/bench --build $(abspath $(B)) $(BENCH_FLAGS) $(BENCH_MIXES)

# ---- install / uninstall / clean ------------------------------------------------------------------------
# The user's programs (rotad, rota) go to BINDIR and librota.so to LIBDIR, where rota run finds it
# (BINDIR/../lib); simcuda goes to LIBDIR/rota, off the library search path, so it never shadows a real driver;
# the benchmark and simulator tools go to LIBEXECDIR/rota.
USER_PROGS := $(filter $(B)/bin/rotad $(B)/bin/rota,$(PROGS))
AUX_PROGS  := $(filter-out $(USER_PROGS),$(PROGS))
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/rota $(DESTDIR)$(LIBEXECDIR)/rota
	$(if $(wildcard $(LIBROTA)),install -m 0755 $(LIBROTA) $(DESTDIR)$(LIBDIR)/librota.so)
	for p in $(USER_PROGS); do install -m 0755 $$p $(DESTDIR)$(BINDIR)/; done
	for p in $(AUX_PROGS); do install -m 0755 $$p $(DESTDIR)$(LIBEXECDIR)/rota/; done
	install -m 0755 $(SIMCUDA) $(DESTDIR)$(LIBDIR)/rota/libcuda.so.1
	ln -sf libcuda.so.1 $(DESTDIR)$(LIBDIR)/rota/libcuda.so
	install -m 0755 $(SIMNVML) $(DESTDIR)$(LIBDIR)/rota/libnvidia-ml.so.1
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/rotad.service.in > $(DESTDIR)$(SYSTEMDUNITDIR)/rotad.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/rotad.service
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/librota.so $(DESTDIR)$(LIBDIR)/rota/libcuda.so.1 $(DESTDIR)$(LIBDIR)/rota/libcuda.so
	rm -f $(DESTDIR)$(LIBDIR)/rota/libnvidia-ml.so.1
	rm -f $(foreach p,$(USER_PROGS),$(DESTDIR)$(BINDIR)/$(notdir $(p)))
	rm -f $(foreach p,$(AUX_PROGS),$(DESTDIR)$(LIBEXECDIR)/rota/$(notdir $(p)))
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/rotad.service
	-rmdir $(DESTDIR)$(LIBDIR)/rota $(DESTDIR)$(LIBEXECDIR)/rota 2>/dev/null
clean:
	rm -rf build build-address build-undefined build-thread $(B)

-include $(shell find $(O) -name '*.d' 2>/dev/null)

# ==== Slurm: the SPANK plugin and the cluster benchmark (contrib/slurm, scripts/bench-cluster) ================
# The plugin is built where Slurm's spank.h is (Debian: libslurm-dev), and skipped otherwise. It is loaded into
# srun, sbatch and slurmstepd, which are not instrumented: it is built without SANITIZER flags, from its own
# sources (with the shared parsers), and without -z defs (they resolve its spank_* references when they load it).
SPANK_H   ?= /usr/include/slurm/spank.h
SPANK_SO  := $(B)/lib/rota-spank.so
SPANK_SRC := contrib/slurm/rota-spank.c runtime/lib/parse.c runtime/lib/prio.c runtime/lib/preload.c \
             runtime/lib/grant.c runtime/lib/conn.c runtime/lib/proto.c runtime/lib/sockpath.c
ifneq ($(wildcard $(SPANK_H)),)
all: $(SPANK_SO)
endif
$(SPANK_SO): $(SPANK_SRC) runtime/lib/parse.h runtime/lib/prio.h runtime/lib/preload.h runtime/lib/grant.h runtime/abi.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -fPIC $(ROTA_WARN) -I. -I$(CUDA_HOME)/include $(CFLAGS) \
	    -DROTA_SPANK_LIBROTA='"$(LIBDIR)/librota.so"' -shared -o $@ $(SPANK_SRC) $(LDFLAGS) -lm
install-slurm: $(SPANK_SO)
	install -d $(DESTDIR)$(LIBDIR)/slurm
	install -m 0755 $(SPANK_SO) $(DESTDIR)$(LIBDIR)/slurm/rota-spank.so
BENCH_CLUSTER_FLAGS ?=
bench-cluster: all
	scripts/bench-cluster --build $(abspath $(B)) $(BENCH_CLUSTER_FLAGS)
.PHONY: install-slurm bench-cluster
