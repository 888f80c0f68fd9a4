package housemap

import (
	"slices"
	"strings"
	"testing"
)

// The rules of direction (RATIONALE.md, "Project structure"): cmd →
// internal/daemon → host → engine → abi, and each package below may not
// reach the ones above it. A rule names a package and the packages it
// must not depend on, directly or not; a name ending in "/..." is the
// package and everything under it.
var directionRules = []struct {
	pkg, why  string
	forbidden []string
}{
	{"host/internal/engine", "the engine runs Wasm; what a capability reaches, the host hands it as an interface",
		[]string{"informer", "internal/state", "host", "host/replay", "host/inspect", "internal/...", "cmd/..."}},
	{"informer", "the pipeline knows listeners, not plugins",
		[]string{"host/...", "internal/state", "cmd/..."}},
	{"event", "the one event type is a leaf every package shares",
		[]string{"..."}},
	{"host/...", "the library does not reach back into the daemon that embeds it",
		[]string{"cmd/...", "internal/daemon", "internal/server"}},
	{"internal/pluginsource", "the sources reach the host through an interface, and the daemon only by being run",
		[]string{"host/...", "internal/daemon", "internal/server", "cmd/..."}},
	{"internal/ociartifact/...", "the registry client moves bytes; what a module is and what config.yaml says are its callers'",
		[]string{"host/...", "internal/daemon", "internal/config", "informer", "cmd/..."}},
	{"internal/sigverify", "verification is a library the daemon calls with a policy it built, not a part of the daemon or the host",
		[]string{"host/...", "internal/daemon", "internal/config"}},
	{"internal/...", "nothing reaches into the command",
		[]string{"cmd/..."}},
}

// matches reports whether import path p (relative to the module) is
// pattern or, for a pattern ending in "/...", under it.
func matches(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// ownPath returns p relative to the daemon module, or false for a
// package of another module (the abi module included: everyone may
// import it).
func ownPath(p string) (string, bool) {
	r, ok := strings.CutPrefix(p, module+"/")
	if !ok || r == "abi" || strings.HasPrefix(r, "abi/") {
		return "", false
	}
	return r, true
}

func TestRulesOfDirection(t *testing.T) {
	pkgs := goList(t, "./...")
	for _, rule := range directionRules {
		t.Run(rule.pkg, func(t *testing.T) {
			checked := 0
			for _, p := range pkgs {
				self, ok := ownPath(p.ImportPath)
				if !ok || !matches(rule.pkg, self) {
					continue
				}
				checked++
				for _, d := range p.Deps {
					dep, ok := ownPath(d)
					if !ok || matches(rule.pkg, dep) {
						continue
					}
					for _, f := range rule.forbidden {
						if matches(f, dep) {
							t.Errorf("%s depends on %s, which the rules of direction forbid (%s); `go list -deps %s/%s` shows the path",
								self, dep, rule.why, module, self)
							break
						}
					}
				}
			}
			if checked == 0 {
				t.Errorf("no package matches %s: the rule names a package that is gone", rule.pkg)
			}
		})
	}
}

// Nothing imports a command, not even a test: what two commands share
// belongs in a package.
func TestNothingImportsCmd(t *testing.T) {
	for _, p := range goList(t, "./...", "./abi/...") {
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if r, ok := ownPath(imp); ok && matches("cmd/...", r) {
				t.Errorf("%s imports %s: nothing may import a command", p.ImportPath, imp)
			}
		}
	}
}

// The abi module is the plugin author's stable surface and builds for
// wasip1: its packages depend on the standard library and on one another
// only.
func TestABIModuleImportsOnlyTheStandardLibrary(t *testing.T) {
	for _, p := range goList(t, "-deps", "./abi/...") {
		if p.Standard || p.ImportPath == module+"/abi" || strings.HasPrefix(p.ImportPath, module+"/abi/") {
			continue
		}
		t.Errorf("the abi module depends on %s: it may use the standard library only (RATIONALE.md, \"Project structure\")", p.ImportPath)
	}
}
