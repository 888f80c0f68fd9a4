package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every package the report's Go benchmarks run must exist and declare
// a benchmark its pattern selects: a package that moves (as filter did,
// under internal/) would otherwise fail only inside make bench.
func TestGoBenchesExist(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func (Benchmark\w+)\(`)
	for _, b := range goBenches {
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(b.pkg), "*_test.go"))
		if len(files) == 0 {
			t.Errorf("%s: no test files (moved?)", b.pkg)
			continue
		}
		pat := regexp.MustCompile(b.pattern)
		found := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
				found = found || pat.MatchString(m[1])
			}
		}
		if !found {
			t.Errorf("%s: no benchmark matches %s", b.pkg, b.pattern)
		}
	}
}
