package summary

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// skimStatuses reads a results document and calls fn with each rows[*].status: a string's
// value, or the raw text of any other JSON value. It is a single pass over the bytes that
// skips every other value without building it — summarize reads hundreds of megabytes of
// results and needs nothing else from them. It checks the structure it walks (brackets,
// strings, separators) and reports the byte offset of what is wrong. hasRows is false when
// the top-level object has no "rows" array. A repeated "rows" key counts with its last
// value, as in Python, so statuses are reported once the whole document is read.
func skimStatuses(b []byte, fn func(status string) error) (hasRows bool, err error) {
	s := skimmer{b: b}
	var statuses []string
	collect := func(st string) error { statuses = append(statuses, st); return nil }
	err = s.obj(func(key []byte) error {
		if string(key) != "rows" {
			return s.skip(1)
		}
		statuses, hasRows = statuses[:0], false
		if s.peek() != '[' {
			return s.skip(1)
		}
		hasRows = true
		return s.arr(func() error { return s.row(collect) })
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return false, err
	}
	for _, st := range statuses {
		if err := fn(st); err != nil {
			return hasRows, err
		}
	}
	return hasRows, nil
}

type skimmer struct {
	b []byte
	i int
}

func (s *skimmer) fail(what string) error { return fmt.Errorf("%s at byte %d", what, s.i) }

func (s *skimmer) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("extra data after the document")
	}
	return nil
}

func (s *skimmer) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *skimmer) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *skimmer) ws() {
	for s.i < len(s.b) {
		// indented documents are mostly runs of spaces: eight at a time
		if s.i+8 <= len(s.b) && binary.LittleEndian.Uint64(s.b[s.i:]) == 0x2020202020202020 {
			s.i += 8
			continue
		}
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads a string (escapes decoded, as rare as they are here).
func (s *skimmer) str() (string, error) {
	raw, err := s.strBytes()
	return string(raw), err
}

// strBytes reads a string without allocating unless it has escapes: the bytes alias the
// document and are valid until the next call.
func (s *skimmer) strBytes() ([]byte, error) {
	start := s.i + 1
	escaped, err := s.strSpan()
	if err != nil {
		return nil, err
	}
	if escaped {
		var v string
		if err := json.Unmarshal(s.b[start-1:s.i], &v); err != nil {
			return nil, s.fail("bad escape in a string")
		}
		return []byte(v), nil
	}
	return s.b[start : s.i-1], nil
}

// strSpan passes over a string and reports whether it had escapes.
func (s *skimmer) strSpan() (escaped bool, err error) {
	if !s.eat('"') {
		return false, s.fail("expected a string")
	}
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			s.i += 2
		case c < 0x20:
			return false, s.fail("control character in a string")
		default:
			s.i++
		}
	}
	return false, errors.New("unterminated string")
}

const maxDepth = 512

// skip passes over one value.
func (s *skimmer) skip(depth int) error {
	if depth > maxDepth {
		return s.fail("nested too deeply")
	}
	switch c := s.peek(); {
	case c == '"':
		start := s.i
		escaped, err := s.strSpan()
		if err == nil && escaped && !json.Valid(s.b[start:s.i]) {
			return s.fail("bad escape in a string")
		}
		return err
	case c == '{':
		return s.obj(func([]byte) error { return s.skip(depth + 1) })
	case c == '[':
		return s.arr(func() error { return s.skip(depth + 1) })
	case c == '-' || c >= '0' && c <= '9':
		start := s.i
		for s.i < len(s.b) && (s.b[s.i] >= '0' && s.b[s.i] <= '9' || s.b[s.i] == '-' || s.b[s.i] == '+' || s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
			s.i++
		}
		if s.i == start+1 && c == '-' {
			return s.fail("bad number")
		}
		return nil
	default:
		for _, lit := range []string{"true", "false", "null", "NaN", "Infinity", "-Infinity"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return nil
			}
		}
		return s.fail("unexpected character")
	}
}

// row reads one row object and reports its status.
func (s *skimmer) row(fn func(string) error) error {
	status, found := "", false
	err := s.obj(func(key []byte) error {
		if string(key) != "status" {
			return s.skip(2)
		}
		found = true
		if s.peek() == '"' {
			v, err := s.strBytes()
			switch string(v) { // the usual three without allocating
			case "ok":
				status = "ok"
			case "unsupported":
				status = "unsupported"
			case "error":
				status = "error"
			default:
				status = string(v)
			}
			return err
		}
		start := s.i
		if err := s.skip(2); err != nil {
			return err
		}
		status = pyText(string(s.b[start:s.i]))
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return s.fail("a row without \"status\"")
	}
	return fn(status)
}

// pyText is how Python's str() shows a non-string JSON scalar in the seed's message.
func pyText(raw string) string {
	switch raw {
	case "null":
		return "None"
	case "true":
		return "True"
	case "false":
		return "False"
	}
	return raw
}

// obj walks an object, calling fn positioned at each member's value; fn must consume it.
func (s *skimmer) obj(fn func(key []byte) error) error {
	s.ws()
	if !s.eat('{') {
		return s.fail("expected an object")
	}
	s.ws()
	if s.eat('}') {
		return nil
	}
	for {
		s.ws()
		key, err := s.strBytes()
		if err != nil {
			return err
		}
		s.ws()
		if !s.eat(':') {
			return s.fail("expected ':'")
		}
		s.ws()
		if err := fn(key); err != nil {
			return err
		}
		s.ws()
		if s.eat('}') {
			return nil
		}
		if !s.eat(',') {
			return s.fail("expected ',' or '}'")
		}
	}
}

// arr walks an array, calling fn positioned at each element; fn must consume it.
func (s *skimmer) arr(fn func() error) error {
	s.ws()
	if !s.eat('[') {
		return s.fail("expected an array")
	}
	s.ws()
	if s.eat(']') {
		return nil
	}
	for {
		s.ws()
		if err := fn(); err != nil {
			return err
		}
		s.ws()
		if s.eat(']') {
			return nil
		}
		if !s.eat(',') {
			return s.fail("expected ',' or ']'")
		}
	}
}

type cellInfo struct {
	id             string
	cases          int
	hasID, hasCase bool
}

type manifestInfo struct {
	runID, sha           string
	hasRun, hasSHA, list bool
	cells                []cellInfo
}

// skimManifest reads what summarize needs of a manifest — run_id, source_sha, and each
// cell's id and case count — in one pass, without building the cases.
func skimManifest(b []byte) (manifestInfo, error) {
	var m manifestInfo
	s := skimmer{b: b}
	// a repeated key counts with its last value, as in Python: a non-string one unsets it
	strOr := func(dst *string, ok *bool) error {
		if s.peek() == '"' {
			v, err := s.str()
			*dst, *ok = v, err == nil
			return err
		}
		*dst, *ok = "", false
		return s.skip(1)
	}
	err := s.obj(func(key []byte) error {
		switch string(key) {
		case "run_id":
			return strOr(&m.runID, &m.hasRun)
		case "source_sha":
			return strOr(&m.sha, &m.hasSHA)
		case "include":
			if s.peek() != '[' {
				m.list, m.cells = false, m.cells[:0]
				return s.skip(1)
			}
			m.list, m.cells = true, m.cells[:0]
			return s.arr(func() error {
				var c cellInfo
				if s.peek() != '{' {
					m.cells = append(m.cells, c)
					return s.skip(1)
				}
				err := s.obj(func(k []byte) error {
					switch string(k) {
					case "id":
						return strOr(&c.id, &c.hasID)
					case "cases":
						if s.peek() != '[' {
							c.hasCase, c.cases = false, 0
							return s.skip(2)
						}
						c.hasCase, c.cases = true, 0
						return s.arr(func() error { c.cases++; return s.skip(2) })
					}
					return s.skip(2)
				})
				m.cells = append(m.cells, c)
				return err
			})
		}
		return s.skip(1)
	})
	if err != nil {
		return m, err
	}
	return m, s.end()
}
