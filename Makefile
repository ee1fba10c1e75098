# libmscclpp: the MSCCL++ 0.1 C API built from Go.
#   make            build build/lib/libmscclpp.so.0.1.0, headers and mscclpp.pc
#   make test       Go tests (-race) and the C/C++ conformance suite
#   make run        the main job: the allgather perf tool over SHM on N local ranks
#   make bench      benchmarks beside references measured in the same run
#   make install PREFIX=/some/where
GO       ?= go
PREFIX   ?= /usr/local
BUILD    := build
LIBDIR   := $(BUILD)/lib
SONAME   := libmscclpp.so.0
LIB      := $(LIBDIR)/libmscclpp.so.0.1.0
SOURCES  := $(shell find capi impl cuda ib include -type f \( -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.cc' \) ! -name '*_test.go' 2>/dev/null)
LDFLAGS  := -extldflags '-Wl,-soname,$(SONAME) -Wl,--version-script=$(CURDIR)/capi/exports.map'
NRANKS   ?= 4

.PHONY: all lib test test-go test-c run bench install clean check-cuda deps

all: lib $(BUILD)/include/mscclpp.h $(BUILD)/include/mscclppfifo.h $(BUILD)/include/mscclpp_tools.h \
     $(LIBDIR)/pkgconfig/mscclpp.pc

lib: $(LIB)

$(LIB): $(SOURCES) go.mod go.sum capi/exports.map
	@mkdir -p $(LIBDIR)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o $@ -ldflags "$(LDFLAGS)" ./capi
	@rm -f $(LIBDIR)/libmscclpp.so.0.1.h
	ln -sf libmscclpp.so.0.1.0 $(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(LIBDIR)/libmscclpp.so

$(BUILD)/include/%.h: include/%.h
	@mkdir -p $(BUILD)/include
	cp $< $@

$(LIBDIR)/pkgconfig/mscclpp.pc: pkgconfig/mscclpp.pc.in
	@mkdir -p $(LIBDIR)/pkgconfig
	sed 's|@PREFIX@|$(CURDIR)/$(BUILD)|' $< > $@

install: all
	install -d $(PREFIX)/lib/pkgconfig $(PREFIX)/include
	install -m 0755 $(LIB) $(PREFIX)/lib/
	ln -sf libmscclpp.so.0.1.0 $(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(PREFIX)/lib/libmscclpp.so
	install -m 0644 include/mscclpp.h include/mscclppfifo.h include/mscclpp_tools.h $(PREFIX)/include/
	sed 's|@PREFIX@|$(PREFIX)|' pkgconfig/mscclpp.pc.in > $(PREFIX)/lib/pkgconfig/mscclpp.pc

test: all test-go test-c

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 300s ./...

test-c: all
	bash tests/c/run.sh $(BUILD)

check-cuda: all
	bash tests/c/check-cuda.sh $(BUILD)
	bash tests/gpu/build.sh $(BUILD) $(BUILD)/tests/gpu

run: all
	bash tests/c/perf.sh $(BUILD) $(NRANKS)

bench: all
	bash tests/c/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
