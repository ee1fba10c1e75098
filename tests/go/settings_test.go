package sotest

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The one home of the settings: impl/env's table (vars.go) declares every variable the library
// reads, and impl/env (env.go) is the one caller of getenv. The one exception is MSCCLPP_TOOLS:
// capi/tools.c reads it with getenv in the library's constructor, before the Go runtime is sure
// to be up, so it cannot go through the table's reader; the table still declares it.
const (
	settingsTable  = "impl/env/vars.go"
	settingsReader = "impl/env/env.go"
	toolsLoader    = "capi/tools.c"
	toolsRead      = `getenv("MSCCLPP_TOOLS")`
)

var (
	goEnvRead   = regexp.MustCompile(`\bos\.(Getenv|LookupEnv|Environ)\(|\bsyscall\.Getenv\(|\bC\.(secure_)?getenv\(|\benv\.Var\(`)
	cEnvRead    = regexp.MustCompile(`\b(secure_)?getenv\([^)]*\)`)
	varLiteral  = regexp.MustCompile(`"(MSCCLPP_[A-Z0-9_]+|HOME)"`)
	tableEntry  = regexp.MustCompile(`(?m)^\s*([A-Z][A-Za-z0-9]*)\s+Var\s*=\s*"([A-Z0-9_]+)"`)
	envRef      = regexp.MustCompile(`\benv\.([A-Z][A-Za-z0-9]*)\b`)
	goLineNotes = regexp.MustCompile(`(?m)^\s*//.*$`)
)

// settingsSources are the library's product sources, Go files without their comment lines
// (comments may name what they forbid).
func settingsSources(t *testing.T) map[string]string {
	out := map[string]string{}
	for p, s := range productSources(t, "capi", "impl", "cuda", "ib") {
		p = filepath.ToSlash(p)
		if strings.HasSuffix(p, ".go") {
			s = goLineNotes.ReplaceAllString(s, "")
		}
		out[p] = s
	}
	return out
}

// TestSettingsReadInOnePlace: no product file but impl/env's reader calls getenv (C or Go), and
// capi/tools.c only for MSCCLPP_TOOLS; none reads Go's copy of the environment (os.Getenv,
// LookupEnv, Environ, syscall.Getenv) or makes a variable of its own (env.Var(...)); the
// bootstrap, the logger and the CUDA loader included.
func TestSettingsReadInOnePlace(t *testing.T) {
	var tools int
	for p, s := range settingsSources(t) {
		if strings.HasPrefix(p, "impl/env/") {
			continue
		}
		if strings.HasSuffix(p, ".go") {
			if m := goEnvRead.FindString(s); m != "" {
				t.Errorf("%s reads the environment itself (%s): declare the variable in %s and read it through its env.Var", p, m, settingsTable)
			}
			continue
		}
		for _, m := range cEnvRead.FindAllString(s, -1) {
			if p == toolsLoader && m == toolsRead {
				tools++
				continue
			}
			t.Errorf("%s reads the environment in C (%s): read it in Go through %s's table and pass the value down", p, m, settingsTable)
		}
	}
	if tools != 1 {
		t.Errorf("%s reads MSCCLPP_TOOLS %d times (%s), want once: the patterns no longer match the sources", toolsLoader, tools, toolsRead)
	}
}

// TestSettingsDeclaredInOneTable: a variable's name is spelled out in impl/env's table only
// (and in the one getenv of capi/tools.c), and every entry of the table is read somewhere:
// through its env.Var in Go, or by capi/tools.c for MSCCLPP_TOOLS.
func TestSettingsDeclaredInOneTable(t *testing.T) {
	src := settingsSources(t)
	table := map[string]string{} // Go name -> variable
	for _, m := range tableEntry.FindAllStringSubmatch(src[settingsTable], -1) {
		table[m[1]] = m[2]
	}
	if len(table) < 30 {
		t.Fatalf("%s declares %d variables: the pattern no longer matches the table", settingsTable, len(table))
	}
	for p, s := range src {
		if p == settingsTable {
			continue
		}
		if p == toolsLoader {
			s = strings.Replace(s, toolsRead, "", 1)
		}
		for _, m := range varLiteral.FindAllString(s, -1) {
			t.Errorf("%s names the variable %s: only %s does (refer to its env.Var)", p, m, settingsTable)
		}
	}
	used := map[string]bool{"Tools": strings.Contains(src[toolsLoader], toolsRead)}
	for p, s := range src {
		if !strings.HasPrefix(p, "impl/env/") {
			for n := range names(envRef, s) {
				used[n] = true
			}
		}
	}
	for _, goName := range sorted(table) {
		if !used[goName] {
			t.Errorf("%s declares %s (%s), which no library source reads: remove it (and its docs/ENVIRONMENT.md entry)", settingsTable, goName, table[goName])
		}
	}
}

// TestOneDlopenPerLibrary: impl/dynlib is the one opener of the vendor libraries (it opens each
// once and fills every table of the library from that handle: impl/dynlib's
// TestOneHandlePerLibrary, cuda's and ib's TestOneDlopenForEveryTable check it at run time) and the one
// resolver of their symbols, each checked. Any other dlopen only asks whether a library is
// already loaded (RTLD_NOLOAD), but capi/tools.c's, which loads the tools MSCCLPP_TOOLS names;
// no product code loads a library through go-nvml's dl package.
func TestOneDlopenPerLibrary(t *testing.T) {
	open := regexp.MustCompile(`\bdlopen\([^;]*`)
	sym := regexp.MustCompile(`\bdl(v)?sym\(`)
	opens := 0
	for p, s := range settingsSources(t) {
		if strings.HasSuffix(p, ".c") || strings.HasSuffix(p, ".h") {
			s = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(s, "")
		}
		if strings.Contains(s, "go-nvml/pkg/dl") {
			t.Errorf("%s loads a library through go-nvml's dl package: load it with impl/dynlib", p)
		}
		if p == "impl/dynlib/dynlib.c" {
			opens += len(open.FindAllString(s, -1))
			continue
		}
		if m := sym.FindString(s); m != "" {
			t.Errorf("%s resolves a symbol itself (%s): list it for impl/dynlib, which checks every one", p, m)
		}
		for _, m := range open.FindAllString(s, -1) {
			if !strings.Contains(m, "RTLD_NOLOAD") && p != toolsLoader {
				t.Errorf("%s opens a library itself (%s): load it with impl/dynlib, which opens each library once", p, m)
			}
		}
	}
	if opens != 1 {
		t.Errorf("impl/dynlib/dynlib.c has %d dlopen calls, want its one: the patterns no longer match the sources", opens)
	}
}
