package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestStartCPUProfileWritesAProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertProfile(t, file)
}

func TestWriteHeapProfileWritesAProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "heap.pprof")
	if err := writeHeapProfile(file); err != nil {
		t.Fatal(err)
	}
	assertProfile(t, file)
}

func TestWriteHeapProfileNamesAnUnwritableFile(t *testing.T) {
	if err := writeHeapProfile(filepath.Join(t.TempDir(), "missing", "heap.pprof")); err == nil {
		t.Fatal("no error for a file in a directory that does not exist")
	}
}

// assertProfile fails t unless file holds a pprof profile.
func assertProfile(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is a gzipped protocol buffer.
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("%s is not a gzipped profile: % x", file, b[:min(len(b), 8)])
	}
}

func TestStartCPUProfileNamesAnUnwritableFile(t *testing.T) {
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil {
		t.Fatal("no error for a file in a directory that does not exist")
	}
}

func TestWriteAllocProfileWritesAProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "allocs.pprof")
	if err := writeAllocProfile(file); err != nil {
		t.Fatal(err)
	}
	assertProfile(t, file)
	if err := writeAllocProfile(filepath.Join(t.TempDir(), "missing", "allocs.pprof")); err == nil {
		t.Fatal("no error for a file in a directory that does not exist")
	}
}
