// Command capi is built with -buildmode=c-shared into libmscclpp.so: the C
// entry points of the MSCCL++ 0.1 API. Each call is checked, converted and
// dispatched to one function of package impl; nothing else lives here.
package main

// #cgo CFLAGS: -O2 -Wall
// #cgo CXXFLAGS: -O2 -Wall -std=c++17
import "C"
