package sotest

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readsEnvAllowed are the product files that may read the environment, each with its reason:
// every read of every other file goes through one of them (a transport's settings through its
// Entry.Settings, which impl/config.go reads). The reader of every package is one file, named
// here: impl/config.go cannot serve the packages below it (arrows point down: the bootstrap,
// the logger and the CUDA loader are imported by config.go's package, and run before any
// communicator exists), so each of those has its one reading file, and all of them read through
// impl/env (the C library's getenv, at the moment of the call).
var readsEnvAllowed = map[string]string{
	"impl/config.go":             "the core's settings, and every transport's (Entry.Settings)",
	"impl/logx/logx.go":          "the logging settings: read before anything logs",
	"cuda/cuda.go":               "MSCCLPP_CUDA_LIBRARY: read when the driver is first loaded, which may precede any communicator",
	"impl/bootstrap/settings.go": "the bootstrap's settings: mscclppGetUniqueId reads them before any communicator exists",
	"capi/tools.c":               "MSCCLPP_TOOLS: read by the library's constructor, before the Go runtime serves any call",
}

// TestSettingsReadInOnePlace: no product file other than those of readsEnvAllowed (and impl/env,
// the reader itself) reads the environment: no env.Get/Lookup/Raw, no os.Getenv/LookupEnv/
// Environ or syscall.Getenv (which read Go's copy, taken at load time), no C getenv; the
// bootstrap included.
func TestSettingsReadInOnePlace(t *testing.T) {
	goReads := regexp.MustCompile(`\benv\.(Get|Lookup|Raw)\(|\bos\.(Getenv|LookupEnv|Environ)\(|\bsyscall\.Getenv\(`)
	cReads := regexp.MustCompile(`\b(secure_)?getenv\(`)
	var readers []string
	for p, s := range productSources(t, "capi", "impl", "cuda", "ib") {
		p = filepath.ToSlash(p)
		if strings.HasPrefix(p, "impl/env/") {
			continue
		}
		re := cReads
		if strings.HasSuffix(p, ".go") {
			re = goReads
			s = regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAllString(s, "") // comments may name them
		}
		if !re.MatchString(s) {
			continue
		}
		readers = append(readers, p)
		if _, ok := readsEnvAllowed[p]; !ok {
			t.Errorf("%s reads the environment (%s): read it in its package's reading file (%s), or declare the variable in its transport's Entry.Settings, and pass the value down",
				p, re.FindString(s), strings.Join(sorted(readsEnvAllowed), ", "))
		}
	}
	if len(readers) < 4 {
		t.Fatalf("the scan found %d reading files (%v): the patterns no longer match the sources", len(readers), readers)
	}
}
