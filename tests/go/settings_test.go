package sotest

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readsEnvAllowed are the product Go files (or folders, ending in /) that may read the
// environment through impl/env, each with its reason. Every other setting is read by
// impl/config.go (a transport's through its Entry.Settings) and passed down as a value.
var readsEnvAllowed = map[string]string{
	"impl/config.go":    "the core's settings, and every transport's (Entry.Settings)",
	"impl/logx/logx.go": "the logging settings: read before anything logs",
	"cuda/cuda.go":      "MSCCLPP_CUDA_LIBRARY: read when the driver is first loaded, which may precede any communicator",
	"impl/bootstrap/":   "the bootstrap's settings: read before a communicator exists",
}

// TestSettingsReadInOnePlace: no other product Go file reads the environment.
func TestSettingsReadInOnePlace(t *testing.T) {
	reads := regexp.MustCompile(`\benv\.(Get|Lookup|Raw)\(`)
	for p, s := range productSources(t, "capi", "impl", "cuda", "ib") {
		p = filepath.ToSlash(p)
		if !strings.HasSuffix(p, ".go") || strings.HasPrefix(p, "impl/env/") || !reads.MatchString(s) {
			continue
		}
		ok := false
		for a := range readsEnvAllowed {
			if p == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(p, a)) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s reads the environment (%s): declare the variable in its transport's Entry.Settings, or read it in impl/config.go, and pass the value down",
				p, reads.FindString(s))
		}
	}
}
