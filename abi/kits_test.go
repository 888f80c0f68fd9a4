package abi

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kitSources is each kit's source text, by KITS.md's column: the files
// that declare its API (tests excluded).
type kitSources struct{ goKit, goFake, rust, as, c string }

func readKitSources(t *testing.T) kitSources {
	t.Helper()
	read := func(pattern string) string {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no kit sources match %s: %v", pattern, err)
		}
		var b strings.Builder
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "tests.rs") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
			b.WriteByte('\n')
		}
		return b.String()
	}
	return kitSources{
		goKit:  read("kit/*.go"),
		goFake: read("kit/kittest/*.go"),
		rust:   read("rust/src/*.rs"),
		as:     read("assemblyscript/assembly/*.ts") + read("assemblyscript/fake/*.mjs"),
		c:      read("include/informer_host*.h"),
	}
}

func declared(src, pattern string) bool { return regexp.MustCompile(pattern).MatchString(src) }

// kitSymbolDeclared reports whether name, as KITS.md writes it for the
// kit of column col (1 Go, 2 Rust, 3 AssemblyScript, 4 C), is declared
// in that kit's sources.
func kitSymbolDeclared(s kitSources, col int, name string) bool {
	q := regexp.QuoteMeta
	switch col {
	case 1:
		both := s.goKit + s.goFake
		if pkg, f, ok := strings.Cut(name, "."); ok {
			switch pkg {
			case "kit":
				return declared(s.goKit, `(?m)^func `+q(f)+`\(`)
			case "kittest":
				return declared(s.goFake, `(?m)^func `+q(f)+`\(`)
			}
			return declared(both, `(?m)^func \(\w+ \*?`+q(pkg)+`\) `+q(f)+`\(`)
		}
		return declared(both, `(?m)^type `+q(name)+` `)
	case 2:
		if m, ok := strings.CutSuffix(name, "!"); ok {
			return declared(s.rust, `macro_rules! `+q(m)+`\b`)
		}
		fn := name
		if owner, f, ok := strings.Cut(name, "::"); ok {
			if !declared(s.rust, `\b(pub mod|struct|enum|impl) `+q(owner)+`\b`) {
				return false
			}
			fn = f
		}
		return declared(s.rust, `\bpub (const )?(unsafe )?fn `+q(fn)+`\b`)
	case 3:
		if class, m, ok := strings.Cut(name, "."); ok {
			return declared(s.as, `\bclass `+q(class)+`\b`) &&
				declared(s.as, `(?m)^\s+(get |static |async |static async )?`+q(m)+`\(|\bthis\.`+q(m)+` = `)
		}
		return declared(s.as, `\bexport function `+q(name)+`\(`)
	case 4:
		return declared(s.c, `[A-Za-z0-9_]\s+\*?`+q(name)+`\s*\(`)
	}
	return false
}

// KITS.md's table names only what the kits declare: every name in a
// kit's column is a function, method, type or macro of that kit.
func TestKitsTableNamesExist(t *testing.T) {
	doc, err := os.ReadFile("KITS.md")
	if err != nil {
		t.Fatal(err)
	}
	src := readKitSources(t)
	name := regexp.MustCompile("`([^`]+)`")
	rows := 0
	inTable := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| capability |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if rows > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			t.Errorf("KITS.md row %q has %d cells, want 5 (capability, Go, Rust, AssemblyScript, C)", line, len(cells))
			continue
		}
		rows++
		for col := 1; col < 5; col++ {
			for _, m := range name.FindAllStringSubmatch(cells[col], -1) {
				if !kitSymbolDeclared(src, col, m[1]) {
					t.Errorf("KITS.md, %s: %s names %s, which its sources do not declare", strings.TrimSpace(cells[0]),
						[]string{"", "Go", "Rust", "AssemblyScript", "C"}[col], m[1])
				}
			}
		}
	}
	if rows < 30 {
		t.Errorf("KITS.md's table has %d rows: the test did not find it", rows)
	}
}

// The check itself tells a declared name from one that is not.
func TestKitSymbolDeclared(t *testing.T) {
	src := readKitSources(t)
	for _, tc := range []struct {
		col  int
		name string
		want bool
	}{
		{1, "kit.Handle", true}, {1, "kit.Nope", false}, {1, "Cluster.Apply", true}, {1, "Cluster.Nope", false},
		{1, "kittest.New", true}, {1, "Host.Writes", true}, {1, "Response", true}, {1, "Nope", false},
		{2, "plugin!", true}, {2, "nope!", false}, {2, "writes::apply", true}, {2, "nope::apply", false},
		{2, "writes::nope", false}, {2, "config_json", true}, {2, "fake::on_write", true},
		{3, "cacheGet", true}, {3, "nope", false}, {3, "Event.selfWrite", true}, {3, "Event.nope", false}, {3, "Nope.get", false},
		{3, "FakeHost.load", true}, {3, "FakeHost.writes", true}, {3, "FakeHost.nope", false},
		{4, "ih_k8s_write", true}, {4, "ih_nope", false},
	} {
		if got := kitSymbolDeclared(src, tc.col, tc.name); got != tc.want {
			t.Errorf("column %d %s: declared %v, want %v", tc.col, tc.name, got, tc.want)
		}
	}
}
