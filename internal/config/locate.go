package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/informer-host/informer-host/internal/nearest"
)

// Some mistakes only show once the config meets the world: a modules
// entry naming a file the plugin directory does not hold, a resource the
// apiserver does not serve. The config is valid either way (the module
// may be dropped in later, the CRD installed later), so these are
// warnings, found by whoever looks at the directory or the apiserver; the
// functions here give them the file and line of the entry, like every
// other config problem.

// entryLines records the line of every entry a later problem may be
// about.
func entryLines(p *problems, c *Config) map[string]int {
	lines := map[string]int{}
	note := func(pa path) { lines[pa.String()] = p.line(pa) }
	for i := range c.Resources {
		rp := path{"resources", i}
		note(rp)
		note(rp.key("resource"))
		note(rp.key("kind"))
	}
	for i := range c.Plugins.Modules {
		note(path{"plugins", "modules", i, "file"})
	}
	return lines
}

// problemAt returns a problem with the value at pa, located where Parse
// found it (line 0 for a Config built in code).
func (c *Config) problemAt(pa path, format string, args ...any) Problem {
	return Problem{File: c.File, Line: c.lines[pa.String()], Message: pa.String() + ": " + fmt.Sprintf(format, args...)}
}

// UnmatchedModules reports every plugins.modules entry whose file is not
// among present, the *.wasm names in the plugin directory dir. Such an
// entry configures no plugin, and if it is a typo the file it meant runs
// with plugins.default instead; each problem says so, with the entry's
// line, the directory, and the names present nearest to the entry's.
func (c *Config) UnmatchedModules(dir string, present []string) Errors {
	have := make(map[string]bool, len(present))
	for _, f := range present {
		have[f] = true
	}
	var out Errors
	for i, m := range c.Plugins.Modules {
		if m.File == "" || have[m.File] || m.Source != "" {
			continue // a sourced module is not looked for in the directory
		}
		out = append(out, c.problemAt(path{"plugins", "modules", i, "file"},
			"no file %q in the plugin directory %s; %s. Fix the name here or put the module there: until then these settings apply to no plugin",
			m.File, dir, c.presentNear(m.File, present)))
	}
	return out
}

// presentNear describes the files present for an entry that matched
// none of them: the nearest ones, or, when none is near, what is there.
func (c *Config) presentNear(file string, present []string) string {
	if near := nearest.Names(file, present, 3); len(near) > 0 {
		s := "nearest there: " + strings.Join(near, ", ")
		// The one meant, if it is a typo, runs without its settings.
		for _, n := range near {
			if _, configured := c.Module(n); !configured {
				return s + fmt.Sprintf(" (%s has no entry of its own, so it runs with plugins.default)", n)
			}
		}
		return s
	}
	if len(present) == 0 {
		return "the directory holds no *.wasm files"
	}
	list := append([]string(nil), present...)
	sort.Strings(list)
	const shown = 5
	if len(list) > shown {
		return fmt.Sprintf("none is near it; the directory holds %s and %d more", strings.Join(list[:shown], ", "), len(list)-shown)
	}
	return "none is near it; the directory holds " + strings.Join(list, ", ")
}

// ResourceProblem returns a problem with the configured resource called
// name, located at its resource (or kind) field: for what is found out
// about it after Load, such as the apiserver not serving it.
func (c *Config) ResourceProblem(name, format string, args ...any) Problem {
	for i, r := range c.Resources {
		if r.Name != name {
			continue
		}
		rp := path{"resources", i}
		switch {
		case r.Resource != "":
			rp = rp.key("resource")
		case r.Kind != "":
			rp = rp.key("kind")
		}
		return c.problemAt(rp, format, args...)
	}
	return Problem{File: c.File, Message: fmt.Sprintf("resource %q: ", name) + fmt.Sprintf(format, args...)}
}
