package housemap

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// skippedDirs hold no source of the repository's own: outputs, caches and
// third-party trees, and testdata (the go tool's name for data, fixture
// plugins included).
var skippedDirs = []string{".git", "build", "bin", "node_modules", "target", "testdata"}

// nonGoFolders are the folders below the top level that hold no Go code
// and still belong in the map: the kits and the C header.
var nonGoFolders = []string{"abi/include", "abi/rust", "abi/assemblyscript"}

// layoutPaths returns the paths README's Layout table names, without a
// trailing slash, in table order.
func layoutPaths(t *testing.T) []string {
	t.Helper()
	rows := table(section(t, readFile(t, "README.md"), "## Layout"))
	if len(rows) == 0 {
		t.Fatal("README.md: no table under ## Layout")
	}
	var paths []string
	for _, r := range rows {
		spans := codeSpans(r[0])
		if len(spans) != 1 {
			t.Fatalf("README.md, Layout: a row names one path in backquotes, not %q", r[0])
		}
		paths = append(paths, strings.TrimSuffix(spans[0], "/"))
	}
	return paths
}

// mapFolders returns the folders README's Layout must name: every
// top-level folder, the non-Go folders, and every folder holding Go files
// except a plugin (Go files all for wasip1), which its parent's entry
// covers; and the plugins, separately.
func mapFolders(t *testing.T) (folders, plugins []string) {
	t.Helper()
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !slices.Contains(skippedDirs, e.Name()) {
			folders = append(folders, e.Name())
		}
	}
	folders = append(folders, nonGoFolders...)
	goDirs := map[string]bool{}   // holds Go files
	hostDirs := map[string]bool{} // holds a Go file not only for wasip1
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skippedDirs, d.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		r := strings.TrimPrefix(strings.TrimPrefix(dir, root), "/")
		if r == "" {
			return nil // the top level is the table itself
		}
		goDirs[r] = true
		first, err := firstLine(path)
		if err != nil {
			return err
		}
		if first != "//go:build wasip1" {
			hostDirs[r] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for d := range goDirs {
		if hostDirs[d] {
			folders = append(folders, d)
		} else {
			plugins = append(plugins, d)
		}
	}
	sort.Strings(folders)
	folders = slices.Compact(folders)
	sort.Strings(plugins)
	return folders, plugins
}

// README's Layout table is the map of the house: every folder of the
// tree is in it (a plugin through the folder that holds it), and
// everything it names exists.
func TestLayoutNamesEveryFolder(t *testing.T) {
	paths := layoutPaths(t)
	folders, plugins := mapFolders(t)
	var missing []string
	for _, f := range folders {
		if !slices.Contains(paths, f) {
			missing = append(missing, f)
		}
	}
	for _, p := range plugins {
		covered := false
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			if slices.Contains(paths, filepath.ToSlash(d)) {
				covered = true
				break
			}
		}
		if !covered {
			missing = append(missing, p+" (a plugin: or a folder above it)")
		}
	}
	if len(missing) > 0 {
		t.Errorf("README.md's Layout table does not name %s; add a row each (| `path` | what it holds |):\n\t%s",
			plural(len(missing), "folder"), strings.Join(missing, "\n\t"))
	}
	var gone []string
	for _, p := range paths {
		if !exists(p) {
			gone = append(gone, p)
		}
	}
	if len(gone) > 0 {
		t.Errorf("README.md's Layout table names %s the tree does not have; move or remove the rows:\n\t%s",
			plural(len(gone), "path"), strings.Join(gone, "\n\t"))
	}
}
