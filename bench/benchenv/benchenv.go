package benchenv

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

//go:embed testdata/pod.json
var podJSON []byte

// PodJSON is the full Pod the benchmarks deliver, as the apiserver would
// send it (5.9 KB compact; two containers, probes, volumes, statuses; no
// managedFields, which the host strips by default).
func PodJSON() []byte { return podJSON }

// Pod returns a fresh copy of the full Pod, decoded as client-go decodes
// watch events (integers as int64).
func Pod() *unstructured.Unstructured { return mustDecode(podJSON) }

// metaJSON is a metadata-sized object: a ConfigMap with nothing but
// metadata, about 330 bytes.
const metaJSON = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"checkout-flags","namespace":"shop",` +
	`"uid":"5d0c9a71-2e4f-4b8a-9c3d-7e1f0a2b6c48","resourceVersion":"48213391","creationTimestamp":"2026-05-04T10:22:07Z",` +
	`"labels":{"app":"checkout","app.kubernetes.io/name":"checkout","tier":"web"}}}`

// MetaJSON is the metadata-sized object's JSON.
func MetaJSON() []byte { return []byte(metaJSON) }

// Meta returns a fresh copy of the metadata-sized object.
func Meta() *unstructured.Unstructured { return mustDecode([]byte(metaJSON)) }

func mustDecode(b []byte) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return u
}

// Objects are the two object sizes every per-event benchmark runs with.
var Objects = []struct {
	Name string
	New  func() *unstructured.Unstructured
	Ref  *event.ResourceRef
}{
	{"meta", Meta, &event.ResourceRef{Name: "configmaps", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}},
	{"pod", Pod, &event.ResourceRef{Name: "pods", Version: "v1", Resource: "pods", Kind: "Pod"}},
}

// TwoFields are the two fields the "two fields" guests and their native
// counterpart read, present in both objects.
var TwoFields = []string{`metadata.labels["app.kubernetes.io/name"]`, "metadata.uid"}

// CPU returns the CPU time (user + system) this process has used so far,
// every thread included.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Wakeups estimates how many times this process's goroutines have been
// scheduled to run so far: the runtime records the scheduling latency of
// one in every 8 transitions of each goroutine from runnable to running
// (runtime2.go, gTrackingPeriod), so 8 times that histogram's count
// estimates the wake-ups (a goroutine that blocked or was preempted made
// to run again), the cost a hand-over between goroutines adds beyond the
// work itself.
func Wakeups() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return 8 * n
}

// Root returns the repository root: the nearest directory above the
// working directory whose go.mod declares this module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/informer-host/informer-host\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("benchenv: not inside the informer-host repository")
		}
		dir = parent
	}
}

// A Plugin is one of the benchmark plugins in bench/plugins.
type Plugin struct {
	Name string // file name without .wasm
	Lang string // "go", "c", "wat", "rust" or "as" (AssemblyScript)
	Src  string // the package directory (go) or source file, relative to the root
}

// Plugins lists the benchmark plugins.
var Plugins = map[string]Plugin{
	// Go, through abi/kit: the handler returns at once (the kit still
	// reads and parses the header).
	"noop-go": {"noop-go", "go", "bench/plugins/noop"},
	// Go: reads two fields with field_read; optionally records when each
	// event entered the handler (the e2e harness's latency probe).
	"twofields": {"twofields", "go", "bench/plugins/twofields"},
	// Go importing k8s.io/api: decodes every object into its typed struct.
	"k8sapi": {"k8sapi", "go", "bench/plugins/k8sapi"},
	// Go: decodes every object into map[string]any with encoding/json.
	"decode-go": {"decode-go", "go", "bench/plugins/decode"},
	// C: returns at once (logs one line on an instance's first event).
	"noop-c": {"noop-c", "c", "bench/plugins/noop-c/noop.c"},
	// C: noop-c with the optional ih_handle_batch export (ABI v1.4).
	"noop-c-batch": {"noop-c-batch", "c", "bench/plugins/noop-c/batch.c"},
	// Rust, through the abi/rust kit, with its optional ih_handle_batch
	// export: the handler returns at once.
	"noop-rs": {"noop-rs", "rust", "bench/plugins/noop-rs/noop.rs"},
	// AssemblyScript, through the abi/assemblyscript kit, with its
	// optional ih_handle_batch export: the handler returns at once.
	"noop-as": {"noop-as", "as", "bench/plugins/noop-as/noop.ts"},
	// WAT: returns at once.
	"noop-wat": {"noop-wat", "wat", "bench/plugins/wat/noop.wat"},
	// WAT: copies the whole object (object_read) into its memory.
	"object-wat": {"object-wat", "wat", "bench/plugins/wat/object.wat"},
	// WAT: traps on every event.
	"trap-wat": {"trap-wat", "wat", "bench/plugins/wat/trap.wat"},
	// WAT: loops until its call deadline kills it.
	"spin-wat": {"spin-wat", "wat", "bench/plugins/wat/spin.wat"},
}

var buildMu sync.Mutex

// Build builds plugin name into build/bench/plugins/<name>.wasm under the
// root, unless that file is newer than every source it depends on, and
// returns its path. Go plugins need only the Go toolchain; C plugins
// clang with a wasm32-wasi sysroot ($CLANG, $WASI_SYSROOT), WAT plugins
// wat2wasm ($WAT2WASM), Rust plugins Debian's rustc with its wasm32-wasi
// std ($RUSTC_WASM), AssemblyScript plugins the kit's pinned asc in
// abi/assemblyscript/node_modules (npm ci there; make plugins does it),
// with the flags mk/kits.mk uses.
func Build(name string) (string, error) {
	p, ok := Plugins[name]
	if !ok {
		return "", fmt.Errorf("benchenv: no benchmark plugin %q", name)
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	out := filepath.Join(root, "build", "bench", "plugins", name+".wasm")
	deps := []string{filepath.Join(root, p.Src)}
	switch p.Lang {
	case "go":
		deps = append(deps, filepath.Join(root, "abi"), filepath.Join(root, "abi", "kit"),
			filepath.Join(root, "bench", "plugins", "internal", "rec"), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	case "c":
		deps = append(deps, filepath.Join(root, "abi", "include"))
	case "rust":
		deps = append(deps, filepath.Join(root, "abi", "rust", "src"))
	case "as":
		deps = append(deps, filepath.Join(root, "abi", "assemblyscript", "assembly"))
	}
	if fresh(out, deps) {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	// Build next to the target and rename: test binaries of several
	// packages may build the same plugin at once.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	defer os.Remove(tmp)
	var cmds []*exec.Cmd
	switch p.Lang {
	case "go":
		cmd := exec.Command(envOr("GO", "go"), "build", "-buildmode=c-shared", "-trimpath", "-o", tmp, "./"+p.Src)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		cmds = append(cmds, cmd)
	case "c":
		cmds = append(cmds, exec.Command(envOr("CLANG", "clang"), "--target=wasm32-wasi", "--sysroot="+envOr("WASI_SYSROOT", "/usr"),
			"-mexec-model=reactor", "-Iabi/include", "-O2", "-Wl,--strip-debug", "-o", tmp, p.Src))
	case "wat":
		cmds = append(cmds, exec.Command(envOr("WAT2WASM", "wat2wasm"), "-o", tmp, p.Src))
	case "rust":
		// The kit as an rlib of its own (a plugin links it with --extern;
		// rustc wants it named lib*.rlib), in a directory of this build's
		// own for the same reason as tmp.
		dir, err := os.MkdirTemp(filepath.Dir(out), name+".rlib.")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		rustc, rlib := envOr("RUSTC_WASM", "/usr/bin/rustc"), filepath.Join(dir, "libinformer_host.rlib")
		flags := []string{"--edition", "2021", "-O", "-C", "strip=debuginfo", "--target", "wasm32-wasi"}
		cmds = append(cmds,
			exec.Command(rustc, append(flags, "--crate-type", "rlib", "--crate-name", "informer_host", "-o", rlib, "abi/rust/src/lib.rs")...),
			exec.Command(rustc, append(flags, "--crate-type", "cdylib", "--extern", "informer_host="+rlib, "-o", tmp, p.Src)...))
	case "as":
		asc := filepath.Join(root, "abi", "assemblyscript", "node_modules", ".bin", "asc")
		if _, err := os.Stat(asc); err != nil {
			return "", fmt.Errorf("benchenv: build %s: no AssemblyScript compiler (run `make plugins`, which runs npm ci in abi/assemblyscript): %w", name, err)
		}
		cmds = append(cmds, exec.Command(asc, p.Src, "-o", tmp, "-O", "--debug", "--use", "abort=abi/assemblyscript/assembly/index/abort"))
	}
	for _, cmd := range cmds {
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("benchenv: build %s: %v\n%s", name, err, b)
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// Wasm builds plugin name if needed and returns its bytes.
func Wasm(name string) ([]byte, error) {
	path, err := Build(name)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// fresh reports whether out exists and is newer than every file in deps
// (directories are scanned one level deep).
func fresh(out string, deps []string) bool {
	st, err := os.Stat(out)
	if err != nil {
		return false
	}
	for _, d := range deps {
		ds, err := os.Stat(d)
		if err != nil {
			return false
		}
		if !ds.IsDir() {
			if ds.ModTime().After(st.ModTime()) {
				return false
			}
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if info, err := e.Info(); err == nil && !e.IsDir() && info.ModTime().After(st.ModTime()) {
				return false
			}
		}
	}
	return true
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// WithNonce returns wasm with a custom section appended that holds nonce.
// The code is unchanged, but the bytes (and so the sha256 that keys every
// compilation cache) are new: a "cold" load of a module the host has
// never seen, without rebuilding it.
func WithNonce(wasm []byte, nonce string) []byte {
	name := "informer-host-bench-nonce"
	payload := append(uleb(uint64(len(name))), name...)
	payload = append(payload, nonce...)
	out := append([]byte(nil), wasm...)
	out = append(out, 0) // custom section
	out = append(out, uleb(uint64(len(payload)))...)
	return append(out, payload...)
}

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
