package housemap

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// issueNumber matches a reference to an issue by number: the word issue
// (any case, or issues) then a number, with or without "#". An upstream
// reference such as wazero#2466 names its project and is fine.
var issueNumber = regexp.MustCompile(`(?i)\bissues?\s+#?[0-9]+`)

// historyDocuments record what happened when, issue numbers included;
// they are not the code's explanation of itself.
var historyDocuments = []string{"BENCHMARKS.md", "bench/NOTES.md"}

// wordingChecked reports whether the rule applies to a file: Go, make
// files, shell scripts and YAML.
func wordingChecked(path string) bool {
	base := filepath.Base(path)
	switch filepath.Ext(base) {
	case ".go", ".mk", ".sh", ".yaml", ".yml":
		return true
	}
	return base == "Makefile" || base == "Dockerfile"
}

// Code, comments and make files name the concept, not the issue that
// brought it: a number means nothing to a reader without the tracker, and
// the tracker is not part of the repository.
func TestNoIssueNumbers(t *testing.T) {
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r := strings.TrimPrefix(filepath.ToSlash(path), root+"/")
		if d.IsDir() {
			if path != root && (d.Name() == ".git" || slices.Contains(skippedDirs, d.Name()) && d.Name() != "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !wordingChecked(path) || slices.Contains(historyDocuments, r) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := issueNumber.FindString(line); m != "" {
				found = append(found, r+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%s an issue by number; say what the behaviour is instead:\n\t%s",
			plural(len(found), "line")+" name", strings.Join(found, "\n\t"))
	}
}
