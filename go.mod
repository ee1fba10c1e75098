module github.com/mscclpp-go/mscclpp

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.50.0
)
