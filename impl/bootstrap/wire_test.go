package bootstrap

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// tests/c/adversary.c speaks the protocol from C, with its own copy of the version: the
// two must agree, or its forged hellos are refused for their version, not for their key.
func TestAdversaryWireVersion(t *testing.T) {
	src, err := os.ReadFile("../../tests/c/adversary.c")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define WIRE_VERSION (\d+)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("tests/c/adversary.c defines no WIRE_VERSION")
	}
	if v, _ := strconv.Atoi(string(m[1])); v != wireVersion {
		t.Fatalf("tests/c/adversary.c's WIRE_VERSION is %d, wireVersion %d", v, wireVersion)
	}
}
