package filewatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWatchReportsContentChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(path, "v1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, started := make(chan string, 10), make(chan struct{})
	go func() {
		_ = Watch(ctx, path, Options{Debounce: 20 * time.Millisecond, Started: func() { close(started) },
			OnChange: func() {
				b, _ := os.ReadFile(path)
				changes <- string(b)
			}})
	}()
	<-started

	expect := func(want string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("change reported with content %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no change reported for %q", want)
		}
	}
	write(path, "v2") // in place
	expect("v2")
	tmp := filepath.Join(dir, ".config.yaml.swp")
	write(tmp, "v3")
	if err := os.Rename(tmp, path); err != nil { // replaced by rename
		t.Fatal(err)
	}
	expect("v3")
	write(path, "v3") // rewritten unchanged: nothing to report
	write(path, "v4")
	expect("v4")
}

func TestWatchFollowsSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, "..ts-"+v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "..ts-"+v, "config.yaml"), []byte("version "+v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..ts-a", filepath.Join(dir, "..data")))
	must(os.Symlink("..data/config.yaml", filepath.Join(dir, "config.yaml")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, started := make(chan string, 10), make(chan struct{})
	path := filepath.Join(dir, "config.yaml")
	go func() {
		_ = Watch(ctx, path, Options{Debounce: 20 * time.Millisecond, Started: func() { close(started) },
			OnChange: func() {
				b, _ := os.ReadFile(path)
				changes <- string(b)
			}})
	}()
	<-started
	// What the kubelet does: a new link, renamed over ..data.
	must(os.Symlink("..ts-b", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	select {
	case got := <-changes:
		if got != "version b" {
			t.Fatalf("content after the swap: %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("symlink swap not reported")
	}
}
