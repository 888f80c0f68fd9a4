package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/informer-host/informer-host/internal/nearest"
)

// path addresses a value in the document: string keys into mappings, int
// indices into sequences. It doubles as the prefix of problem messages.
type path []any

func (p path) key(k string) path { return append(p[:len(p):len(p)], k) }
func (p path) index(i int) path  { return append(p[:len(p):len(p)], i) }

func (p path) String() string {
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// problems collects what is wrong with one document. It keeps the node
// tree so that every problem can carry the line of the value it is about.
type problems struct {
	file string
	root *yaml.Node // the top-level mapping
	list Errors
	// broken holds paths whose value the decoder could not use. The
	// struct has a zero there, and reporting "name is required" after
	// "expected a string" would be noise.
	broken map[string]bool
}

func (p *problems) atLine(line int, format string, args ...any) {
	p.list = append(p.list, Problem{File: p.file, Line: line, Message: fmt.Sprintf(format, args...)})
}

// add reports a problem with the value at pa, unless the decoder already
// reported that value or one containing it.
func (p *problems) add(pa path, format string, args ...any) {
	for i := len(pa); i >= 0; i-- {
		if p.broken[pa[:i].String()] {
			return
		}
	}
	msg := fmt.Sprintf(format, args...)
	if s := pa.String(); s != "" {
		msg = s + ": " + msg
	}
	p.atLine(p.line(pa), "%s", msg)
}

// isBroken reports whether the decoder failed on the value at pa.
func (p *problems) isBroken(pa path) bool { return p.broken[pa.String()] }

// line returns the line of the value at pa. Where the value is missing it
// falls back to the key, and then to the closest enclosing value, which is
// where the missing field would have to be written.
func (p *problems) line(pa path) int {
	n := p.root
	line := 0
	if n != nil {
		line = n.Line
	}
	for _, seg := range pa {
		k, v := child(n, seg)
		if v == nil {
			break
		}
		if k != nil && isNull(v) {
			// An empty value has no position of its own worth showing.
			return k.Line
		}
		n, line = v, v.Line
	}
	return line
}

// present reports whether the file gives a non-null value at pa. Null is
// treated as absent everywhere, so "callTimeout:" with nothing after it
// means the default, not zero.
func (p *problems) present(pa path) bool {
	n := lookup(p.root, pa)
	return n != nil && !isNull(n)
}

func lookup(n *yaml.Node, pa path) *yaml.Node {
	for _, seg := range pa {
		if _, n = child(n, seg); n == nil {
			return nil
		}
	}
	return n
}

// child returns the key node (for mappings) and the value node for one
// path segment, following aliases and merge keys the way the decoder does.
func child(n *yaml.Node, seg any) (key, value *yaml.Node) {
	n = deref(n)
	if n == nil {
		return nil, nil
	}
	switch s := seg.(type) {
	case int:
		if n.Kind == yaml.SequenceNode && s >= 0 && s < len(n.Content) {
			return nil, n.Content[s]
		}
	case string:
		if n.Kind == yaml.MappingNode {
			return mapEntry(n, s, 0)
		}
	}
	return nil, nil
}

func mapEntry(m *yaml.Node, name string, depth int) (key, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; !isMergeKey(k) && k.Value == name {
			return k, m.Content[i+1]
		}
	}
	if depth > 8 {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if !isMergeKey(m.Content[i]) {
			continue
		}
		v := deref(m.Content[i+1])
		var sources []*yaml.Node
		switch {
		case v == nil:
		case v.Kind == yaml.MappingNode:
			sources = []*yaml.Node{v}
		case v.Kind == yaml.SequenceNode:
			sources = v.Content
		}
		for _, s := range sources {
			if s = deref(s); s != nil && s.Kind == yaml.MappingNode {
				if k, v := mapEntry(s, name, depth+1); v != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describeNode says what a value is, for "expected X, got Y" messages.
func describeNode(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!str":
		return "string " + strconv.Quote(v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null"
	case "!!timestamp":
		return "timestamp " + v
	}
	return n.ShortTag() + " " + strconv.Quote(v)
}

// decode parses data strictly into a Config. It returns a nil root when
// nothing sensible can be validated (a syntax error, an empty document, a
// document that is not a mapping); the returned problems then say why.
func decode(file string, data []byte) (*Config, *problems) {
	p := &problems{file: file, broken: map[string]bool{}}

	// The node tree is decoded on its own first: it carries the lines,
	// and a syntax error is best reported before any type checking.
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.atLine(0, "empty document: expected a mapping starting with \"apiVersion: %s\"", APIVersion)
		} else {
			p.syntax(data, err)
		}
		return nil, p
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		p.atLine(line, "a second YAML document; a config file holds exactly one (remove the \"---\")")
	case !errors.Is(err, io.EOF):
		p.syntax(data, err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		p.atLine(0, "empty document: expected a mapping starting with \"apiVersion: %s\"", APIVersion)
		return nil, p
	}
	root := deref(doc.Content[0])
	if root == nil || root.Kind != yaml.MappingNode {
		p.atLine(doc.Content[0].Line, "expected a mapping at the top level, got %s", describeNode(doc.Content[0]))
		return nil, p
	}
	p.root = root

	// KnownFields makes a typo an error instead of a silently ignored
	// setting. It only reaches struct fields decoded by this decoder,
	// which is why the only custom unmarshaler (Duration) is on a leaf.
	c := &Config{}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	err := strict.Decode(c)
	var te *yaml.TypeError
	switch {
	case errors.As(err, &te):
		ix := indexNodes(root)
		for _, msg := range te.Errors {
			p.typeError(ix, msg)
		}
	case err != nil:
		p.syntax(data, err)
		return nil, p
	}
	return c, p
}

// syntax reports an error from the YAML parser ("yaml: line 3: ...") of
// data, at the line of the problem (see syntaxLine).
func (p *problems) syntax(data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, rest, ok := cutLine(msg)
	if !ok {
		line, rest = 0, msg
	}
	p.atLine(syntaxLine(data, line, err.Error()), "syntax error: %s", rest)
}

// syntaxLine returns the line of the problem behind the syntax error
// message full, which yaml.v3 said is on line reported. That is not where
// the problem is: yaml.v3 gives the line where the construct around it
// starts (its "context"), and for a parser error (not a scanner error)
// counts that line from 0. A tab on line 10 comes back as line 9, a badly
// indented key on line 10 as line 7, an unclosed [ on line 9 as line 8.
//
// The parser reads forward and stops at the first token it cannot use, so
// the problem is on the first line after which the document, cut there,
// fails with the very same message (the same problem, the same context);
// every shorter cut is a prefix the parser had accepted. That line is
// searched for from the reported one on (the context never follows the
// problem). It costs a parse per line, only for a file that is broken.
func syntaxLine(data []byte, reported int, full string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // after the final newline: no line
	}
	prefix := make([]byte, 0, len(data))
	for i, l := range lines {
		prefix = append(prefix, l...)
		if i+1 < reported {
			continue
		}
		if err := parseError(prefix); err != nil && err.Error() == full {
			return i + 1
		}
	}
	return reported
}

// parseError is the first syntax error in data, read the way decode reads
// it: the first document, then whether there is a second.
func parseError(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for range 2 {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return nil
}

// cutLine splits "line 12: rest" into 12 and "rest".
func cutLine(s string) (int, string, bool) {
	return cutNumbered(s, "line ")
}

func cutNumbered(s, prefix string) (int, string, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, s, false
	}
	num, rest, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, s, false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, s, false
	}
	return n, rest, true
}

// nodeEntry is a node in the document with the path it sits at.
type nodeEntry struct {
	path       path
	key, value *yaml.Node
}

// indexNodes lists every key and value under root in document order. The
// decoder's messages only give a line; matching them against this list
// recovers the path. Aliases are not followed: the decoder reports errors
// in aliased content at the anchor, which is indexed where it is defined.
func indexNodes(root *yaml.Node) []nodeEntry {
	var out []nodeEntry
	var walk func(p path, key, n *yaml.Node)
	walk = func(p path, key, n *yaml.Node) {
		out = append(out, nodeEntry{path: p, key: key, value: n})
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if isMergeKey(k) {
					// Merged fields decode as if written here.
					if v.Kind == yaml.MappingNode {
						walk(p, nil, v)
					}
					continue
				}
				walk(p.key(k.Value), k, v)
			}
		case yaml.SequenceNode:
			for i, v := range n.Content {
				walk(p.index(i), nil, v)
			}
		}
	}
	walk(nil, nil, root)
	return out
}

// typeError turns one of yaml.v3's collected messages into a Problem with
// a path and a message a person can act on.
func (p *problems) typeError(ix []nodeEntry, msg string) {
	line, rest, ok := cutLine(msg)
	if !ok {
		p.atLine(0, "%s", msg)
		return
	}

	// From Duration.UnmarshalYAML: "line L: column C: message".
	if col, text, ok := cutNumbered(rest, "column "); ok {
		for _, e := range ix {
			if e.value.Line == line && e.value.Column == col {
				p.brokenAt(e.path, line, "%s", text)
				return
			}
		}
		p.atLine(line, "%s", text)
		return
	}

	// "field foo not found in type config.Resource"
	if f, ok := strings.CutPrefix(rest, "field "); ok {
		if name, typ, ok := cutLast(f, " not found in type "); ok {
			p.unknownField(ix, line, name, typ)
			return
		}
		if name, _, ok := cutLast(f, " already set in type "); ok {
			if parent, ok := keyParent(ix, line, name); ok {
				p.brokenAt(parent, line, "duplicate field %q", name)
			} else {
				p.atLine(line, "duplicate field %q", name)
			}
			return
		}
	}

	// "mapping key "name" already defined at line 3"
	if k, ok := strings.CutPrefix(rest, "mapping key "); ok {
		if quoted, first, ok := cutLast(k, " already defined at line "); ok {
			name, err := strconv.Unquote(quoted)
			if err != nil {
				name = quoted
			}
			if parent, ok := keyParent(ix, line, name); ok {
				p.brokenAt(parent, line, "duplicate key %q (first at line %s)", name, first)
			} else {
				p.atLine(line, "duplicate key %q (first at line %s)", name, first)
			}
			return
		}
	}

	// "cannot unmarshal !!str `lots` into int"
	if u, ok := strings.CutPrefix(rest, "cannot unmarshal "); ok {
		if head, goType, ok := cutLast(u, " into "); ok {
			tag, short, _ := strings.Cut(head, " ")
			short = strings.TrimSuffix(strings.TrimPrefix(short, "`"), "`")
			if e, ok := findValue(ix, line, tag, short, goType); ok {
				got := describeNode(e.value)
				want := expected(goType)
				hint := ""
				if strings.HasPrefix(goType, "[]") && e.value.Kind == yaml.ScalarNode {
					hint = fmt.Sprintf("; write [%s] or a list of \"- \" items", e.value.Value)
				}
				if len(e.path) == 0 {
					p.brokenAt(e.path, line, "expected a mapping at the top level, got %s", got)
					return
				}
				p.brokenAt(e.path, line, "expected %s, got %s%s", want, got, hint)
				return
			}
			p.atLine(line, "expected %s, got %s", expected(goType), strings.TrimSpace(head))
			return
		}
	}
	p.atLine(line, "%s", rest)
}

// brokenAt records a decoder problem at pa and marks pa so that
// validation does not pile on.
func (p *problems) brokenAt(pa path, line int, format string, args ...any) {
	p.broken[pa.String()] = true
	msg := fmt.Sprintf(format, args...)
	if s := pa.String(); s != "" {
		msg = s + ": " + msg
	}
	p.atLine(line, "%s", msg)
}

func (p *problems) unknownField(ix []nodeEntry, line int, name, typ string) {
	parent, found := keyParent(ix, line, name)
	msg := fmt.Sprintf("unknown field %q", name)
	switch {
	case found && len(parent) == 0:
		msg = fmt.Sprintf("unknown top-level field %q", name)
	case found:
		msg += " in " + parent.String()
	}
	if s := suggest(name, knownFields(typ)); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	p.atLine(line, "%s", msg)
}

// keyParent returns the path of the mapping holding key name at line.
func keyParent(ix []nodeEntry, line int, name string) (path, bool) {
	for _, e := range ix {
		if e.key != nil && e.key.Line == line && e.key.Value == name {
			return e.path[:len(e.path)-1], true
		}
	}
	return nil, false
}

// findValue finds the value node the decoder complained about. yaml.v3
// cuts values longer than ten bytes to seven plus "...", so compare the
// same way. Several nodes can start on one line (a flow mapping and its
// first value, a list item and its first key); the Go type the decoder
// wanted picks the one it was decoding.
func findValue(ix []nodeEntry, line int, tag, short, goType string) (nodeEntry, bool) {
	var byTag, first *nodeEntry
	for i, e := range ix {
		n := e.value
		if n.Line != line {
			continue
		}
		v := n.Value
		if len(v) > 10 {
			v = v[:7] + "..."
		}
		if !(n.Kind == yaml.ScalarNode && v == short) && !(n.Kind != yaml.ScalarNode && short == "") {
			continue
		}
		if t := typeAt(e.path); t != nil && t.String() == goType {
			return e, true
		}
		if byTag == nil && (n.ShortTag() == tag || n.Tag == tag) {
			byTag = &ix[i]
		}
		if first == nil {
			first = &ix[i]
		}
	}
	switch {
	case byTag != nil:
		return *byTag, true
	case first != nil:
		return *first, true
	}
	return nodeEntry{}, false
}

// typeAt returns the Go type that decodes the value at p, or nil when p
// leads nowhere in Config.
func typeAt(p path) reflect.Type {
	t := reflect.TypeOf(Config{})
	for _, seg := range p {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch s := seg.(type) {
		case int:
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		case string:
			if t.Kind() != reflect.Struct {
				return nil
			}
			f, ok := yamlField(t, s)
			if !ok {
				return nil
			}
			t = f
		}
	}
	return t
}

// yamlField finds the field that YAML key name decodes into, looking
// through inline structs as yaml.v3 does.
func yamlField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, inline := yamlKey(f)
		switch {
		case inline:
			if ft, ok := yamlField(f.Type, name); ok {
				return ft, true
			}
		case key == name:
			return f.Type, true
		}
	}
	return nil, false
}

// yamlKey is the key a struct field decodes from, as yaml.v3 names it
// ("-" for none), or inline when its fields are its parent's.
func yamlKey(f reflect.StructField) (key string, inline bool) {
	key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if key == "" {
		key = strings.ToLower(f.Name)
	}
	return key, opts == "inline"
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// expected names a Go type of this package the way the file's author
// thinks of it.
func expected(goType string) string {
	switch goType {
	case "int", "int8", "int16", "int32", "int64":
		return "an integer"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		return "a non-negative 32-bit integer"
	case "bool", "*bool":
		return "true or false"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	case "config.Duration":
		return "a duration string like \"30s\""
	}
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "config."):
		return "a mapping"
	}
	return goType
}

// knownFields returns the YAML field names of the struct type this
// package calls typ (e.g. "config.Resource"), for "did you mean" hints.
func knownFields(typ string) []string {
	var found reflect.Type
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || found != nil {
			return
		}
		seen[t] = true
		if t.String() == typ {
			found = t
			return
		}
		for i := 0; i < t.NumField(); i++ {
			visit(t.Field(i).Type)
		}
	}
	visit(reflect.TypeOf(Config{}))
	if found == nil {
		return nil
	}
	var names []string
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			switch name, inline := yamlKey(f); {
			case name == "-":
			case inline:
				collect(f.Type)
			default:
				names = append(names, name)
			}
		}
	}
	collect(found)
	return names
}

// suggest returns the known name closest to name, if one is close enough
// to be a likely typo or case slip.
func suggest(name string, known []string) string {
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	best, bestDist := "", 3
	for _, k := range known {
		if d := nearest.Distance(strings.ToLower(name), strings.ToLower(k)); d < bestDist && d < len(k)/2+1 {
			best, bestDist = k, d
		}
	}
	return best
}
