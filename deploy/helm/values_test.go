package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Every value of values.yaml says what it is: each top-level key has a
// comment above it, or each key below it has one. A key right below a
// documented one, with no blank line between, is of its group (one
// comment for nodeSelector, tolerations and affinity).
func TestEveryValueDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	top := doc.Content[0]
	// documented reports whether the key at i of a mapping's content is.
	var documented func(m *yaml.Node, i int) bool
	documented = func(m *yaml.Node, i int) bool {
		if strings.TrimSpace(m.Content[i].HeadComment) != "" {
			return true
		}
		return i >= 2 && m.Content[i-2].Line+1 == m.Content[i].Line && documented(m, i-2)
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		if documented(top, i) {
			continue
		}
		if val.Kind != yaml.MappingNode || len(val.Content) == 0 {
			t.Errorf("values.yaml:%d: %s has no comment saying what it is", key.Line, key.Value)
			continue
		}
		for j := 0; j+1 < len(val.Content); j += 2 {
			if !documented(val, j) {
				t.Errorf("values.yaml:%d: %s.%s has no comment saying what it is (nor has %s)", val.Content[j].Line, key.Value, val.Content[j].Value, key.Value)
			}
		}
	}
}
