package pyjson

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/semianalysis/opx/internal/pytext"
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
func Parse(data []byte) (Value, error) { return ParseDepth(data, maxDepth+1) }

// Raw is a container that ParseDepth checked but did not build: its text in the document.
type Raw []byte

// ParseDepth is Parse for readers that need only the top of a document: an object or
// array nested inside depth others is checked exactly as Parse checks it, but comes back
// as Raw (Parse(raw) builds it when wanted). Summarize counts a results file's row
// statuses with ParseDepth(data, 3), leaving each row's op and metrics unbuilt.
func ParseDepth(data []byte, depth int) (Value, error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &SyntaxError{"unexpected UTF-8 byte-order mark", 1, 1}
	}
	p := &parser{data: data, keep: depth} // UTF-8 is checked in strings, where it can be
	p.skip()
	v, err := p.value(0, true)
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.pos != len(p.data) {
		return nil, p.errorf("extra data after the document")
	}
	return v, nil
}

// invalidUTF8 is the error for data that is not valid UTF-8: it names the first bad byte.
func invalidUTF8(data []byte) error {
	i := 0
	for i < len(data) {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	return syntaxError(data, i, fmt.Sprintf("invalid UTF-8 byte 0x%02x", data[i]))
}

type parser struct {
	data []byte
	pos  int
	keep int // containers nested this deep are checked, not built
}

// errorf is the error at p.pos; but a document that is not UTF-8 is that error first,
// wherever its first bad byte lies, as Python decodes a file before it parses it. (The
// parser checks UTF-8 only inside strings: anywhere else a byte that is not ASCII is
// a syntax error, and so comes here.)
func (p *parser) errorf(format string, args ...any) error {
	if !utf8.Valid(p.data) {
		return invalidUTF8(p.data)
	}
	return syntaxError(p.data, p.pos, fmt.Sprintf(format, args...))
}

// syntaxError is msg at data[pos], by line and column.
func syntaxError(data []byte, pos int, msg string) error {
	line, col := 1, 1
	for _, c := range data[:min(pos, len(data))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{msg, line, col}
}

func (p *parser) skip() {
	d, i := p.data, p.pos
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\t' || d[i] == '\r') {
		i++
	}
	p.pos = i
}

// value reads the value at p.pos, nested inside depth containers. With build false it
// only checks it (and returns nil).
func (p *parser) value(depth int, build bool) (Value, error) {
	if depth > maxDepth {
		return nil, p.errorf("nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, p.errorf("expecting value, found end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{' || c == '[':
		if build && depth >= p.keep {
			start := p.pos
			if _, err := p.container(depth, false); err != nil {
				return nil, err
			}
			return Raw(p.data[start:p.pos]), nil
		}
		return p.container(depth, build)
	case c == '"':
		s, err := p.str(build)
		if err != nil || !build {
			return nil, err
		}
		return s, nil
	case c == '-' || (c >= '0' && c <= '9'):
		if bytes.HasPrefix(p.data[p.pos:], []byte("-Infinity")) {
			p.pos += len("-Infinity")
			return math.Inf(-1), nil
		}
		return p.number(build)
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

// container reads an object or an array.
func (p *parser) container(depth int, build bool) (Value, error) {
	open := p.data[p.pos]
	closer := byte('}')
	if open == '[' {
		closer = ']'
	}
	var obj *Object
	var arr []Value
	if build && open == '{' {
		obj = &Object{members: make([]Member, 0, 4)}
	} else if build {
		arr = []Value{}
	}
	p.pos++
	p.skip()
	if p.pos < len(p.data) && p.data[p.pos] == closer {
		p.pos++
		if obj != nil {
			return obj, nil
		}
		if build {
			return arr, nil
		}
		return nil, nil
	}
	for {
		p.skip()
		var key string
		if open == '{' {
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return nil, p.errorf("expecting property name enclosed in double quotes")
			}
			k, err := p.str(build)
			if err != nil {
				return nil, err
			}
			key = k
			p.skip()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return nil, p.errorf("expecting ':' delimiter")
			}
			p.pos++
			p.skip()
		}
		v, err := p.value(depth+1, build)
		if err != nil {
			return nil, err
		}
		switch {
		case obj != nil:
			obj.Set(key, v) // a repeated key keeps its place and takes the new value
		case build:
			arr = append(arr, v)
		}
		p.skip()
		if p.pos >= len(p.data) {
			return nil, p.errorf("expecting ',' delimiter, found end of input")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case closer:
			p.pos++
			if obj != nil {
				return obj, nil
			}
			if build {
				return arr, nil
			}
			return nil, nil
		default:
			return nil, p.errorf("expecting ',' delimiter")
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads a number; with build false it only checks it.
func (p *parser) number(build bool) (Value, error) {
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
	if !build {
		return nil, nil
	}
	if !isFloat {
		raw := d[start:p.pos]
		if string(raw) == "-0" {
			raw = raw[1:]
		}
		return Int(raw), nil
	}
	text := string(d[start:p.pos])
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, p.errorf("bad number %q", text)
	}
	return f, nil
}

// str parses a string literal; the result is WTF-8 (lone surrogates kept). With build
// false it only checks the literal.
func (p *parser) str(build bool) (string, error) {
	p.pos++ // opening quote
	d := p.data
	var b []byte
	for {
		start := p.pos
		for p.pos < len(d) {
			c := d[p.pos]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			if c < 0x80 {
				p.pos++
				continue
			}
			r, n := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errorf("invalid UTF-8") // said as the document's first bad byte
			}
			p.pos += n
		}
		if p.pos >= len(d) {
			return "", p.errorf("unterminated string")
		}
		c := d[p.pos]
		if c == '"' {
			p.pos++
			if !build {
				return "", nil
			}
			if b == nil { // no escapes: the text as it stands
				return string(d[start : p.pos-1]), nil
			}
			return string(append(b, d[start:p.pos-1]...)), nil
		}
		if c < 0x20 {
			return "", p.errorf("invalid control character in string")
		}
		if build {
			b = append(b, d[start:p.pos]...)
		}
		// backslash
		p.pos++
		if p.pos >= len(d) {
			return "", p.errorf("unterminated string")
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
				return "", p.errorf("invalid \\uXXXX escape")
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
			b = pytext.AppendWTF8(b, r)
		default:
			p.pos--
			return "", p.errorf("invalid \\escape")
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

// Detach gives every Raw inside v a copy of its text, so that the document v was parsed
// from can be freed while parts of v are still held: a manifest's outline lets each cell
// go once it is read, and its cases' shapes must not keep the whole file. The copy is
// compact (no whitespace between tokens: an indented manifest's shapes in a third of the
// room); it reads as the same value.
func Detach(v Value) Value {
	switch x := v.(type) {
	case Raw:
		var room [512]byte
		return Raw(bytes.Clone(appendCompact(room[:0], x)))
	case *Object:
		for i := range x.members {
			x.members[i].Value = Detach(x.members[i].Value)
		}
	case []Value:
		for i := range x {
			x[i] = Detach(x[i])
		}
	}
	return v
}

// Resolve is v with the text a depth-limited parse left unread (Raw) parsed: a value
// Marshal can write. The text was checked when it was read, so it parses.
func Resolve(v Value) Value {
	switch x := v.(type) {
	case Raw:
		p, err := Parse(x)
		if err != nil {
			return string(x) // cannot happen: the text was checked when it was read
		}
		return p
	case *Object:
		o := NewObject()
		for _, m := range x.members {
			o.Set(m.Key, Resolve(m.Value))
		}
		return o
	case []Value:
		out := make([]Value, len(x))
		for i, e := range x {
			out[i] = Resolve(e)
		}
		return out
	}
	return v
}

// appendCompact appends JSON text (already checked) without the whitespace between its
// tokens: the runs between white space and strings are appended whole.
func appendCompact(dst, src []byte) []byte {
	i, n := 0, len(src)
	for i < n {
		j := i
		for j < n && compactClass[src[j]] == 0 {
			j++
		}
		dst = append(dst, src[i:j]...)
		if j == n {
			break
		}
		if src[j] == '"' { // a string, as it stands
			k := j + 1
			for k < n && src[k] != '"' {
				if src[k] == '\\' {
					k++
				}
				k++
			}
			k = min(k+1, n)
			dst = append(dst, src[j:k]...)
			i = k
			continue
		}
		for i = j + 1; i < n && compactClass[src[i]] == 1; i++ {
		}
	}
	return dst
}

// compactClass is appendCompact's: 1 for white space, 2 for a string's quote.
var compactClass = [256]uint8{' ': 1, '\n': 1, '\t': 1, '\r': 1, '"': 2}
