package abi

import (
	"errors"
	"strconv"
	"strings"
)

// Field paths name a value inside an object, like a JSONPath without the
// leading "$.": status.phase, metadata.labels.app,
// spec.containers[0].image, metadata.labels["app.kubernetes.io/name"].
//
// Grammar (ABNF, over bytes):
//
//	path    = first *( "." bare / bracket )
//	first   = bare / bracket
//	bracket = "[" ( index / quoted ) "]"
//	bare    = 1*( %x00-21 / %x23-2D / %x2F-5A / %x5E-FF )
//	          ; any byte but  "  .  [  \  ]
//	index   = "0" / ( %x31-39 *8DIGIT )    ; array index, < 1e9
//	quoted  = DQUOTE *( qchar / "\" DQUOTE / "\\" ) DQUOTE
//	qchar   = any byte but DQUOTE and "\"
//
// A bare or quoted segment selects a key of an object; an index selects an
// element of an array. A segment that does not match the value it is
// applied to (a key on an array, an index on an object, anything on a
// scalar) makes the path not found, not invalid.

// ErrPath is wrapped by every path syntax error.
var ErrPath = errors.New("invalid field path")

// PathScanner splits a path into segments without allocating, except to
// unescape a quoted key that contains backslashes (into a buffer it keeps
// and reuses). The zero value is ready for Reset.
type PathScanner struct {
	p   []byte
	pos int
	err error
	buf []byte
}

// Reset starts scanning p. An empty path is an error.
func (s *PathScanner) Reset(p []byte) {
	s.p, s.pos, s.err = p, 0, nil
	if len(p) == 0 {
		s.err = pathErr("empty path", 0)
	}
}

// Err returns the syntax error that stopped Next, if any.
func (s *PathScanner) Err() error { return s.err }

func pathErr(msg string, pos int) error {
	return errors.Join(ErrPath, errors.New(msg+" at byte "+strconv.Itoa(pos)))
}

// Next returns the next segment. For a key, key is its (unescaped) bytes,
// valid until the next call; for an index, isIndex is set. ok is false at
// the end of the path or on a syntax error (see Err).
func (s *PathScanner) Next() (key []byte, index int, isIndex bool, ok bool) {
	if s.err != nil || s.pos >= len(s.p) {
		return nil, 0, false, false
	}
	p := s.p
	if s.pos > 0 {
		switch p[s.pos] {
		case '.':
			s.pos++
			k, err := s.bare()
			if err != nil {
				s.err = err
				return nil, 0, false, false
			}
			return k, 0, false, true
		case '[':
		default:
			s.err = pathErr("expected '.' or '['", s.pos)
			return nil, 0, false, false
		}
	} else if p[0] != '[' {
		k, err := s.bare()
		if err != nil {
			s.err = err
			return nil, 0, false, false
		}
		return k, 0, false, true
	}
	// p[s.pos] == '['
	s.pos++
	if s.pos >= len(p) {
		s.err = pathErr("unterminated '['", s.pos)
		return nil, 0, false, false
	}
	if p[s.pos] == '"' {
		k, err := s.quoted()
		if err != nil {
			s.err = err
			return nil, 0, false, false
		}
		if s.pos >= len(p) || p[s.pos] != ']' {
			s.err = pathErr("expected ']' after quoted key", s.pos)
			return nil, 0, false, false
		}
		s.pos++
		return k, 0, false, true
	}
	start := s.pos
	n := 0
	for s.pos < len(p) && p[s.pos] >= '0' && p[s.pos] <= '9' {
		if s.pos-start >= 9 {
			s.err = pathErr("index too large", start)
			return nil, 0, false, false
		}
		n = n*10 + int(p[s.pos]-'0')
		s.pos++
	}
	switch {
	case s.pos == start:
		s.err = pathErr("expected an index or a quoted key after '['", start)
	case p[start] == '0' && s.pos-start > 1:
		s.err = pathErr("index with a leading zero", start)
	case s.pos >= len(p) || p[s.pos] != ']':
		s.err = pathErr("expected ']' after index", s.pos)
	}
	if s.err != nil {
		return nil, 0, false, false
	}
	s.pos++
	return nil, n, true, true
}

func isBare(c byte) bool {
	return c != '.' && c != '[' && c != ']' && c != '"' && c != '\\'
}

func (s *PathScanner) bare() ([]byte, error) {
	start := s.pos
	for s.pos < len(s.p) && isBare(s.p[s.pos]) {
		s.pos++
	}
	if s.pos == start {
		return nil, pathErr("empty key", start)
	}
	return s.p[start:s.pos], nil
}

// quoted scans a quoted key starting at the opening quote.
func (s *PathScanner) quoted() ([]byte, error) {
	open := s.pos
	s.pos++ // opening quote
	start := s.pos
	escaped := false
	for s.pos < len(s.p) {
		switch s.p[s.pos] {
		case '"':
			k := s.p[start:s.pos]
			s.pos++
			if escaped {
				return s.unescape(k), nil
			}
			return k, nil
		case '\\':
			if s.pos+1 >= len(s.p) || (s.p[s.pos+1] != '"' && s.p[s.pos+1] != '\\') {
				return nil, pathErr(`invalid escape (only \" and \\ are allowed)`, s.pos)
			}
			escaped = true
			s.pos += 2
		default:
			s.pos++
		}
	}
	return nil, pathErr("unterminated quoted key", open)
}

func (s *PathScanner) unescape(k []byte) []byte {
	b := s.buf[:0]
	for i := 0; i < len(k); i++ {
		if k[i] == '\\' {
			i++
		}
		b = append(b, k[i])
	}
	s.buf = b
	return b
}

// Segment is one parsed path segment.
type Segment struct {
	Key     string
	Index   int
	IsIndex bool
}

// ParsePath parses a whole path into segments (it allocates; hosts and
// plugins on a hot path use PathScanner).
func ParsePath(p string) ([]Segment, error) {
	var s PathScanner
	s.Reset([]byte(p))
	var out []Segment
	for {
		k, i, isIdx, ok := s.Next()
		if !ok {
			break
		}
		out = append(out, Segment{Key: string(k), Index: i, IsIndex: isIdx})
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// QuoteKey returns key as a path segment that follows a "." or begins a
// path: key itself if it is a valid bare key, otherwise a bracketed quoted
// key (without the dot): ["app.kubernetes.io/name"].
func QuoteKey(key string) string {
	if key != "" && !strings.ContainsAny(key, `.[]"\`) {
		return key
	}
	var b strings.Builder
	b.WriteString(`["`)
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteString(`"]`)
	return b.String()
}

// JoinPath builds a path from object keys, quoting the ones that need it:
// JoinPath("metadata", "labels", "app.kubernetes.io/name") is
// metadata.labels["app.kubernetes.io/name"].
func JoinPath(keys ...string) string {
	var b strings.Builder
	for i, k := range keys {
		q := QuoteKey(k)
		if i > 0 && q[0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(q)
	}
	return b.String()
}
