package p2p

import (
	"strings"
	"testing"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

func TestModeChoice(t *testing.T) {
	if p, err := devicePolicy("host", true); p != deviceHost || err != nil {
		t.Fatalf("MSCCLPP_DEVICE=host: %v, %v", p, err)
	}
	// auto never fails at init: the mode is decided at the first P2P connection
	if p, err := devicePolicy("", true); p != deviceAuto || err != nil {
		t.Fatalf("auto: %v, %v", p, err)
	}
	if _, err := devicePolicy("tpu", true); status.CodeOf(err) != status.InvalidArgument {
		t.Fatalf("MSCCLPP_DEVICE=tpu: %v", err)
	}
	if cuda.Init() == nil {
		t.Skip("CUDA initialises here: the no-GPU checks do not apply")
	}
	_, err := devicePolicy("cuda", true)
	if err == nil || !strings.Contains(err.Error(), "MSCCLPP_DEVICE=cuda") {
		t.Fatalf("MSCCLPP_DEVICE=cuda without a GPU: %v", err)
	}
	if c := status.CodeOf(err); c != status.UnhandledCudaError && c != status.InvalidUsage {
		t.Fatalf("MSCCLPP_DEVICE=cuda without a GPU: code %v", c)
	}
	t.Logf("MSCCLPP_DEVICE=cuda here: %v", err)
}
