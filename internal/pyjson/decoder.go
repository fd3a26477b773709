package pyjson

import (
	"bytes"
	"math"
	"slices"
	"strconv"
)

// Decoder reads one document a value at a time, for readers that decode straight into
// their own types: the grammar and every error are Parse's (Python's json.loads), and
// nothing is built that the reader does not ask for. A reader walks an object with
// Object, an array with Array, and takes each value with Value, Text or Skip; a member or
// item its callback leaves untaken is checked and skipped. A repeated key is handed over
// again, so a reader that assigns on each key keeps the last value, as Python does.
type Decoder struct {
	p       parser
	depth   int
	scratch []byte // Canonical's: an object's members before they are put in order
}

// NewDecoder starts reading data, refusing what Parse refuses before the first value: a
// byte-order mark. (Invalid UTF-8 is found as Parse finds it: where strings are read, and
// said as the document's first bad byte whatever error meets it first.)
func NewDecoder(data []byte) (*Decoder, error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &SyntaxError{"unexpected UTF-8 byte-order mark", 1, 1}
	}
	d := &Decoder{p: parser{data: data, keep: maxDepth + 1}}
	d.p.skip()
	return d, nil
}

// Kind is the first byte of the next value: '{', '[' or '"' for an object, array or
// string; 0 for anything else (a number, a literal, or no value at all).
func (d *Decoder) Kind() byte {
	if d.p.pos < len(d.p.data) {
		switch c := d.p.data[d.p.pos]; c {
		case '{', '[', '"':
			return c
		}
	}
	return 0
}

// Reset starts reading data again, as NewDecoder does, keeping the decoder's room: a
// reader that decodes many small documents keeps one decoder.
func (d *Decoder) Reset(data []byte) error {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return &SyntaxError{"unexpected UTF-8 byte-order mark", 1, 1}
	}
	*d = Decoder{p: parser{data: data, keep: maxDepth + 1}, scratch: d.scratch[:0]}
	d.p.skip()
	return nil
}

// Value builds the next value.
func (d *Decoder) Value() (Value, error) {
	v, err := d.p.value(d.depth, true)
	d.p.skip()
	return v, err
}

// Skip checks the next value without building it.
func (d *Decoder) Skip() error {
	_, err := d.p.value(d.depth, false)
	d.p.skip()
	return err
}

// Text is the next value when it is a string (ok false, and the value checked and
// skipped, when it is not).
func (d *Decoder) Text() (s string, ok bool, err error) {
	if d.Kind() != '"' {
		return "", false, d.Skip()
	}
	s, err = d.p.str(true)
	d.p.skip()
	return s, err == nil, err
}

// AppendText appends the next value to dst when it is a string, unescaped (ok false, and
// the value checked and skipped, when it is not): Text without a string of its own.
func (d *Decoder) AppendText(dst []byte) (_ []byte, ok bool, err error) {
	if d.Kind() != '"' {
		return dst, false, d.Skip()
	}
	p := &d.p
	start := p.pos
	if _, err := p.str(false); err != nil {
		return dst, false, err
	}
	if raw := p.data[start+1 : p.pos-1]; bytes.IndexByte(raw, '\\') < 0 { // checked, and as it stands
		dst = append(dst, raw...)
	} else {
		p.pos = start
		s, err := p.str(true)
		if err != nil {
			return dst, false, err
		}
		dst = append(dst, s...)
	}
	p.skip()
	return dst, true, nil
}

// Literal is the next value's text when it is a number or a literal (null, true, false,
// NaN, Infinity, -Infinity), checked; ok false, and the value checked and skipped, when
// it is an object, an array or a string.
func (d *Decoder) Literal() (_ []byte, ok bool, err error) {
	if d.Kind() != 0 {
		return nil, false, d.Skip()
	}
	p := &d.p
	start := p.pos
	if _, err := p.value(d.depth, false); err != nil {
		return nil, false, err
	}
	text := p.data[start:p.pos]
	p.skip()
	return text, true, nil
}

// Offset is where the next value starts in the document.
func (d *Decoder) Offset() int { return d.p.pos }

// End checks that nothing but whitespace follows the document.
func (d *Decoder) End() error {
	d.p.skip()
	if d.p.pos != len(d.p.data) {
		return d.p.errorf("extra data after the document")
	}
	return nil
}

// Object reads the object that is the next value, calling each with every member's key
// (valid only during the call) with the decoder at its value. The caller checks Kind
// first: Object on anything else is a syntax error.
func (d *Decoder) Object(each func(key []byte) error) error {
	return d.container('{', func() error {
		p := &d.p
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.errorf("expecting property name enclosed in double quotes")
		}
		key, err := d.key()
		if err != nil {
			return err
		}
		p.skip()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.errorf("expecting ':' delimiter")
		}
		p.pos++
		p.skip()
		return d.member(func() error { return each(key) })
	})
}

// Array reads the array that is the next value, calling each with every item's index
// and the decoder at that item.
func (d *Decoder) Array(each func(i int) error) error {
	i := 0
	return d.container('[', func() error {
		err := d.member(func() error { return each(i) })
		i++
		return err
	})
}

// member runs a callback at a value nested one level down, skipping the value when the
// callback did not take it.
func (d *Decoder) member(take func() error) error {
	p := &d.p
	if p.pos >= len(p.data) {
		return p.errorf("expecting value, found end of input")
	}
	d.depth++
	defer func() { d.depth-- }()
	start := p.pos
	if err := take(); err != nil {
		return err
	}
	if p.pos == start {
		return d.Skip()
	}
	return nil
}

// container reads an object or array, handing each member or item to item.
func (d *Decoder) container(open byte, item func() error) error {
	p := &d.p
	if d.depth > maxDepth {
		return p.errorf("nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) || p.data[p.pos] != open {
		return p.errorf("expecting value")
	}
	closer := byte('}')
	if open == '[' {
		closer = ']'
	}
	p.pos++
	p.skip()
	if p.pos < len(p.data) && p.data[p.pos] == closer {
		p.pos++
		p.skip()
		return nil
	}
	for {
		p.skip()
		if err := item(); err != nil {
			return err
		}
		p.skip()
		if p.pos >= len(p.data) {
			return p.errorf("expecting ',' delimiter, found end of input")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case closer:
			p.pos++
			p.skip()
			return nil
		default:
			return p.errorf("expecting ',' delimiter")
		}
	}
}

// key is a member's key: the document's own bytes when it has no escape.
func (d *Decoder) key() ([]byte, error) {
	p := &d.p
	data := p.data
	for i := p.pos + 1; i < len(data); i++ {
		c := data[i]
		if c == '"' {
			k := data[p.pos+1 : i]
			p.pos = i + 1
			return k, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 { // escaped or not ASCII: read as any string is
			break
		}
	}
	s, err := p.str(true)
	return []byte(s), err
}

// Canonical appends the next value as json.dumps(value, sort_keys=True) writes it — what
// Marshal(v, Identity) writes of the value Value would build — without building it: a
// case's key is its args in this form.
func (d *Decoder) Canonical(dst []byte) ([]byte, error) {
	dst, err := d.canonical(dst)
	d.p.skip()
	return dst, err
}

// CanonicalText is Canonical, and the value's own text as the document writes it.
func (d *Decoder) CanonicalText(dst []byte) ([]byte, Raw, error) {
	start := d.p.pos
	dst, err := d.canonical(dst)
	text := Raw(bytes.TrimRight(d.p.data[start:d.p.pos], " \t\r\n")) // a container's reading ends past the white space after it
	d.p.skip()
	return dst, text, err
}

func (d *Decoder) canonical(dst []byte) ([]byte, error) {
	p := &d.p
	switch d.Kind() {
	case '{':
		type member struct {
			key    []byte
			lo, hi int // its value's text: dst[lo:hi] until the object is written
		}
		var room [8]member
		ms, start := room[:0], len(dst)
		err := d.Object(func(key []byte) error {
			lo := len(dst)
			var err error
			dst, err = d.canonical(dst)
			ms = append(ms, member{key, lo, len(dst)})
			return err
		})
		if err != nil {
			return dst, err
		}
		// sorted by key (code points: WTF-8's byte order); a repeated key keeps its last value
		slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
		d.scratch = append(d.scratch[:0], dst[start:]...)
		dst = append(dst[:start], '{')
		n := 0
		for i, m := range ms {
			if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
				continue
			}
			if n > 0 {
				dst = append(dst, ", "...)
			}
			n++
			dst = AppendQuoted(dst, m.key)
			dst = append(dst, ": "...)
			dst = append(dst, d.scratch[m.lo-start:m.hi-start]...)
		}
		return append(dst, '}'), nil
	case '[':
		dst = append(dst, '[')
		err := d.Array(func(i int) error {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			var err error
			dst, err = d.canonical(dst)
			return err
		})
		return append(dst, ']'), err
	case '"':
		start := p.pos
		if _, err := p.str(false); err != nil { // checked; its text is kept as it stands when it needs no escape
			return dst, err
		}
		if raw := p.data[start+1 : p.pos-1]; plain(raw) {
			return append(append(append(dst, '"'), raw...), '"'), nil
		}
		p.pos = start
		s, err := p.str(true)
		if err != nil {
			return dst, err
		}
		return appendString(dst, s), nil
	}
	start := p.pos
	if _, err := p.value(d.depth, false); err != nil { // a number or a literal, checked
		return dst, err
	}
	text := p.data[start:p.pos]
	dst, ok := AppendLiteral(dst, text)
	if !ok {
		return dst, p.errorf("bad number %q", text)
	}
	return dst, nil
}

// Number is the number a number's or a literal's text (as Decoder.Literal gives it) is,
// as Parse reads it: a float (NaN, Infinity and -Infinity too; one beyond a float's range
// is ±Inf, as Python reads it), or an integer, its digits as Parse keeps them (-0 as 0)
// and their nearest float; ok is false for null, true and false.
func Number(text []byte) (f float64, digits []byte, ok bool) {
	switch string(text) {
	case "null", "true", "false":
		return 0, nil, false
	case "NaN":
		return math.NaN(), nil, true
	case "Infinity":
		return math.Inf(1), nil, true
	case "-Infinity":
		return math.Inf(-1), nil, true
	}
	if bytes.ContainsAny(text, ".eE") {
		f, _ = strconv.ParseFloat(string(text), 64)
		return f, nil, true
	}
	if string(text) == "-0" {
		text = text[1:]
	}
	f, _ = strconv.ParseFloat(string(text), 64)
	return f, text, true
}

// AppendLiteral appends a number's or a literal's text (as Decoder.Literal gives it) as
// json.dumps writes the value Parse builds of it: an integer as written (-0 as 0), a float
// as Python writes it, null, true, false, NaN, Infinity and -Infinity as they stand.
func AppendLiteral(dst, text []byte) (_ []byte, ok bool) {
	switch {
	case text[0] != '-' && (text[0] < '0' || text[0] > '9'), bytes.Equal(text, []byte("-Infinity")):
		return append(dst, text...), true // null, true, false, NaN, Infinity: written as read
	case bytes.ContainsAny(text, ".eE"):
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil && !math.IsInf(f, 0) {
			return dst, false
		}
		return append(dst, FloatRepr(f)...), true
	case string(text) == "-0":
		return append(dst, '0'), true
	}
	return append(dst, text...), true
}

// plain is whether a string's text is written by json.dumps as it stands: printable ASCII
// without a quote or backslash.
func plain(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// AppendQuoted appends s (a key, or a string's text unescaped) as json.dumps writes a
// string: as it stands when it needs no escape.
func AppendQuoted(dst, key []byte) []byte {
	if plain(key) {
		return append(append(append(dst, '"'), key...), '"')
	}
	return appendString(dst, string(key))
}
