//go:build unix

package engine

import "syscall"

const mappedMemorySupported = true

// reserve maps n bytes of address space without access: no page is
// backed and nothing counts against the commit limit until protect.
func reserve(n uint64) ([]byte, error) {
	if n == 0 {
		n = 1 // a zero-length mapping is invalid; an empty memory still has a base
	}
	return syscall.Mmap(-1, 0, int(n), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// protect makes b, page aligned (wasm pages are 64 KiB), readable and
// writable; the kernel backs each page with zeros on first touch.
func protect(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return syscall.Mprotect(b, syscall.PROT_READ|syscall.PROT_WRITE)
}

func unmap(b []byte) error { return syscall.Munmap(b) }
