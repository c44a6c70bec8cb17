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

# Building needs the toolkit; cleaning, help, the manual pages and installing what is already built do not
# (sudo make install drops CUDA_HOME from the environment).
NO_TOOLKIT_GOALS := clean help man install uninstall install-slurm install-kubernetes k8s-venv
ifeq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
  ifneq ($(filter-out $(NO_TOOLKIT_GOALS),$(or $(MAKECMDGOALS),all)),)
    $(error cuda.h not found under CUDA_HOME=$(CUDA_HOME): install the CUDA toolkit or run make CUDA_HOME=/path/to/cuda)
  endif
  ifneq ($(filter install,$(MAKECMDGOALS)),)
    ifeq ($(wildcard $(B)/bin/rota),)
      $(error nothing built in $(B)/ to install, and cuda.h not found under CUDA_HOME=$(CUDA_HOME): run make CUDA_HOME=/path/to/cuda first)
    endif
  endif
endif

CC      ?= cc
# Quiet build: one line per target ("  CC  build/obj/x.o"); make V=1 prints the full commands.
V ?= 0
ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
  quiet = @
else ifeq ($(V),0)
  quiet = @printf '  %-5s %s\n' '$(1)' '$@';
else
  quiet =
endif
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

.PHONY: all test install uninstall clean demo bench fuzz help man
all: $(SIMCUDA) $(B)/lib/libcuda.so $(SIMNVML) $(if $(SHIM_SRC),$(LIBROTA)) $(PROGS) $(TESTS)

# ---- objects ---------------------------------------------------------------------------------------------
$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call quiet,CC)$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---- simcuda: our libcuda.so.1 ---------------------------------------------------------------------------
# simcuda shares only the strict parser and the PTX versions (ptxver) with rota; its programs (simcuda-stat)
# link its objects directly, since the library exports nothing but the cu* names.
SIM_OBJ := $(call obj,$(SIM_SRC)) $(O)/runtime/lib/parse.o $(O)/runtime/lib/ptxver.o $(O)/runtime/lib/slice.o
$(SIMCUDA): $(SIM_OBJ) tools/simcuda/simcuda.map
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,--version-script=tools/simcuda/simcuda.map $(ZDEFS) \
	    -Wl,-Bsymbolic-functions -o $@ $(SIM_OBJ) $(ALL_LDFLAGS) -ldl -lrt -lm
$(B)/lib/libcuda.so: $(SIMCUDA)
	$(call quiet,LN)ln -sf libcuda.so.1 $@
# simcuda's libnvidia-ml.so.1 (tools/simnvml): NVML on the same simulated node, with its own copy of the model.
NVML_OBJ  := $(call obj,$(wildcard tools/simnvml/*.c)) $(SIM_OBJ)
$(SIMNVML): $(NVML_OBJ) tools/simnvml/nvml.map
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,--version-script=tools/simnvml/nvml.map $(ZDEFS) \
	    -Wl,-Bsymbolic-functions -o $@ $(NVML_OBJ) $(ALL_LDFLAGS) -ldl -lrt -lm
$(B)/bin/%: $(O)/tools/simcuda/%-main.o $(SIM_OBJ)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -o $@ $< $(SIM_OBJ) $(ALL_LDFLAGS) -ldl -lrt -lm

# ---- librota.so ------------------------------------------------------------------------------------------
$(COMMON_A): $(call obj,$(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(call quiet,AR)rm -f $@ && ar rcs $@ $^
$(LIBROTA): $(call obj,$(SHIM_SRC)) $(COMMON_A) shim/librota.map
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -shared -Wl,--version-script=shim/librota.map $(ZDEFS) \
	    -o $@ $(call obj,$(SHIM_SRC)) $(COMMON_A) $(ALL_LDFLAGS) -ldl -lrt

# ---- rotad and the rota tool ------------------------------------------------------------------------------
# GNU libmicrohttpd serves rotad --metrics-listen (runtime/metrics.c); without it rotad builds and refuses the option.
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
ifneq ($(MHD_LIBS),)
$(O)/runtime/metrics.o: ROTA_CFLAGS += -DROTA_HAVE_MICROHTTPD $(shell pkg-config --cflags libmicrohttpd)
endif
$(B)/bin/rotad: $(call obj,$(ROTAD_SRC)) $(COMMON_A)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -o $@ $(call obj,$(ROTAD_SRC)) $(COMMON_A) $(ALL_LDFLAGS) $(MHD_LIBS) -ldl -lrt -lm
$(B)/bin/rota: $(call obj,$(ROTA_SRC)) $(COMMON_A)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -o $@ $(call obj,$(ROTA_SRC)) $(COMMON_A) $(ALL_LDFLAGS) -lrt -lm
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
	$(call quiet,LINK)$(CC) -o $@ $< $(KERNELS_O) $(COMMON_A) $(ALL_LDFLAGS) $(TOOL_RPATH) -L$(B)/lib -lcuda -ldl -lrt -lm
$(B)/bin/%: $(O)/tools/bench/%.o $(KERNELS_O) $(COMMON_A) $(SIMCUDA)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -o $@ $< $(KERNELS_O) $(COMMON_A) $(ALL_LDFLAGS) $(TOOL_RPATH) -L$(B)/lib -lcuda -ldl -lrt -lm

# ---- kernels: CUDA C -> PTX -> a C array embedded in test programs ----------------------------------------
$(B)/gen/kernels.ptx: $(KERNEL_CU)
	@mkdir -p $(dir $@)
	@test -x $(NVCC) || { echo "nvcc not found at $(NVCC): set CUDA_HOME or NVCC" >&2; exit 1; }
	$(call quiet,NVCC)$(NVCC) -ptx -arch=$(PTX_ARCH) -o $@ $(KERNEL_CU)
$(B)/bin/embed: scripts/embed.c
	@mkdir -p $(dir $@)
	$(call quiet,CC)$(CC) -std=c11 -O2 -o $@ $<
$(KERNELS_C): $(B)/gen/kernels.ptx $(B)/bin/embed
	$(call quiet,GEN)$(B)/bin/embed rota_kernels_ptx $< > $@
$(KERNELS_PTX_O): $(KERNELS_C)
	@mkdir -p $(dir $@)
	$(call quiet,CC)$(CC) $(ALL_CFLAGS) -c $< -o $@
# A real nvcc fatbin (cubin + PTX) of tests/kernels/*.cu, embedded in the tests as rota_foreign_fatbin: what
# cudart hands cuLibraryLoadData (tests/shim/library-t.c).
FATBIN_ARCH ?= -gencode arch=compute_75,code=[sm_75,compute_75]
FATBIN_O := $(O)/gen/foreign-fatbin.o
$(B)/gen/foreign.fatbin: $(wildcard tests/kernels/*.cu)
	@mkdir -p $(dir $@)
	@test -x $(NVCC) || { echo "nvcc not found at $(NVCC): set CUDA_HOME or NVCC" >&2; exit 1; }
	$(call quiet,NVCC)$(NVCC) -fatbin $(FATBIN_ARCH) -o $@ $^
$(B)/gen/foreign-fatbin.c: $(B)/gen/foreign.fatbin $(B)/bin/embed
	$(call quiet,GEN)$(B)/bin/embed rota_foreign_fatbin $< > $@
$(FATBIN_O): $(B)/gen/foreign-fatbin.c
	@mkdir -p $(dir $@)
	$(call quiet,CC)$(CC) $(ALL_CFLAGS) -c $< -o $@
# The same kernels as the other images a driver is handed (tests/simcuda/image-t): an sm_90 cubin (what NVRTC and
# nvcc -cubin produce), and sm_90 fatbins whose entries are compressed with LZ4 and with zstd.
IMAGE_FLAGS_cubin := -cubin -arch=sm_90
IMAGE_FLAGS_lz4   := -fatbin -arch=sm_90 -Xfatbin -compress-all -compress-mode=speed
IMAGE_FLAGS_zstd  := -fatbin -arch=sm_90 -Xfatbin -compress-all -compress-mode=size
IMAGES_O := $(foreach i,cubin lz4 zstd,$(O)/gen/foreign-$(i).o)
$(B)/gen/foreign.%.img: $(wildcard tests/kernels/*.cu)
	@mkdir -p $(dir $@)
	$(call quiet,NVCC)$(NVCC) $(IMAGE_FLAGS_$*) -o $@ $^
$(B)/gen/foreign-%.c: $(B)/gen/foreign.%.img $(B)/bin/embed
	$(call quiet,GEN)$(B)/bin/embed rota_foreign_$* $< > $@
$(O)/gen/foreign-%.o: $(B)/gen/foreign-%.c
	@mkdir -p $(dir $@)
	$(call quiet,CC)$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---- tests -----------------------------------------------------------------------------------------------
$(TAP_A): $(call obj,$(TAP_SRC))
	@mkdir -p $(dir $@)
	$(call quiet,AR)rm -f $@ && ar rcs $@ $^
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
TEST_LIBS_simcuda/image-t := $(IMAGES_O)
TEST_DEPS_simcuda/image-t := $(IMAGES_O)
# memq-t's stand-in for PyTorch's libc10_cuda.so (ROTA_MEM_RETRY=auto looks for it by name and on the stack).
FAKE_C10 := $(B)/tests/fake/libc10_cuda.so
$(FAKE_C10): tests/runtime/fake-c10.c
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libc10_cuda.so -o $@ $< $(ALL_LDFLAGS) -ldl
TEST_DEPS_runtime/memq-t := $(FAKE_C10)
# newvariant-t's stand-in for a driver newer than rota (ROTA_REAL_LIBCUDA): simcuda behind a resolver of its own.
FAKE_NEWER := $(B)/tests/fake/libcuda-newer.so
$(FAKE_NEWER): tests/shim/fake-newer-driver.c $(SIMCUDA)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) $(ALL_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS) -L$(B)/lib -lcuda -ldl
TEST_DEPS_shim/newvariant-t := $(FAKE_NEWER)
.SECONDEXPANSION:
# The test's directory name (tests/runtime/x-t -> runtime); a function, since a literal % in a pattern
# rule's prerequisites would be replaced by the stem.
test_dir = $(patsubst %/,%,$(dir $(1)))
$(B)/tests/%: $(O)/tests/%.o $(TAP_A) $(KERNELS_O) $(FATBIN_O) $(COMMON_A) $(SIMCUDA) \
              $$(TEST_DEPS_$$(call test_dir,$$*)) $$(TEST_DEPS_$$*)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -o $@ $< $(TEST_LIBS_$*) $(TEST_LIBS_$(call test_dir,$*)) $(KERNELS_O) $(FATBIN_O) $(TAP_A) \
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
# tests/tap/runtest runs each test: its files in a private /dev/shm and /tmp that vanish with it, its stderr in
# $(B)/test-logs/NAME.log (printed when it fails; ROTA_TEST_VERBOSE=1 keeps it on the terminal).
test: all $(if $(SANITIZER),,real-clients-if-online)
	@rm -rf $(B)/test-tmp $(B)/test-logs
	@echo "prove: $(words $(TESTS) $(TEST_SH)) tests; each one's stderr in $(B)/test-logs/"
	$(if $(filter 0,$(V)),@)LD_LIBRARY_PATH=$(abspath $(B))/lib prove -f --exec $(abspath tests/tap/runtest) \
	    $(sort $(TESTS)) $(sort $(TEST_SH))

# The real-client suite's venv (tests/realclients/real-clients.t): the pinned cuda-python and nvidia-ml-py of
# tests/realclients/requirements.txt, from PyPI. make test makes it where the index is reachable; the test
# skips without it (and fails with ROTA_REAL_CLIENTS=require, as .ci/run sets).
.PHONY: real-clients real-clients-if-online
real-clients:
	scripts/real-clients $(B)/real-clients/venv
real-clients-if-online:
	scripts/real-clients --if-online $(B)/real-clients/venv

# ---- fuzzing: the libFuzzer harnesses tests/fuzz/fuzz-*.c (clang); make test runs each for 10 s (fuzz.t) ----
FUZZ_SECONDS ?= 300
fuzz:
	FUZZ_T_SECONDS=$(FUZZ_SECONDS) ROTA_SRCDIR=$(CURDIR) tests/fuzz/fuzz.t

# ---- the demo and the benchmark suite: scripts/bench writes results/<timestamp>/ (report.md, plots, traces) --
DEMO_FLAGS  ?=
BENCH_FLAGS ?= --scale 3
BENCH_MIXES ?= one-gpu four-gpu
# The demo builds silently (make all shows the build), then prints only its own lines.
demo:
	@$(MAKE) --no-print-directory -s all
	@scripts/demo $(DEMO_FLAGS)
bench: all
	scripts/bench --build $(abspath $(B)) $(BENCH_FLAGS) $(BENCH_MIXES)

# ---- install / uninstall / clean ------------------------------------------------------------------------
# The user's programs (rotad, rota) go to BINDIR and librota.so to LIBDIR, where rota run finds it
# (BINDIR/../lib); simcuda goes to LIBDIR/rota, off the library search path, so it never shadows a real driver;
# the benchmark and simulator tools go to LIBEXECDIR/rota.
USER_PROGS := $(filter $(B)/bin/rotad $(B)/bin/rota,$(PROGS))
AUX_PROGS  := $(filter-out $(USER_PROGS),$(PROGS))
MANDIR ?= $(PREFIX)/share/man
MAN_PAGES := $(wildcard man/*.[0-9])
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
	for m in $(MAN_PAGES); do s=$${m##*.}; install -d $(DESTDIR)$(MANDIR)/man$$s && \
	    install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done
# Removes what every install target put there (install, install-slurm), then the directories they made, where
# they are left empty (rmdir removes nothing else).
INSTALL_DIRS := $(LIBDIR)/rota $(LIBEXECDIR)/rota $(LIBDIR)/slurm $(SYSTEMDUNITDIR) $(PREFIX)/lib/systemd \
    $(sort $(foreach m,$(MAN_PAGES),$(MANDIR)/man$(subst .,,$(suffix $(m))))) $(MANDIR) $(PREFIX)/share \
    $(BINDIR) $(LIBEXECDIR) $(LIBDIR) $(PREFIX)
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/librota.so $(DESTDIR)$(LIBDIR)/rota/libcuda.so.1 $(DESTDIR)$(LIBDIR)/rota/libcuda.so
	rm -f $(DESTDIR)$(LIBDIR)/rota/libnvidia-ml.so.1
	rm -f $(foreach p,$(USER_PROGS),$(DESTDIR)$(BINDIR)/$(notdir $(p)))
	rm -f $(foreach p,$(AUX_PROGS),$(DESTDIR)$(LIBEXECDIR)/rota/$(notdir $(p)))
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/rotad.service
	rm -f $(DESTDIR)$(LIBDIR)/slurm/rota-spank.so $(DESTDIR)$(BINDIR)/rota-device-plugin
	rm -f $(foreach m,$(MAN_PAGES),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))
	for d in $(INSTALL_DIRS); do rmdir $(DESTDIR)$$d 2>/dev/null || true; done
# The manual pages (man/, committed) from docs/: needs pandoc.
man:
	scripts/man
help:
	@echo 'rota: GPU sharing for unmodified CUDA processes. Targets:'
	@echo '  make [all]          build librota.so, rotad, rota, simcuda and the tests into $(B)/'
	@echo '  make test           build, then run every test under prove (logs: $(B)/test-logs/)'
	@echo '  make demo           the job mixes on the simulated device, each policy side by side (minutes)'
	@echo '  make bench          the benchmark suite (BENCH_FLAGS, BENCH_MIXES); writes results/<time>/'
	@echo '  make bench-cluster  one simulated Slurm node of 8 GPUs, exclusive against rota (docs/benchmarks-cluster.md)'
	@echo '  make fuzz           the libFuzzer harnesses, FUZZ_SECONDS each (clang)'
	@echo '  make install        rota, rotad, librota.so, simcuda, tools, systemd unit, man pages under PREFIX'
	@echo '  make install-slurm  the Slurm SPANK plugin (needs spank.h) under LIBDIR/slurm'
	@echo '  make install-kubernetes  the Kubernetes device plugin (needs grpc++) under BINDIR'
	@echo '  make k8s-venv       the pinned Python packages the Kubernetes tests use, in build/venv-k8s'
	@echo '  make uninstall      remove what the install targets put there'
	@echo '  make man            regenerate man/ from docs/ (pandoc)'
	@echo '  make clean          remove the build folders'
	@echo 'Variables:'
	@echo '  CUDA_HOME=$(CUDA_HOME)  the toolkit (cuda.h, nvcc); no GPU or driver needed'
	@echo '  SANITIZER=address|undefined|thread  an instrumented build in build-SANITIZER/'
	@echo '  PREFIX=$(PREFIX)  DESTDIR=  install root (BINDIR, LIBDIR, LIBEXECDIR, MANDIR, SYSTEMDUNITDIR)'
	@echo '  CC, CFLAGS, LDFLAGS (appended)  WERROR=0 (warnings not fatal)  V=1 (print full commands)'
	@echo 'See README.md and docs/building.md.'
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
             runtime/lib/grant.c runtime/lib/conn.c runtime/lib/proto.c runtime/lib/sockpath.c runtime/lib/cgroup.c \
             runtime/lib/errmsg.c
ifneq ($(wildcard $(SPANK_H)),)
all: $(SPANK_SO)
endif
# The headers its sources include are prerequisites, not order-only ones: an ABI change (runtime/abi.h) must rebuild
# it, or it speaks the old version to the new rotad.
$(SPANK_SO): $(SPANK_SRC) $(wildcard runtime/lib/*.h) runtime/abi.h | $(if $(wildcard $(SPANK_H)),,spank-h-missing)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -fPIC $(ROTA_WARN) -I. -I$(CUDA_HOME)/include $(CFLAGS) \
	    -DROTA_SPANK_LIBROTA='"$(LIBDIR)/librota.so"' -shared -o $@ $(SPANK_SRC) $(LDFLAGS) -lm
install-slurm: $(SPANK_SO)
	install -d $(DESTDIR)$(LIBDIR)/slurm
	install -m 0755 $(SPANK_SO) $(DESTDIR)$(LIBDIR)/slurm/rota-spank.so
BENCH_CLUSTER_FLAGS ?=
bench-cluster: all
	scripts/bench-cluster --build $(abspath $(B)) $(BENCH_CLUSTER_FLAGS)
spank-h-missing:
	@echo "make: $(SPANK_H) not found: the SPANK plugin needs Slurm's headers (Debian: libslurm-dev; or set SPANK_H)" >&2
	@exit 1
.PHONY: install-slurm bench-cluster spank-h-missing

# ==== Kubernetes: the device plugin (contrib/kubernetes, docs/kubernetes.md) ====================================
# rota-device-plugin is C++17 over grpc++ (Debian: libgrpc++-dev libprotobuf-dev protobuf-compiler
# protobuf-compiler-grpc); built where those are, skipped otherwise. Its one C file (kdp-rotad.c) links the
# common library; the stand-in kubelet of tests/kubernetes is Python with grpcio from PyPI, in a venv that
# `make k8s-venv` makes under build/ (the tests skip without it).
KDP_HAVE := $(shell command -v protoc >/dev/null && command -v grpc_cpp_plugin >/dev/null && \
              pkg-config --exists grpc++ protobuf 2>/dev/null && echo 1)
KDP      := $(B)/bin/rota-device-plugin
KDP_GEN  := $(B)/gen/k8s
KDP_CXX  := $(if $(findstring clang,$(CC)),$(subst clang,clang++,$(CC)),$(CXX))
KDP_CXXFLAGS = -std=c++17 -O2 -g -pthread -MMD -MP $(filter-out -Wstrict-prototypes -Wmissing-prototypes,$(ROTA_WARN)) \
               $(filter -fsanitize=% -fno-omit-frame-pointer -fno-sanitize-recover=%,$(ROTA_CFLAGS)) \
               -I. -I$(KDP_GEN) $(shell pkg-config --cflags grpc++ protobuf 2>/dev/null) $(CXXFLAGS)
KDP_OBJ  := $(patsubst %.cc,$(O)/%.o,$(wildcard contrib/kubernetes/*.cc)) $(O)/contrib/kubernetes/kdp-rotad.o \
            $(O)/gen/k8s/api.pb.o $(O)/gen/k8s/api.grpc.pb.o
ifeq ($(KDP_HAVE),1)
all: $(KDP)
endif
$(KDP_GEN)/api.pb.cc $(KDP_GEN)/api.pb.h $(KDP_GEN)/api.grpc.pb.cc $(KDP_GEN)/api.grpc.pb.h &: contrib/kubernetes/api.proto
	@mkdir -p $(KDP_GEN)
	$(call quiet,GEN)protoc -Icontrib/kubernetes --cpp_out=$(KDP_GEN) --grpc_out=$(KDP_GEN) \
	    --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) $<
$(O)/contrib/kubernetes/%.o: contrib/kubernetes/%.cc $(KDP_GEN)/api.grpc.pb.h
	@mkdir -p $(dir $@)
	$(call quiet,CXX)$(KDP_CXX) $(KDP_CXXFLAGS) -c $< -o $@
# generated code: protoc's, not ours to warn about
$(O)/gen/k8s/%.o: $(KDP_GEN)/%.cc $(KDP_GEN)/api.grpc.pb.h
	@mkdir -p $(dir $@)
	$(call quiet,CXX)$(KDP_CXX) $(KDP_CXXFLAGS) -w -c $< -o $@
$(KDP): $(KDP_OBJ) $(COMMON_A)
	@mkdir -p $(dir $@)
	$(call quiet,LINK)$(KDP_CXX) -o $@ $(KDP_OBJ) $(COMMON_A) $(ALL_LDFLAGS) $(shell pkg-config --libs grpc++ protobuf 2>/dev/null) -lrt -lm
# The stand-in kubelet's gRPC (grpcio, grpcio-tools) and the manifests' validator (kubernetes-validate), pinned;
# one venv for every build variant (it holds no build output), found by the tests through ROTA_K8S_VENV.
KDP_VENV ?= build/venv-k8s
export ROTA_K8S_VENV := $(abspath $(KDP_VENV))
k8s-venv: $(KDP_VENV)/.done
$(KDP_VENV)/.done: tests/kubernetes/requirements.txt
	rm -rf $(KDP_VENV) && python3 -m venv $(KDP_VENV)
	$(KDP_VENV)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@
install-kubernetes: $(KDP)
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(KDP) $(DESTDIR)$(BINDIR)/rota-device-plugin
.PHONY: k8s-venv install-kubernetes
