package config

import (
	"sort"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	File    string // as given to Load or Parse
	Line    int    // 1-based; 0 when the problem is about the file as a whole
	Message string // starts with the path of the offending value where there is one
}

// String formats the problem the way compilers do, so editors and CI logs
// can jump to it: "config.yaml:12: message". Without a file name it reads
// "line 12: message".
func (p Problem) String() string {
	switch {
	case p.File != "" && p.Line > 0:
		return p.File + ":" + strconv.Itoa(p.Line) + ": " + p.Message
	case p.File != "":
		return p.File + ": " + p.Message
	case p.Line > 0:
		return "line " + strconv.Itoa(p.Line) + ": " + p.Message
	}
	return p.Message
}

// Errors is every problem found in a config file. Load and Parse report
// them all at once, because fixing a file one error per restart is slow.
type Errors []Problem

// Error returns one line per problem, in file order.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, p := range e {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sort orders problems by line, keeping the order they were found in
// within a line, and drops exact repeats (an anchor used twice can fail
// twice at the same place).
func (e *Errors) sort() {
	sort.SliceStable(*e, func(i, j int) bool { return (*e)[i].Line < (*e)[j].Line })
	out := (*e)[:0]
	seen := make(map[Problem]bool, len(*e))
	for _, p := range *e {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	*e = out
}
