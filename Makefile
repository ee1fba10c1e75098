# libmscclpp: the MSCCL++ 0.1 C API built from Go.
#   make            build build/lib/libmscclpp.so.0.1.0, headers and mscclpp.pc, the tools
#                   (tools/observe.mk) and the perf tool build/bin/mscclpp_allgather_perf
#   make test       installs missing test packages (make deps), then go vet, the Go
#                   tests (-race) and the C/C++ conformance suite, with one summary
#                   counting every check and skip (tests/test.sh)
#   make test-asan  the C suite against the library with ASan+UBSan on its C helpers
#   make run        the main job: the allgather perf tool over SHM on N local ranks
#                   (NRANKS=4; ARGS="-b 8 -e 1M -f 2 -n 20 -w 5 -c 1": nccl-tests flags for perf;
#                   MULTINODE=2: across 2 simulated nodes, see tests/multinode)
#   make bench      benchmarks beside references measured in the same run (the rows also in
#                   build/bench/results.tsv); make bench-doc then renders docs/PERFORMANCE.md's
#                   table from that file
#   make faults     the fault-injection suite (tests/faults/run.sh: FAULTS_RUNS=220 runs of a
#                   rank SIGKILLed/SIGSTOPped or a link taken down over SHM, Ethernet and the IB
#                   double on simulated nodes; FAULTS_SEED=S replays), then every Go fuzz target
#                   for FAULTS_FUZZTIME (10s) each; a short version runs in `make test`
#   make install PREFIX=/some/where   (pkg-config file and CMake package included;
#                   DESTDIR stages, LIBDIR defaults to lib/$(gcc -print-multiarch)
#                   under /usr, lib elsewhere; make uninstall removes the same files)
GO       ?= go
CC       ?= cc
PREFIX   ?= /usr/local
DESTDIR  ?=
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
ifeq ($(PREFIX)$(if $(MULTIARCH),,-),/usr)
LIBDIR   ?= $(PREFIX)/lib/$(MULTIARCH)
else
LIBDIR   ?= $(PREFIX)/lib
endif
INCLUDEDIR ?= $(PREFIX)/include
BINDIR   ?= $(PREFIX)/bin
DOCDIR   ?= $(PREFIX)/share/doc/mscclpp
BUILD    := build
BLIBDIR  := $(BUILD)/lib
VERSION  := 0.1.0
SONAME   := libmscclpp.so.0
LIB      := $(BLIBDIR)/libmscclpp.so.$(VERSION)
CMAKEDIR := $(BLIBDIR)/cmake/mscclpp
CMAKEPKG := $(CMAKEDIR)/mscclppConfig.cmake $(CMAKEDIR)/mscclppConfigVersion.cmake
SOURCES  := $(shell find capi impl cuda ib include -type f \( -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.cc' \) ! -name '*_test.go' 2>/dev/null)
LDFLAGS  := -extldflags '-Wl,-soname,$(SONAME) -Wl,--version-script=$(CURDIR)/capi/exports.map'
NRANKS   ?= 4
ARGS     ?=
MULTINODE ?=
# The fault categories `make test` runs (FAULTS_TEST_RUNS runs in all, split evenly: one
# each, so that every category's fault is injected and handled once; `make faults` samples each
# category's timings many times): every one but shm-stop, which passes but takes 4-8 s a run
# (make faults runs it).
FAULTS_TEST_CATS ?= shm-kill,shm-flap,eth-kill,eth-stop,eth-flap,eth-linkdown,eth-linkflap,ib-kill,ib-stop,ib-flap,shm-destroy,eth-destroy,ib-destroy
FAULTS_TEST_RUNS ?= 13

# The public headers: mscclpp.h includes mscclppfifo.h and mscclppdevconn.h.
HEADERS := mscclpp.h mscclppfifo.h mscclppdevconn.h mscclpp_tools.h

# Go keys a cgo package on its own files and flags, not on the headers it includes from
# elsewhere in the tree (include/, cuda/, ib/, impl/...): an edited header would leave every
# go command make runs (the library, the tests, the tools) on the objects of the old one. The
# headers' content goes into the cgo flags, so that a changed header rebuilds what includes it.
CGO_HEADERS_SUM := $(shell find include cuda ib capi impl -name '*.h' 2>/dev/null | LC_ALL=C sort | xargs cat | cksum | cut -d' ' -f1)
export CGO_CPPFLAGS += -DMSCCLPP_HEADERS_SUM=$(CGO_HEADERS_SUM)

# -trimpath: no clone's directory goes into an object or its cache key (the cgo lines name no
# -I${SRCDIR}: each C file includes the tree's headers by relative path), so Go's build cache
# serves a second clone of the same sources, and the library names no directory of the clone.
export GOFLAGS += -trimpath

.PHONY: all lib test test-go test-c test-asan test-faults faults run bench bench-doc install uninstall clean check-cuda deps FORCE

all: lib $(addprefix $(BUILD)/include/,$(HEADERS)) \
     $(BLIBDIR)/pkgconfig/mscclpp.pc $(CMAKEPKG)

lib: $(LIB)

# The library through tools/build/golib-cache.sh: Go's build cache does not serve a c-shared
# build (each cgo package's cgo step and C compiles run every time), so an earlier build of the
# same sources, Go and flags is copied instead. -buildvcs=false: the library's content depends
# on those alone, not on the commit.
$(LIB): $(SOURCES) go.mod go.sum capi/exports.map tools/build/golib-cache.sh
	@mkdir -p $(BLIBDIR)
	GO=$(GO) bash tools/build/golib-cache.sh $@ -- \
	  env CGO_ENABLED=1 $(GO) build -buildvcs=false -buildmode=c-shared -o $@ -ldflags "$(LDFLAGS)" ./capi
	@rm -f $(BLIBDIR)/libmscclpp.so.0.1.h
	ln -sf libmscclpp.so.0.1.0 $(BLIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(BLIBDIR)/libmscclpp.so

$(BUILD)/include/%.h: include/%.h
	@mkdir -p $(BUILD)/include
	cp $< $@

# pc_sed PREFIX,LIBDIR: fills pkgconfig/mscclpp.pc.in; no rpath where the
# dynamic linker looks anyway (/usr/lib and the multiarch directory)
SYSLIBDIRS := /lib /usr/lib /lib64 /usr/lib64 $(if $(MULTIARCH),/lib/$(MULTIARCH) /usr/lib/$(MULTIARCH))
pc_sed = sed -e 's|@PREFIX@|$(1)|' -e 's|@LIBDIR@|$(patsubst $(1)/%,$${prefix}/%,$(2))|' \
  -e 's|@RPATH@|$(if $(filter $(2),$(SYSLIBDIRS)),,-Xlinker -rpath=$${libdir} )|'

# The build tree's .pc finds its prefix from its own location (pkg-config's ${pcfiledir}), so
# a build/ carried to another path or machine still works; the installed one names PREFIX.
$(BLIBDIR)/pkgconfig/mscclpp.pc: pkgconfig/mscclpp.pc.in Makefile
	@mkdir -p $(BLIBDIR)/pkgconfig
	$(call pc_sed,$${pcfiledir}/../..,$${pcfiledir}/../../lib) $< > $@

# The CMake package finds its prefix from its own location: the same files
# serve the build tree and every install prefix.
# cmake_sed UP,LIBDIR,INCLUDEDIR: the package's prefix as the way up from its
# own directory (or an absolute path), and the library and include
# directories relative to ${_mscclpp_prefix} (or absolute)
cmake_sed = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(word 1,$(subst ., ,$(VERSION)))|g' \
  -e 's|@VERSION_MINOR@|$(word 2,$(subst ., ,$(VERSION)))|g' -e 's|@SONAME@|$(SONAME)|g' \
  -e 's|@PREFIX_FROM_HERE@|$(1)|' -e 's|@LIBDIR_FROM_PREFIX@|$(2)|' -e 's|@INCLUDEDIR_FROM_PREFIX@|$(3)|'

$(CMAKEDIR)/%.cmake: pkgconfig/%.cmake.in Makefile
	@mkdir -p $(CMAKEDIR)
	$(call cmake_sed,$${CMAKE_CURRENT_LIST_DIR}/../../..,$${_mscclpp_prefix}/lib,$${_mscclpp_prefix}/include) $< > $@

# cmake_up: the way from LIBDIR/cmake/mscclpp up to PREFIX ("../../.." for
# lib, "../../../.." for lib/x86_64-linux-gnu); empty when LIBDIR is not
# under PREFIX (the package then names PREFIX itself)
cmake_up = $(if $(filter $(PREFIX)/%,$(LIBDIR)),$(subst $(eval) ,/,$(patsubst %,..,cmake mscclpp $(subst /, ,$(patsubst $(PREFIX)/%,%,$(LIBDIR))))))
PERF := $(BUILD)/bin/mscclpp_allgather_perf
DOCS := README.md CHANGELOG.md $(wildcard docs/*.md)

# the perf tool (tools/perf/perf.c) as installed: linked against the library,
# with an rpath to LIBDIR unless the dynamic linker looks there anyway. The link
# is made every time (each install's LIBDIR is its rpath); the compile only when
# the sources or the headers changed.
PERF_O := $(BUILD)/tools/perf/perf.o
$(PERF_O): $(wildcard tools/perf/*.c tools/perf/*.h) tools/common/outfile.h \
    $(addprefix $(BUILD)/include/,$(HEADERS)) Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -I$(BUILD)/include -c tools/perf/perf.c -o $@
$(PERF): $(PERF_O) $(LIB) Makefile FORCE
	@mkdir -p $(BUILD)/bin
	$(CC) -std=c11 -O2 -Wall -Wextra $(PERF_O) -o $@ -L$(BLIBDIR) \
	  $(if $(filter $(LIBDIR),$(SYSLIBDIRS)),,-Wl,-rpath,$(LIBDIR)) -lmscclpp -pthread

# plain make builds it too: the README's perf commands run from the build tree or the install
all: $(PERF)

install: all $(PERF)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(LIBDIR)/cmake/mscclpp $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libmscclpp.so.0.1.0 $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmscclpp.so
	install -m 0644 $(addprefix include/,$(HEADERS)) $(DESTDIR)$(INCLUDEDIR)/
	$(call pc_sed,$(PREFIX),$(LIBDIR)) pkgconfig/mscclpp.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/mscclpp.pc
	$(call cmake_sed,$(if $(cmake_up),$${CMAKE_CURRENT_LIST_DIR}/$(cmake_up),$(PREFIX)),$(if $(cmake_up),$${_mscclpp_prefix}/$(patsubst $(PREFIX)/%,%,$(LIBDIR)),$(LIBDIR)),$(if $(filter $(PREFIX)/%,$(INCLUDEDIR)),$${_mscclpp_prefix}/$(patsubst $(PREFIX)/%,%,$(INCLUDEDIR)),$(INCLUDEDIR))) \
	  pkgconfig/mscclppConfig.cmake.in > $(DESTDIR)$(LIBDIR)/cmake/mscclpp/mscclppConfig.cmake
	install -m 0644 $(CMAKEDIR)/mscclppConfigVersion.cmake $(DESTDIR)$(LIBDIR)/cmake/mscclpp/
	install -m 0755 $(PERF) $(DESTDIR)$(BINDIR)/
	install -m 0644 LICENSE $(DOCS) $(DESTDIR)$(DOCDIR)/
	install -D -m 0644 tools/perf/README.md $(DESTDIR)$(DOCDIR)/tools/perf/README.md

uninstall:
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,libmscclpp.so.0.1.0 $(SONAME) libmscclpp.so pkgconfig/mscclpp.pc \
	  cmake/mscclpp/mscclppConfig.cmake cmake/mscclpp/mscclppConfigVersion.cmake)
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/,$(HEADERS))
	rm -f $(DESTDIR)$(BINDIR)/mscclpp_allgather_perf $(addprefix $(DESTDIR)$(DOCDIR)/,LICENSE $(notdir $(DOCS)))
	rm -f $(DESTDIR)$(DOCDIR)/tools/perf/README.md
	rmdir $(DESTDIR)$(DOCDIR)/tools/perf $(DESTDIR)$(DOCDIR)/tools 2>/dev/null; true
	rmdir $(DESTDIR)$(LIBDIR)/cmake/mscclpp $(DESTDIR)$(DOCDIR) 2>/dev/null; true

FORCE:

# the Debian packages the tests need (.ci/install-deps.sh; quick when present)
deps:
	bash .ci/install-deps.sh $(if $(filter 1,$(MSCCLPP_CI)),--strict)

# go vet, Go tests, the C suite and one summary of every check and skip
test: deps all
	FAULTS_TEST_CATS=$(FAULTS_TEST_CATS) FAULTS_TEST_RUNS=$(FAULTS_TEST_RUNS) bash tests/test.sh $(BUILD)

# the C suite once more against the library with ASan and UBSan in its C helpers
test-asan: all
	bash tests/asan.sh $(BUILD)

# the test harnesses and the tests that drive them build only with this tag
TESTTAGS := -tags mscclpp_testhooks
test-go:
	$(GO) vet ./...
	$(GO) vet $(TESTTAGS) ./...
	$(GO) test $(TESTTAGS) -race -count=1 -timeout 300s ./...

test-c: all
	bash tests/c/run.sh $(BUILD)

# the short fault-injection run of `make test` (no self-test, no fuzzing: the fuzz seeds run in test-go)
test-faults: all
	FAULTS_RUNS=$(FAULTS_TEST_RUNS) FAULTS_CATS=$(FAULTS_TEST_CATS) FAULTS_FUZZTIME=0 FAULTS_SELFTEST=0 bash tests/faults/run.sh $(BUILD)

faults: all
	bash tests/faults/run.sh $(BUILD)

check-cuda: all
	bash tests/c/check-cuda.sh $(BUILD)
	bash tests/gpu/build.sh $(BUILD) $(BUILD)/tests/gpu

# MULTINODE=K: the same tool as NRANKS ranks over K simulated nodes (network
# and mount namespaces, tests/multinode/perf.sh; needs root and iproute2)
run: all
ifeq ($(strip $(MULTINODE)),)
	bash tests/c/perf.sh $(BUILD) $(NRANKS) $(ARGS)
else
	bash tests/multinode/perf.sh $(BUILD) $(MULTINODE) $(NRANKS) $(ARGS)
endif

bench: all
	bash tests/c/bench.sh $(BUILD)

# docs/PERFORMANCE.md's table from the last make bench run (its results file kept beside it)
bench-doc:
	cp $(BUILD)/bench/results.tsv docs/bench-results.tsv
	bash tests/c/bench/render.sh docs/bench-results.tsv docs/PERFORMANCE.md

clean:
	rm -rf $(BUILD)

# the shipped tools: profile, trace, mscclpp-trace-merge
include tools/observe.mk
