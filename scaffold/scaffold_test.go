package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	if got := strings.Join(Languages(), ","); got != "c,go,wat" {
		t.Errorf("languages %q", got)
	}
	dir := filepath.Join(t.TempDir(), "p")
	if err := Write(dir, "go", Data{Name: "my-plugin", Repo: "/src/ih"}); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(mod), "module my-plugin") || !strings.Contains(string(mod), "=> /src/ih") {
		t.Errorf("go.mod: %s %v", mod, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "testdata", "events.jsonl")); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct{ dir, lang, name, want string }{
		{dir, "go", "my-plugin", "exists"},
		{dir + "2", "cobol", "x", `no template for language "cobol" (have c, go, wat)`},
		{dir + "3", "go", "My Plugin", "use lower case letters"},
	} {
		if err := Write(tc.dir, tc.lang, Data{Name: tc.name}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.lang, tc.name, err, tc.want)
		}
	}
}
