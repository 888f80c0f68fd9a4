package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// shipped is the config.yaml at the top of the repository: the annotated
// tour of every field.
const shipped = "../../config.yaml"

// schemaPaths lists every key of the schema as the path of keys leading
// to it ("plugins", "default", "grants", "writes", "qps"), from the
// structs' yaml tags: inline structs add their keys to their parent's,
// a map's own keys (registry hosts) are the file's, and a type that
// decodes itself (Duration, Size) is a leaf. A struct met again (a
// module's settings are plugins.default's) is listed at its first place
// only: shown once is enough.
func schemaPaths() [][]string {
	unmarshaler := reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	listed := map[reflect.Type]bool{}
	var out [][]string
	var walk func(t reflect.Type, prefix []string, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, prefix []string, seen map[reflect.Type]bool) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshaler) || seen[t] || listed[t] {
			return
		}
		seen[t], listed[t] = true, true
		defer delete(seen, t)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			switch key, inline := yamlKey(f); {
			case key == "-":
			case inline:
				walk(f.Type, prefix, seen)
			default:
				p := append(prefix[:len(prefix):len(prefix)], key)
				out = append(out, p)
				walk(f.Type, p, seen)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), nil, map[reflect.Type]bool{})
	return out
}

// The shipped config.yaml shows every field of the schema, set or in a
// comment, each key after the keys of its path (plugins: … grants: …
// writes: … qps:), and it is valid as it is.
func TestShippedConfigShowsEveryField(t *testing.T) {
	b, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	paths := schemaPaths()
	if len(paths) < 100 {
		t.Fatalf("the schema walk found %d keys; it misses most of the schema", len(paths))
	}
	for _, p := range paths {
		at := 0
		for _, key := range p {
			// A key as YAML writes it: at a line's start (after
			// indentation, a list's dash or a comment's #) or inside a
			// flow mapping.
			re := regexp.MustCompile(`(?m)(^[\s#-]*|[{,]\s*)` + regexp.QuoteMeta(key) + `:`)
			loc := re.FindStringIndex(text[at:])
			if loc == nil {
				t.Errorf("config.yaml does not show %s: no %q after %s; add it (a commented example is enough), with what it does and its default",
					strings.Join(p, "."), key+":", strings.Join(p[:len(p)-1], "."))
				break
			}
			at += loc[1]
		}
	}
	if _, err := Load(shipped); err != nil {
		t.Errorf("config.yaml does not validate:\n%v", err)
	}
}
