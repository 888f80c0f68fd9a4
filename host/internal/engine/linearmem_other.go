//go:build !unix

package engine

import "errors"

const mappedMemorySupported = false

var errNoMapping = errors.New("no mapped memory on this platform")

func reserve(uint64) ([]byte, error) { return nil, errNoMapping }
func protect([]byte) error           { return errNoMapping }
func unmap([]byte) error             { return nil }
