package status

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestStrings(t *testing.T) {
	want := map[Code]string{
		0: "no error", 1: "unhandled cuda error", 2: "unhandled system error", 3: "internal error",
		4: "invalid argument", 5: "invalid usage", 6: "remote process exited or there was a network error",
		7: "MSCCL++ operation in progress", 8: "unknown result code", -1: "unknown result code",
	}
	for c, s := range want {
		if got := c.String(); got != s {
			t.Errorf("Code(%d).String() = %q, want %q", c, got, s)
		}
	}
}

func TestCodeOfWrapped(t *testing.T) {
	base := Errorf(InvalidArgument, "rank %d out of range", 9)
	wrapped := fmt.Errorf("connect: %w", base)
	if got := CodeOf(wrapped); got != InvalidArgument {
		t.Fatalf("CodeOf(wrapped) = %v, want InvalidArgument", got)
	}
	if got := wrapped.Error(); got != "connect: rank 9 out of range" {
		t.Fatalf("message %q", got)
	}
	cause := Errorf(RemoteError, "allgather with rank %d: %w", 2, syscall.ECONNRESET)
	if CodeOf(cause) != RemoteError {
		t.Fatal("cause code lost")
	}
	if got := cause.Error(); got != "allgather with rank 2: connection reset by peer" {
		t.Fatalf("message %q repeats or loses the cause", got)
	}
	if CodeOf(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)) != RemoteError {
		t.Fatal("deadline is not RemoteError")
	}
	if CodeOf(fmt.Errorf("mmap: %w", syscall.ENOMEM)) != SystemError {
		t.Fatal("errno is not SystemError")
	}
	if CodeOf(fmt.Errorf("plain")) != InternalError || CodeOf(nil) != Success {
		t.Fatal("fallbacks wrong")
	}
}
