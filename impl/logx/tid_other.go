//go:build !linux

package logx

import "os"

// gettid has no portable equivalent; the pid keeps lines well formed.
func gettid() int { return os.Getpid() }
