package impl

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A registration covers the connections declared when it was made; a write needs each of them
// set up; a later setup sets up only the new connection and the old registration keeps working.
func TestRegisteredWriteAcrossSetups(t *testing.T) {
	forRanks(t, 2, func(c *Comm) error {
		peer := 1 - c.Rank()
		conn := make([]byte, 64)
		reg1, reg2 := make([]byte, 256), make([]byte, 256)
		if err := c.Connect(peer, 0, unsafe.Pointer(&conn[0]), 64, TransportSHM, nil, true); err != nil {
			return err
		}
		one, err := c.RegisterBuffer(unsafe.Pointer(&reg1[0]), 256) // before any setup
		if err != nil || len(one) != 1 {
			return fmt.Errorf("first registration: %d entries, %v", len(one), err)
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		if err := c.Connect(peer, 1, unsafe.Pointer(&conn[0]), 64, TransportSHM, nil, true); err != nil {
			return err
		}
		two, err := c.RegisterBuffer(unsafe.Pointer(&reg2[0]), 256)
		if err != nil || len(two) != 2 {
			return fmt.Errorf("second registration: %d entries, %v", len(two), err)
		}
		src := []byte("0123456789abcdef")
		if err := c.RegisteredBufferWrite(two, unsafe.Pointer(&src[0]), 4, 2, 10, 0); status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "not set up") {
			return fmt.Errorf("write over a connection not set up: %v", err)
		}
		if err := c.RegisteredBufferWrite(one, unsafe.Pointer(&src[0]), 4, 1, 7, 0); err != nil {
			return fmt.Errorf("write through the first registration: %w", err)
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		if err := c.RegisteredBufferWrite(two, unsafe.Pointer(&src[0]), 5, 3, 20, 0); err != nil {
			return fmt.Errorf("write through the second registration: %w", err)
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if !bytes.Equal(reg1[7:11], src[1:5]) || reg1[6] != 0 || reg1[11] != 0 {
			return fmt.Errorf("first registration holds %q", reg1[:16])
		}
		if !bytes.Equal(reg2[20:25], src[3:8]) || reg2[19] != 0 || reg2[25] != 0 {
			return fmt.Errorf("second registration holds %q", reg2[16:32])
		}
		return nil
	})
}
