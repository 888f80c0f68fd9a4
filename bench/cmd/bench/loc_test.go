package main

import "testing"

func TestGoCodeLines(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"comments and blanks", "// Package x.\npackage x\n\n// f does.\nfunc f() {} // trailing\n", 2},
		{"block comment", "package x\n/*\nfunc g() {}\n*/\nvar a = 1 /* a\nb */\n", 2},
		{"slashes in a string", "package x\n\nvar s = \"// not a comment\"\n", 2},
		{"raw string over lines", "package x\n\nvar s = `a\n\n// b\n`\n", 5},
		{"a brace alone", "package x\n\nfunc f() {\n\treturn\n}\n", 4},
	} {
		got, err := goCodeLines("x.go", []byte(tc.src))
		if err != nil || got != tc.want {
			t.Errorf("%s: goCodeLines = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := goCodeLines("x.go", []byte("package x\nvar s = \"unterminated\n")); err == nil {
		t.Error("a file that does not scan: no error")
	}
}

func TestYAMLCodeLines(t *testing.T) {
	src := "# the controller\ncontroller:\n  for: src-configmaps   # primary\n\n  # owned\n  owns: [dst-configmaps]\n"
	if got := yamlCodeLines([]byte(src)); got != 3 {
		t.Errorf("yamlCodeLines = %d; want 3", got)
	}
}
