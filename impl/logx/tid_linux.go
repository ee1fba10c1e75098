package logx

import "syscall"

func gettid() int { return syscall.Gettid() }
