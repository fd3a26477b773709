package pyjson

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
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
//
// data may be a file mapped into memory: if it shrinks while being read, the fault is
// reported as ErrChanged instead of crashing the process.
func Parse(data []byte) (v Value, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverFault(&err)
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &SyntaxError{"unexpected UTF-8 byte-order mark", 1, 1}
	}
	p := &parser{data: data}
	if len(data) >= cachesFrom {
		p.caches = new(parseCaches)
	}
	p.skip()
	if len(data) >= parallelFrom && p.pos < len(data) && data[p.pos] == '[' && runtime.GOMAXPROCS(0) > 1 {
		v, err = p.splitArray() // checks the UTF-8 too, chunk by chunk
	} else {
		if !utf8.Valid(data) {
			return nil, invalidUTF8(data)
		}
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
	p := &parser{data: data, pos: i}
	return p.errorf("invalid UTF-8 byte 0x%02x", data[i])
}

// ErrChanged is Parse's error when its input, a mapped file, was cut short under it.
var ErrChanged = errors.New("the file changed while it was read")

// recoverFault turns a memory fault while reading a mapped input into ErrChanged; any
// other panic goes on.
func recoverFault(err *error) {
	if r := recover(); r != nil {
		if _, fault := r.(interface{ Addr() uintptr }); fault {
			*err = ErrChanged
			return
		}
		panic(r)
	}
}

type parser struct {
	data  []byte
	pos   int
	stack []Member // members of the objects being read, innermost last
	// short strings seen before (keys, dtypes, testlist names), already boxed: a testlist
	// repeats the same few thousand times
	intern map[string]Value
	caches *parseCaches  // for large documents only: small ones are many and short
	lists  *[32]*keyList // the key sequences seen last, shared by the objects that repeat them
	pred   [8]*keyList   // per depth, the keys of the last object read there
}

// quoted reports whether the document has key, in quotes, at p.pos, and if so moves past
// it. key must be plain (no quote, backslash or control character), so that its text in
// the document is exactly the key.
func (p *parser) quoted(key string) bool {
	d, q := p.data, p.pos+1
	if end := q + len(key); end < len(d) && d[end] == '"' && string(d[q:end]) == key {
		p.pos = end + 1
		return true
	}
	return false
}

// keysOf returns a shared key list for m's keys: the one the last object with these keys
// got, when it is still in its slot.
func (p *parser) keysOf(m []Member) *keyList {
	if p.lists == nil {
		p.lists = new([32]*keyList)
	}
	slot := &p.lists[seqSlot(len(m), m[0].Key, m[len(m)-1].Key, len(p.lists))]
	if l := *slot; l != nil && len(l.keys) == len(m) {
		hit := true
		for i := range m {
			if l.keys[i] != m[i].Key {
				hit = false
				break
			}
		}
		if hit {
			return l
		}
	}
	keys := make([]string, len(m))
	for i := range m {
		keys[i] = m[i].Key
	}
	*slot = sharedKeys(keys)
	return *slot
}

// cachesFrom is the document size from which a parser keeps parseCaches.
const cachesFrom = 16 << 10

// parseCaches are direct-mapped caches of boxed values: a testlist's keys and dtypes come
// back every few strings, and its sizes repeat.
type parseCaches struct{ strs, ints cacheTable }

type cacheTable [128]cacheEntry

type cacheEntry struct {
	s string
	v Value
}

// find returns raw's slot and whether it holds raw (raw is not empty).
func (t *cacheTable) find(raw []byte) (slot *cacheEntry, hit bool) {
	slot = &t[(len(raw)*131+int(raw[0])*31+int(raw[len(raw)/2])*7+int(raw[len(raw)-1]))%len(t)]
	return slot, slot.v != nil && slot.s == string(raw)
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
	d, i := p.data, p.pos
	for i < len(d) && d[i] <= ' ' && (d[i] == ' ' || d[i] == '\n' || d[i] == '\t' || d[i] == '\r') {
		i++
	}
	p.pos = i
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
	// objects at one depth mostly repeat the last one's keys (a testlist's shapes, their
	// args): each key is first checked against that list's, byte for byte
	var pred *keyList
	if depth < len(p.pred) {
		pred = p.pred[depth]
	}
	for {
		p.skip()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expecting property name enclosed in double quotes")
		}
		var key string
		if n := len(p.stack) - base; pred != nil && n < len(pred.keys) && p.quoted(pred.keys[n]) {
			key = pred.keys[n]
		} else {
			pred = nil
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			key = k.(string)
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
		// a repeated key keeps its place and takes the new value (Python dict semantics)
		if pred != nil { // the list's keys are distinct
			p.stack = append(p.stack, Member{key, v})
		} else if idx != nil {
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
			m := p.stack[base:]
			if pred != nil && len(m) == len(pred.keys) {
				o.kl = pred
			} else {
				o.kl = p.keysOf(m)
			}
			if depth < len(p.pred) && o.kl.plain {
				p.pred[depth] = o.kl
			}
			o.values = make([]Value, len(m))
			for i := range m {
				o.values[i] = m[i].Value
			}
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
	if stop > p.pos { // a chunk: room for its elements at once (untouched room costs nothing)
		out = make([]Value, 0, (stop-p.pos)/96+8)
	}
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

// parallelFrom is the size from which a top-level array is read by several parsers at once.
const parallelFrom = 128 << 10

// chunkBytes is about how much of such an array one parser reads at a time.
const chunkBytes = 48 << 10

// splitArray reads a large top-level array (a testlist) in chunks, on every core. Each
// chunk but the first starts at a guessed element boundary ("}" "," "{"); chunk k's
// parse is used only when chunk k-1's, itself validated, arrived at exactly that offset
// as the start of an element — so the result, and any error, are the sequential parse's.
// Parsers take chunks as they finish, so the cores stay busy to the end.
func (p *parser) splitArray() (Value, error) {
	p.pos++ // [
	p.skip()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []Value{}, nil
	}
	starts := []int{p.pos}
	n := (len(p.data) - p.pos) / chunkBytes
	for k := 1; k < n; k++ {
		c := guessBoundary(p.data, p.pos+k*(len(p.data)-p.pos)/n)
		if c > starts[len(starts)-1] {
			starts = append(starts, c)
		}
	}
	if len(starts) == 1 {
		if !utf8.Valid(p.data) {
			return nil, invalidUTF8(p.data)
		}
		out, _, err := p.elems(0, -1)
		return out, err
	}
	type chunk struct {
		vals    []Value
		end     int  // where its parser stopped
		reached bool // it stopped exactly at the next chunk's start
		err     error
	}
	chunks := make([]chunk, len(starts))
	var next atomic.Int64
	var invalid atomic.Bool // some chunk's bytes are not UTF-8: reported before anything else
	work := func(q *parser) {
		for k := int(next.Add(1) - 1); k < len(starts); k = int(next.Add(1) - 1) {
			stop := -1
			from, to := starts[k], len(p.data) // chunk 0 from the document's start
			if k == 0 {
				from = 0
			}
			if k+1 < len(starts) {
				stop = starts[k+1]
				to = stop // a '{': no UTF-8 sequence spans a chunk's edge
			}
			if !utf8.Valid(p.data[from:to]) {
				invalid.Store(true)
			}
			q.pos = starts[k]
			c := &chunks[k]
			c.vals, c.reached, c.err = q.elems(0, stop)
			c.end = q.pos
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(starts))
	var wg sync.WaitGroup
	var faulted atomic.Bool
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			var err error
			defer func() { // a fault here is reported through the chunks it left unread
				if recoverFault(&err); err != nil {
					faulted.Store(true)
				}
			}()
			work(&parser{data: p.data, caches: new(parseCaches)})
		}()
	}
	work(p)
	wg.Wait()
	if faulted.Load() {
		return nil, ErrChanged
	}
	if invalid.Load() {
		return nil, invalidUTF8(p.data)
	}
	total := 0
	for _, c := range chunks {
		total += len(c.vals)
	}
	out := make([]Value, 0, total)
	for k, c := range chunks {
		if c.err != nil { // from a known element start: as the sequential parse reports it
			p.pos = starts[k]
			tail, _, err := p.elems(0, -1)
			if err != nil {
				return nil, err
			}
			return append(out, tail...), nil
		}
		out = append(out, c.vals...)
		p.pos = c.end
		if !c.reached { // the array ended here: the next start was no boundary, or none
			break
		}
		if k+1 < len(chunks) {
			splitsUsed.Add(1)
		}
	}
	return out, nil
}

// splitsUsed counts chunks of a split parse that were used beyond the first (for the tests).
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
	if !isFloat {
		raw := d[start:p.pos]
		if string(raw) == "-0" {
			raw = raw[1:]
		}
		if p.caches == nil {
			return Int(raw), nil
		}
		slot, hit := p.caches.ints.find(raw)
		if hit {
			return slot.v, nil
		}
		text := string(raw)
		var v Value = Int(text)
		slot.s, slot.v = text, v
		return v, nil
	}
	text := string(d[start:p.pos])
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
			if len(raw) > 32 || len(raw) == 0 {
				return string(raw), nil
			}
			var slot *cacheEntry
			if p.caches != nil { // in front of the map
				var hit bool
				if slot, hit = p.caches.strs.find(raw); hit {
					return slot.v, nil
				}
			}
			v, ok := p.intern[string(raw)]
			if !ok {
				v = string(raw)
				if p.intern == nil {
					p.intern = make(map[string]Value, 64)
				}
				if len(p.intern) < 8192 {
					p.intern[v.(string)] = v
				}
			}
			if slot != nil {
				slot.s, slot.v = v.(string), v
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
