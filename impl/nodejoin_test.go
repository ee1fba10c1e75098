package impl

import (
	"errors"
	"strings"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// offThread hands back f's value and error, and turns a panic of f into an InternalError
// (it would otherwise end the process: the C entry point's recover cannot see it).
func TestOffThread(t *testing.T) {
	v, err := offThread(func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("got %d, %v", v, err)
	}
	boom := errors.New("boom")
	if _, err := offThread(func() (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	_, err = offThread(func() (*int, error) { panic("kaput") })
	if status.CodeOf(err) != status.InternalError || !strings.Contains(err.Error(), "kaput") {
		t.Fatalf("a panic gave %v", err)
	}
}

// localRanks: the ranks sharing rank's host id, numbered in rank order, and the lowest of them.
func TestLocalRanks(t *testing.T) {
	local, leader := localRanks([]string{"a", "b", "a", "b", "b"}, 3)
	if leader != 1 || len(local) != 3 || local[1] != 0 || local[3] != 1 || local[4] != 2 {
		t.Fatalf("local %v leader %d", local, leader)
	}
}
