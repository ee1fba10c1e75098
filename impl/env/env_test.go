package env

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

func TestLookupSeesSetenvAndReportsOncePerValue(t *testing.T) {
	Forget()
	var got []string
	SetReporter(func(name, value string) { got = append(got, name+"="+value) })
	defer SetReporter(nil)
	const name = "MSCCLPP_ENV_TEST_VARIABLE"
	v := Var(name)
	if v, ok := v.Lookup(); ok || v != "" {
		t.Fatalf("unset variable: Lookup = %q, %v", v, ok)
	}
	t.Setenv(name, "one") // in a cgo program this is the C library's setenv
	for range 3 {
		if v := v.Get(); v != "one" {
			t.Fatalf("Get = %q, want one", v)
		}
	}
	t.Setenv(name, "two")
	if v, ok := v.Lookup(); !ok || v != "two" {
		t.Fatalf("Lookup = %q, %v, want two", v, ok)
	}
	if v, ok := v.Raw(); !ok || v != "two" {
		t.Fatalf("Raw = %q, %v", v, ok)
	}
	want := []string{name + "=one", name + "=two"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("reports %q, want %q", got, want)
	}
	t.Setenv(name, "")
	if v, ok := v.Lookup(); !ok || v != "" {
		t.Fatalf("empty variable: Lookup = %q, %v", v, ok)
	}
	if len(got) != 2 {
		t.Fatalf("an empty value was reported: %q", got)
	}
}

func BenchmarkLookupSet(b *testing.B) {
	b.Setenv("MSCCLPP_ENV_BENCH", "7")
	for b.Loop() {
		Var("MSCCLPP_ENV_BENCH").Lookup()
	}
}

func BenchmarkRawSet(b *testing.B) {
	b.Setenv("MSCCLPP_ENV_BENCH", "7")
	for b.Loop() {
		Var("MSCCLPP_ENV_BENCH").Raw()
	}
}

// TestSecretNeverReported: MSCCLPP_BOOTSTRAP_SECRET read with a value is reported as set, never
// with the value.
func TestSecretNeverReported(t *testing.T) {
	Forget()
	var got []string
	SetReporter(func(name, value string) { got = append(got, name+"="+value) })
	defer SetReporter(nil)
	t.Setenv(string(BootstrapSecret), "hunter2")
	if v := BootstrapSecret.Get(); v != "hunter2" {
		t.Fatalf("Get = %q", v)
	}
	if want := string(BootstrapSecret) + "=a value (not shown)"; len(got) != 1 || got[0] != want {
		t.Fatalf("reports %q, want [%q]", got, want)
	}
}

// TestTableListsEveryVar: every Var constant of vars.go is in the table Declared searches, so
// a transport may name any of them in its Entry.Settings.
func TestTableListsEveryVar(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "vars.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, id := range s.(*ast.ValueSpec).Names {
				n++
				lit := s.(*ast.ValueSpec).Values[0].(*ast.BasicLit).Value
				name := lit[1 : len(lit)-1]
				if v, ok := Declared(name); !ok || string(v) != name {
					t.Errorf("%s (%s) is not in vars.go's table", id.Name, name)
				}
			}
		}
	}
	if n != len(table) {
		t.Errorf("vars.go declares %d variables, its table lists %d", n, len(table))
	}
	if _, ok := Declared("MSCCLPP_NO_SUCH_VARIABLE"); ok {
		t.Error("Declared found a variable the table does not have")
	}
}
