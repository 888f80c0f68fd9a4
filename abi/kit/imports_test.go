package kit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// The controller-mode imports are reachable only through
// HandleReconcile: an event-mode plugin built with the kit imports none
// of them, so it requests no writes capability for them and loads on a
// host older than v1.5; a controller-mode plugin imports all three.
func TestControllerImportsOnlyWithAReconciler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two plugins for wasip1, which -short leaves out")
	}
	controller := []string{abi.ImportReconcileRequeueAfter, abi.ImportChildrenApply, abi.ImportStatusApply}
	for _, c := range []struct {
		dir  string
		want bool
	}{{"eventonly", false}, {"reconciler", true}} {
		t.Run(c.dir, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), c.dir+".wasm")
			cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./testdata/"+c.dir)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, b)
			}
			wasm, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			imports, err := wasmImports(wasm)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range controller {
				if got := slices.Contains(imports, abi.ImportModule+"."+name); got != c.want {
					t.Errorf("imports %s: %t, want %t (imports: %v)", name, got, c.want, imports)
				}
			}
		})
	}
}

// wasmImports lists a module's imports as "module.name".
func wasmImports(b []byte) ([]string, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) {
		return nil, errors.New("not a wasm module")
	}
	r := bytes.NewReader(b[8:])
	name := func() (string, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return "", errors.New("bad name")
		}
		s := make([]byte, n)
		_, err = r.Read(s)
		return string(s), err
	}
	for r.Len() > 0 {
		id, _ := r.ReadByte()
		size, err := binary.ReadUvarint(r)
		if err != nil || size > uint64(r.Len()) {
			return nil, errors.New("bad section")
		}
		if id != 2 {
			_, _ = r.Seek(int64(size), 1)
			continue
		}
		count, _ := binary.ReadUvarint(r)
		var out []string
		for i := uint64(0); i < count; i++ {
			mod, err := name()
			if err != nil {
				return nil, err
			}
			field, err := name()
			if err != nil {
				return nil, err
			}
			kind, _ := r.ReadByte()
			switch kind {
			case 0: // a function: its type index
				_, err = binary.ReadUvarint(r)
			default:
				return nil, errors.New("kit plugins import functions only")
			}
			if err != nil {
				return nil, err
			}
			out = append(out, mod+"."+field)
		}
		return out, nil
	}
	return nil, errors.New("no import section")
}
