package hack

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMachine is a machine for hack/install-deps.sh: a PATH holding only
// the named tools (empty scripts; the script only asks whether they are
// there, except id, apt-get and sudo, which act), and a root directory
// holding the files the path checks look for.
type fakeMachine struct {
	uid      string   // what id -u prints
	tools    []string // commands on PATH besides id
	files    []string // paths that exist under the root
	aptGet   bool     // apt-get on PATH; it records its arguments
	sudoOK   bool     // sudo on PATH, and it needs no password
	aptFails bool
}

var allTools = []string{"clang", "wasm-ld", "wat2wasm", "node", "npm", "jq"}
var allFiles = []string{
	"/usr/lib/wasm32-wasi/libc.a",
	"/usr/lib/llvm-14/lib/clang/14.0.6/lib/wasi/libclang_rt.builtins-wasm32.a",
	"/usr/bin/rustc",
	"/usr/lib/rustlib/wasm32-wasi/lib/libstd.rlib",
}

func (m fakeMachine) run(t *testing.T, args ...string) (code int, stdout, stderr, aptLog string) {
	t.Helper()
	dir := t.TempDir()
	bin, root, log := filepath.Join(dir, "bin"), filepath.Join(dir, "root"), filepath.Join(dir, "apt.log")
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sh := "#!/bin/sh\n"
	write(filepath.Join(bin, "id"), sh+"echo "+m.uid+"\n")
	for _, tool := range m.tools {
		write(filepath.Join(bin, tool), sh)
	}
	for _, f := range m.files {
		write(filepath.Join(root, f), "")
	}
	if m.aptGet {
		exit := "0"
		if m.aptFails {
			exit = "100"
		}
		write(filepath.Join(bin, "apt-get"), sh+`echo "$SUDO apt-get $*" >>`+log+"\nexit "+exit+"\n")
	}
	if m.sudoOK {
		write(filepath.Join(bin, "sudo"), sh+`[ "$1" = -n ] && shift; [ "$1" = true ] && exit 0; SUDO=sudo exec "$@"`+"\n")
	}
	cmd := exec.Command("/bin/bash", append([]string{"install-deps.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + bin, "INSTALL_DEPS_ROOT=" + root}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	return code, out.String(), errOut.String(), string(b)
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, s := range list {
		keep := true
		for _, d := range drop {
			keep = keep && s != d
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

func TestInstallDeps(t *testing.T) {
	tests := []struct {
		name     string
		m        fakeMachine
		args     []string
		wantCode int
		wantOut  string // in stdout or stderr
		wantApt  string // the apt-get calls, in order; "" = none
	}{
		{
			name:     "everything there: nothing runs",
			m:        fakeMachine{uid: "0", tools: allTools, files: allFiles, aptGet: true},
			wantCode: 0,
		},
		{
			name:     "root installs what is missing, update first",
			m:        fakeMachine{uid: "0", tools: without(allTools, "clang", "wat2wasm"), files: without(allFiles, allFiles[1]), aptGet: true},
			wantCode: 0,
			wantOut:  "installing clang libclang-rt-14-dev-wasm32 wabt",
			wantApt: " apt-get update -q\n" +
				" apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev-wasm32 wabt\n",
		},
		{
			name:     "a failing apt-get fails the script",
			m:        fakeMachine{uid: "0", tools: without(allTools, "clang"), files: allFiles, aptGet: true, aptFails: true},
			wantCode: 100,
			wantApt:  " apt-get update -q\n",
		},
		{
			name:     "either linker name will do",
			m:        fakeMachine{uid: "0", tools: append(without(allTools, "wasm-ld"), "wasm-ld-14"), files: allFiles, aptGet: true},
			wantCode: 0,
		},
		{
			name:     "passwordless sudo installs",
			m:        fakeMachine{uid: "1000", tools: without(allTools, "wasm-ld"), files: allFiles, aptGet: true, sudoOK: true},
			wantCode: 0,
			wantApt:  "sudo apt-get update -q\nsudo apt-get install -y -q --no-install-recommends lld\n",
		},
		{
			name:     "not root and no sudo: the exact command, and stop",
			m:        fakeMachine{uid: "1000", tools: without(allTools, "clang"), files: allFiles[1:], aptGet: true},
			wantCode: 1,
			wantOut:  "  sudo apt-get update && sudo apt-get install -y --no-install-recommends clang wasi-libc\n",
		},
		{
			name:     "--check reports and installs nothing, even as root",
			m:        fakeMachine{uid: "0", tools: without(allTools, "wat2wasm"), files: allFiles, aptGet: true},
			args:     []string{"--check"},
			wantCode: 1,
			wantOut:  "missing: wabt\n",
		},
		{
			name:     "--check with everything there",
			m:        fakeMachine{uid: "1000", tools: allTools, files: allFiles},
			args:     []string{"--check"},
			wantCode: 0,
		},
		{
			// A rustup rustc on PATH has no wasm targets: Debian's is what
			// the Rust kit builds with, so only its files count.
			name:     "the Rust and AssemblyScript kits' toolchains",
			m:        fakeMachine{uid: "0", tools: append(without(allTools, "node", "npm"), "rustc"), files: allFiles[:2], aptGet: true},
			wantCode: 0,
			wantOut:  "installing rustc libstd-rust-dev-wasm32 nodejs npm",
			wantApt: " apt-get update -q\n" +
				" apt-get install -y -q --no-install-recommends rustc libstd-rust-dev-wasm32 nodejs npm\n",
		},
		{
			name:     "no apt-get: say so",
			m:        fakeMachine{uid: "0", tools: without(allTools, "clang"), files: allFiles},
			wantCode: 1,
			wantOut:  "missing: clang (Debian package names); this machine has no apt-get",
		},
		{
			name:     "unknown argument",
			m:        fakeMachine{uid: "0", tools: allTools, files: allFiles},
			args:     []string{"--frobnicate"},
			wantCode: 2,
			wantOut:  "unknown argument --frobnicate",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr, apt := tc.m.run(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, tc.wantOut) {
				t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", tc.wantOut, stdout, stderr)
			}
			if apt != tc.wantApt {
				t.Errorf("apt-get calls:\n%q\nwant\n%q", apt, tc.wantApt)
			}
		})
	}
}
