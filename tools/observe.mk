# tools/observe.mk: the profile and trace tools, mscclpp-trace-merge and
# mscclpp-perf-plot (docs/TOOLS.md), included at the end of the Makefile.
# `make` builds
#   build/lib/mscclpp/libmscclpp_profile.so
#   build/lib/mscclpp/libmscclpp_trace.so
#   build/bin/mscclpp-trace-merge
#   build/bin/mscclpp-perf-plot
# and `make install` puts them in $(LIBDIR)/mscclpp/ and $(BINDIR). The tool
# libraries link -lmscclpp by soname with no rpath: libmscclpp dlopens them,
# so it is loaded already.
TOOLLIBDIR  := $(BLIBDIR)/mscclpp
OBS_TOOLS   := $(TOOLLIBDIR)/libmscclpp_profile.so $(TOOLLIBDIR)/libmscclpp_trace.so
TRACE_MERGE := $(BUILD)/bin/mscclpp-trace-merge
PERF_PLOT   := $(BUILD)/bin/mscclpp-perf-plot
OBS_CFLAGS  := -std=c11 -O2 -g -Wall -Wextra

.PHONY: observe-tools install-observe-tools uninstall-observe-tools
all: observe-tools
install: install-observe-tools
uninstall: uninstall-observe-tools

observe-tools: $(OBS_TOOLS) $(TRACE_MERGE) $(PERF_PLOT)

$(TOOLLIBDIR)/libmscclpp_profile.so: tools/profile/profile.c tools/common/intercept.h tools/common/outfile.h include/mscclpp_tools.h \
    include/mscclpp.h $(LIB)
	@mkdir -p $(TOOLLIBDIR)
	$(CC) $(OBS_CFLAGS) -shared -fPIC -Iinclude $< -o $@ -L$(BLIBDIR) -lmscclpp -pthread

$(TOOLLIBDIR)/libmscclpp_trace.so: tools/trace/trace.c tools/common/intercept.h tools/common/outfile.h include/mscclpp_tools.h \
    include/mscclpp.h $(LIB)
	@mkdir -p $(TOOLLIBDIR)
	$(CC) $(OBS_CFLAGS) -shared -fPIC -Iinclude $< -o $@ -L$(BLIBDIR) -lmscclpp -pthread

$(TRACE_MERGE): tools/trace/merge.c tools/common/outfile.h
	@mkdir -p $(BUILD)/bin
	$(CC) $(OBS_CFLAGS) $< -o $@

$(PERF_PLOT): tools/plot/plot.c tools/common/outfile.h
	@mkdir -p $(BUILD)/bin
	$(CC) $(OBS_CFLAGS) $< -o $@ -lm

install-observe-tools: observe-tools
	install -d $(DESTDIR)$(LIBDIR)/mscclpp $(DESTDIR)$(BINDIR)
	install -m 0755 $(OBS_TOOLS) $(DESTDIR)$(LIBDIR)/mscclpp/
	install -m 0755 $(TRACE_MERGE) $(PERF_PLOT) $(DESTDIR)$(BINDIR)/

uninstall-observe-tools:
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/mscclpp/,$(notdir $(OBS_TOOLS))) $(DESTDIR)$(BINDIR)/mscclpp-trace-merge \
	  $(DESTDIR)$(BINDIR)/mscclpp-perf-plot
	rmdir $(DESTDIR)$(LIBDIR)/mscclpp 2>/dev/null; true
