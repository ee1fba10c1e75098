package sysinfo

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ProcessGone reports whether process pid has exited (no such process, or a zombie not yet
// reaped); a pid of 0 or less is never gone. It is the Go twin of the engine's C check
// (impl/engine/engine.c engProcessGone), for layers that may not import the engine.
func ProcessGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+1] == ' ' && (b[i+2] == 'Z' || b[i+2] == 'X')
}
