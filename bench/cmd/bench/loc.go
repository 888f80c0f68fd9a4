package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Lines of code, counted one way for every side a case compares: a line
// counts when it holds code, not when it is blank or only comment. Go is
// tokenized (go/scanner), so a "//" in a string or a line inside a /* */
// block is judged right; YAML (a plugin's config) counts a line that is
// neither blank nor a "#" comment. Tests are not counted.

// codeLines is what a directory holds, counted.
type codeLines struct {
	Go    int      `json:"go"`
	YAML  int      `json:"yaml"`
	Files []string `json:"files"` // the files counted, relative to the directory
}

func (c codeLines) total() int { return c.Go + c.YAML }

// countDir counts the Go files (but tests) of dir, and its YAML files
// when yaml is set, not descending into subdirectories.
func countDir(dir string, yaml bool) (codeLines, error) {
	var out codeLines
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		isGo := strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
		isYAML := yaml && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
		if !isGo && !isYAML {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return out, err
		}
		if isGo {
			n, err := goCodeLines(name, src)
			if err != nil {
				return out, err
			}
			out.Go += n
		} else {
			out.YAML += yamlCodeLines(src)
		}
		out.Files = append(out.Files, name)
	}
	sort.Strings(out.Files)
	if out.Go == 0 {
		return out, fmt.Errorf("no Go code in %s", dir)
	}
	return out, nil
}

// goCodeLines counts the lines of src holding a token other than a
// comment.
func goCodeLines(name string, src []byte) (int, error) {
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var s scanner.Scanner
	var errs scanner.ErrorList
	s.Init(file, src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	lines := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		// The semicolons the scanner inserts at a line's end stand on a
		// line that already has a token.
		if tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		// A raw string spanning lines is code on every line it covers.
		first := file.Line(pos)
		last := first + strings.Count(lit, "\n")
		for l := first; l <= last; l++ {
			lines[l] = true
		}
	}
	if err := errs.Err(); err != nil {
		return 0, fmt.Errorf("count lines of %s: %w", name, err)
	}
	return len(lines), nil
}

func yamlCodeLines(src []byte) int {
	n := 0
	s := bufio.NewScanner(bytes.NewReader(src))
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}
