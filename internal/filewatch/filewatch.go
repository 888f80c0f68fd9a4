package filewatch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Options configure Watch.
type Options struct {
	// Debounce is how long the file must be quiet before it is read.
	Debounce time.Duration
	// Rescan is the period of a look without an event (0: never), for file
	// systems that deliver no events.
	Rescan time.Duration
	// OnChange is called each time the content changes. It runs on
	// Watch's goroutine; calls never overlap.
	OnChange func()
	// Started, if set, is called once the watch is in place: changes from
	// then on are reported.
	Started func()
}

// Watch reports changes of path's content until ctx ends.
func Watch(ctx context.Context, path string, o Options) error {
	debounce, rescan, onChange := o.Debounce, o.Rescan, o.OnChange
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	last, _ := os.ReadFile(path)
	if o.Started != nil {
		o.Started()
	}
	var tick <-chan time.Time
	if rescan > 0 {
		t := time.NewTicker(rescan)
		defer t.Stop()
		tick = t.C
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	check := func() {
		cur, err := os.ReadFile(path)
		if err != nil || bytes.Equal(cur, last) {
			return // gone for a moment (a rename in progress) or unchanged
		}
		last = cur
		onChange()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Base(ev.Name)
			if name == base || strings.HasPrefix(name, "..") {
				timer.Reset(debounce)
			}
		case _, ok := <-w.Errors:
			if !ok {
				return nil
			}
			timer.Reset(debounce)
		case <-timer.C:
			check()
		case <-tick:
			check()
		}
	}
}
