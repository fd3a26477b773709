package pyjson

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync/atomic"
	"unicode/utf8"
)

// SyntaxError reports where a document stopped being valid JSON.
type SyntaxError struct {
	Msg          string
	Line, Column int
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at line %d column %d: %s", e.Line, e.Column, e.Msg)
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 512

// Parse decodes one JSON document the way Python's json.loads does: object key order is
// kept (a repeated key keeps its first position and takes the last value), integers stay
// Int, numbers with a fraction or exponent become float64, and NaN, Infinity and
// -Infinity are accepted. Invalid UTF-8, a byte-order mark and control characters inside
// strings are errors, as they are for the seed.
func Parse(data []byte) (Value, error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &SyntaxError{"unexpected UTF-8 byte-order mark", 1, 1}
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		p := &parser{data: data, pos: i}
		return nil, p.errorf("invalid UTF-8 byte 0x%02x", data[i])
	}
	p := &parser{data: data}
	p.skip()
	var v Value
	var err error
	if len(data) >= parallelFrom && p.pos < len(data) && data[p.pos] == '[' && runtime.GOMAXPROCS(0) > 1 {
		v, err = p.splitArray()
	} else {
		v, err = p.value(0)
	}
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.pos != len(p.data) {
		return nil, p.errorf("extra data after the document")
	}
	return v, nil
}

type parser struct {
	data  []byte
	pos   int
	stack []Member // members of the objects being read, innermost last
	// short strings seen before (keys, dtypes, testlist names), already boxed: a testlist
	// repeats the same few thousand times
	intern map[string]Value
}

func (p *parser) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range p.data[:min(p.pos, len(p.data))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{fmt.Sprintf(format, args...), line, col}
}

func (p *parser) skip() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if depth > maxDepth {
		return nil, p.errorf("nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, p.errorf("expecting value, found end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		if bytes.HasPrefix(p.data[p.pos:], []byte("-Infinity")) {
			p.pos += len("-Infinity")
			return math.Inf(-1), nil
		}
		return p.number()
	}
	for _, lit := range []struct {
		text string
		v    Value
	}{{"null", nil}, {"true", true}, {"false", false}, {"NaN", math.NaN()}, {"Infinity", math.Inf(1)}} {
		if bytes.HasPrefix(p.data[p.pos:], []byte(lit.text)) {
			p.pos += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, p.errorf("expecting value")
}

func (p *parser) object(depth int) (Value, error) {
	p.pos++ // {
	o := &Object{}
	p.skip()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return o, nil
	}
	// members collect on the parser's stack and are copied out once, at their exact size
	base := len(p.stack)
	defer func() { p.stack = p.stack[:base] }()
	var idx map[string]int
	for {
		p.skip()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expecting property name enclosed in double quotes")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skip()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expecting ':' delimiter")
		}
		p.pos++
		p.skip()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key := k.(string)
		// a repeated key keeps its place and takes the new value (Python dict semantics)
		if idx != nil {
			if i, ok := idx[key]; ok {
				p.stack[i].Value = v
			} else {
				idx[key] = len(p.stack)
				p.stack = append(p.stack, Member{key, v})
			}
		} else {
			dup := false
			for i := base; i < len(p.stack); i++ {
				if p.stack[i].Key == key {
					p.stack[i].Value, dup = v, true
					break
				}
			}
			if !dup {
				p.stack = append(p.stack, Member{key, v})
				if len(p.stack)-base >= indexAt { // large objects look keys up in a map
					idx = make(map[string]int, 2*indexAt)
					for i := base; i < len(p.stack); i++ {
						idx[p.stack[i].Key] = i
					}
				}
			}
		}
		p.skip()
		if p.pos >= len(p.data) {
			return nil, p.errorf("expecting ',' delimiter, found end of input")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			o.members = append(make([]Member, 0, len(p.stack)-base), p.stack[base:]...)
			o.reindex()
			return o, nil
		default:
			return nil, p.errorf("expecting ',' delimiter")
		}
	}
}

func (p *parser) array(depth int) (Value, error) {
	p.pos++ // [
	p.skip()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []Value{}, nil
	}
	out, _, err := p.elems(depth, -1)
	return out, err
}

// elems reads an array's elements from one of them through the closing bracket. With
// stop >= 0 it returns early, reached true, when an element would start exactly at stop.
func (p *parser) elems(depth, stop int) ([]Value, bool, error) {
	out := []Value{}
	for {
		p.skip()
		if stop >= 0 {
			if p.pos == stop {
				return out, true, nil
			}
			if p.pos > stop {
				stop = -1
			}
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
		p.skip()
		if p.pos >= len(p.data) {
			return nil, false, p.errorf("expecting ',' delimiter, found end of input")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return out, false, nil
		default:
			return nil, false, p.errorf("expecting ',' delimiter")
		}
	}
}

// parallelFrom is the size from which a top-level array is read by two parsers at once.
const parallelFrom = 256 << 10

// splitArray reads a large top-level array (a testlist) in two halves at once. The second
// half starts at a guessed element boundary past the middle ("}" "," "{"); the guess is
// only used when the first parser, reading from the start, arrives at exactly that offset
// as the start of an element — so the result, and any error, are the sequential parse's.
func (p *parser) splitArray() (Value, error) {
	c := guessBoundary(p.data, p.pos+(len(p.data)-p.pos)/2)
	if c < 0 {
		return p.value(0)
	}
	type half struct {
		vals []Value
		pos  int
		err  error
	}
	second := make(chan half, 1)
	go func() {
		q := &parser{data: p.data, pos: c}
		vals, _, err := q.elems(0, -1)
		second <- half{vals, q.pos, err}
	}()
	p.pos++ // [
	p.skip()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []Value{}, nil
	}
	head, reached, err := p.elems(0, c)
	if err != nil || !reached {
		return head, err // the guess was not a boundary: head is the whole array
	}
	h := <-second
	if h.err != nil { // report it as the sequential parse would
		tail, _, err := p.elems(0, -1)
		if err != nil {
			return nil, err
		}
		return append(head, tail...), nil
	}
	p.pos = h.pos
	splitsUsed.Add(1)
	return append(head, h.vals...), nil
}

// splitsUsed counts parses whose second half was used (for the tests).
var splitsUsed atomic.Int64

// guessBoundary finds, from from on, a '{' preceded by '}' ',' (whitespace between).
func guessBoundary(d []byte, from int) int {
	ws := func(i int) int {
		for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\t' || d[i] == '\r') {
			i++
		}
		return i
	}
	for i := from; i < len(d) && i < from+64<<10; {
		j := bytes.IndexByte(d[i:], '}')
		if j < 0 {
			return -1
		}
		k := ws(i + j + 1)
		if k < len(d) && d[k] == ',' {
			if m := ws(k + 1); m < len(d) && d[m] == '{' {
				return m
			}
		}
		i += j + 1
	}
	return -1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) number() (Value, error) {
	start := p.pos
	d := p.data
	if d[p.pos] == '-' {
		p.pos++
	}
	if p.pos >= len(d) || !isDigit(d[p.pos]) {
		return nil, p.errorf("expecting value")
	}
	if d[p.pos] == '0' {
		p.pos++
	} else {
		for p.pos < len(d) && isDigit(d[p.pos]) {
			p.pos++
		}
	}
	isFloat := false
	if p.pos+1 < len(d) && d[p.pos] == '.' && isDigit(d[p.pos+1]) {
		isFloat = true
		p.pos++
		for p.pos < len(d) && isDigit(d[p.pos]) {
			p.pos++
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		q := p.pos + 1
		if q < len(d) && (d[q] == '+' || d[q] == '-') {
			q++
		}
		if q < len(d) && isDigit(d[q]) {
			isFloat = true
			for q < len(d) && isDigit(d[q]) {
				q++
			}
			p.pos = q
		}
	}
	text := string(d[start:p.pos])
	if !isFloat {
		if text == "-0" {
			text = "0"
		}
		return Int(text), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, p.errorf("bad number %q", text)
	}
	return f, nil
}

// str parses a string literal; the result is WTF-8 (lone surrogates kept).
func (p *parser) str() (Value, error) {
	p.pos++ // opening quote
	d := p.data
	// fast path: no escapes
	for i := p.pos; i < len(d); i++ {
		c := d[i]
		if c == '"' {
			raw := d[p.pos:i]
			p.pos = i + 1
			if len(raw) > 32 {
				return string(raw), nil
			}
			if v, ok := p.intern[string(raw)]; ok {
				return v, nil
			}
			var v Value = string(raw)
			if p.intern == nil {
				p.intern = make(map[string]Value, 64)
			}
			if len(p.intern) < 8192 {
				p.intern[v.(string)] = v
			}
			return v, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	var b []byte
	for {
		start := p.pos
		for p.pos < len(d) && d[p.pos] != '"' && d[p.pos] != '\\' && d[p.pos] >= 0x20 {
			p.pos++
		}
		b = append(b, d[start:p.pos]...)
		if p.pos >= len(d) {
			return nil, p.errorf("unterminated string")
		}
		c := d[p.pos]
		if c == '"' {
			p.pos++
			return string(b), nil
		}
		if c < 0x20 {
			return nil, p.errorf("invalid control character in string")
		}
		// backslash
		p.pos++
		if p.pos >= len(d) {
			return nil, p.errorf("unterminated string")
		}
		e := d[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, p.errorf("invalid \\uXXXX escape")
			}
			if r >= 0xD800 && r <= 0xDBFF && p.pos+1 < len(d) && d[p.pos] == '\\' && d[p.pos+1] == 'u' {
				save := p.pos
				p.pos += 2
				r2, ok := p.hex4()
				if ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				} else {
					p.pos = save
				}
			}
			b = appendWTF8(b, r)
		default:
			p.pos--
			return nil, p.errorf("invalid \\escape")
		}
	}
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(n), true
}

// appendWTF8 is utf8.AppendRune, except that surrogates are encoded as three bytes
// instead of being replaced.
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(b, r)
}

// decodeWTF8 decodes one code point of a WTF-8 string, accepting encoded surrogates.
// Invalid bytes decode as U+FFFD, one byte at a time.
func decodeWTF8(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s)
}
