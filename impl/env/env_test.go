package env

import (
	"testing"
)

func TestLookupSeesSetenvAndReportsOncePerValue(t *testing.T) {
	Forget()
	var got []string
	SetReporter(func(name, value string) { got = append(got, name+"="+value) })
	defer SetReporter(nil)
	const name = "MSCCLPP_ENV_TEST_VARIABLE"
	if v, ok := Lookup(name); ok || v != "" {
		t.Fatalf("unset variable: Lookup = %q, %v", v, ok)
	}
	t.Setenv(name, "one") // in a cgo program this is the C library's setenv
	for range 3 {
		if v := Get(name); v != "one" {
			t.Fatalf("Get = %q, want one", v)
		}
	}
	t.Setenv(name, "two")
	if v, ok := Lookup(name); !ok || v != "two" {
		t.Fatalf("Lookup = %q, %v, want two", v, ok)
	}
	if v, ok := Raw(name); !ok || v != "two" {
		t.Fatalf("Raw = %q, %v", v, ok)
	}
	want := []string{name + "=one", name + "=two"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("reports %q, want %q", got, want)
	}
	t.Setenv(name, "")
	if v, ok := Lookup(name); !ok || v != "" {
		t.Fatalf("empty variable: Lookup = %q, %v", v, ok)
	}
	if len(got) != 2 {
		t.Fatalf("an empty value was reported: %q", got)
	}
}

func BenchmarkLookupSet(b *testing.B) {
	b.Setenv("MSCCLPP_ENV_BENCH", "7")
	for b.Loop() {
		Lookup("MSCCLPP_ENV_BENCH")
	}
}

func BenchmarkRawSet(b *testing.B) {
	b.Setenv("MSCCLPP_ENV_BENCH", "7")
	for b.Loop() {
		Raw("MSCCLPP_ENV_BENCH")
	}
}
