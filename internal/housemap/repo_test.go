package housemap

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's top directory, seen from this package's.
const root = "../.."

// module is the daemon module's path; the abi module is module + "/abi".
const module = "github.com/informer-host/informer-host"

// readFile returns a file of the repository as a string.
func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exists reports whether rel (a file or a directory) is in the tree.
func exists(rel string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}

// section returns the lines of a markdown document from the heading line
// equal to heading up to the next heading of the same or a higher level.
func section(t *testing.T, doc, heading string) []string {
	t.Helper()
	level := strings.Index(heading, " ")
	var out []string
	in := false
	for line := range strings.Lines(doc) {
		line = strings.TrimRight(line, "\n")
		if line == heading {
			in = true
			continue
		}
		if in {
			if n := strings.Index(line, " "); n > 0 && n <= level && strings.Trim(line[:n], "#") == "" {
				break
			}
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("no section %q", heading)
	}
	return out
}

// table returns the cells of the first markdown table in lines, without
// its header and separator rows, each cell trimmed.
func table(lines []string) [][]string {
	var rows [][]string
	started := false
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		return nil
	}
	return rows[2:]
}

// codeSpans returns the `...` spans of a table cell.
func codeSpans(cell string) []string {
	var out []string
	for {
		i := strings.IndexByte(cell, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(cell[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, cell[i+1:i+1+j])
		cell = cell[i+2+j:]
	}
}

// goPackage is what `go list -json` says of a package.
type goPackage struct {
	Dir, ImportPath, Name, Doc string
	GoFiles                    []string
	Imports, Deps              []string
	TestImports, XTestImports  []string
	Standard                   bool
}

// goList runs `go list -json` with args in the repository's root (both
// modules, through go.work) and returns the packages.
func goList(t *testing.T, args ...string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel returns dir relative to the repository's root, with slashes.
func rel(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := filepath.Rel(abs, dir)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

// firstLine returns the first line of a file, for its build constraint.
func firstLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan()
	return s.Text(), s.Err()
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
