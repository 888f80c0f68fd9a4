package engine

import (
	"context"
	"strings"
	"testing"
	"time"
)

// AssemblyScript imports env.abort unless built with --use abort=...; the
// refusal says how, as ABI.md section 2 does.
func TestEnvAbortRefusalSaysHow(t *testing.T) {
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "as.wasm", fixture(t, "unknown-import"), Limits{CallTimeout: time.Second})
	if err == nil {
		m.Close(context.Background())
		t.Fatal("loaded")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.Contains(line, `"env"."abort"`) {
			if !strings.Contains(line, "build with --use abort= (abort traps) or --use abort=<file>/<function>") {
				t.Errorf("the env.abort refusal gives no hint: %s", line)
			}
			return
		}
	}
	t.Errorf("no env.abort refusal in: %v", err)
}
