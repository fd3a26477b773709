package pyjson

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
)

// Options selects one of json.dumps' output modes.
type Options struct {
	SortKeys bool   // sort_keys=True
	Indent   int    // indent=N; negative means no indentation
	ItemSep  string // separators[0]
	KeySep   string // separators[1]
}

// The four modes the seed uses (seed-spec §3.1, §5.1, §5.4, §17.5).
var (
	// Identity is json.dumps(v, sort_keys=True): what shard ids hash.
	Identity = Options{SortKeys: true, Indent: -1, ItemSep: ", ", KeySep: ": "}
	// Default is json.dumps(v): insertion order, default separators.
	Default = Options{Indent: -1, ItemSep: ", ", KeySep: ": "}
	// File is json.dumps(v, indent=2) as written by write_json (plus a newline, see MarshalFile).
	File = Options{Indent: 2, ItemSep: ",", KeySep: ": "}
	// Compact is json.dumps(v, separators=(",", ":")): the matrix line.
	Compact = Options{Indent: -1, ItemSep: ",", KeySep: ":"}
)

// Marshal encodes v in the given mode. It fails only on values outside the model.
func Marshal(v Value, opt Options) ([]byte, error) {
	e := getEncoder(opt, make([]byte, 0, 256), nil)
	defer putEncoder(e)
	if err := e.encode(v, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// encoders are reused, so the key sequences one learnt serve the next call: loading
// results encodes every row's args, one small object at a time.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder(opt Options, buf []byte, w io.Writer) *encoder {
	e := encoders.Get().(*encoder)
	if e.opt != opt { // what it remembers depends on the mode
		e.seqs, e.indents = [len(e.seqs)]*keySeq{}, nil
	}
	e.opt, e.buf, e.w, e.err = opt, buf, w, nil
	return e
}

func putEncoder(e *encoder) {
	e.buf, e.w, e.err = nil, nil, nil
	encoders.Put(e)
}

type encoder struct {
	opt     Options
	buf     []byte
	indents []string
	scratch [][]int // per depth: the order of a large object's members
	seqs    [64]*keySeq
	w       io.Writer // when set, buf is flushed to w as it fills
	err     error
}

// MustMarshal is Marshal for values built by opx itself, which are always in the model.
func MustMarshal(v Value, opt Options) []byte {
	out, err := Marshal(v, opt)
	if err != nil {
		panic(err)
	}
	return out
}

// MarshalFile is write_json's text: indent=2 and a trailing newline.
func MarshalFile(v Value) ([]byte, error) {
	out, err := Marshal(v, File)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func (e *encoder) newline(depth int) {
	if e.opt.Indent < 0 {
		return
	}
	if e.w != nil && len(e.buf) > 48<<10 {
		e.flush()
	}
	for len(e.indents) <= depth {
		e.indents = append(e.indents, "\n"+strings.Repeat(" ", e.opt.Indent*len(e.indents)))
	}
	e.buf = append(e.buf, e.indents[depth]...)
}

func (e *encoder) encode(v Value, depth int) error {
	b, opt := e, e.opt
	switch x := v.(type) {
	case nil:
		b.writeString("null")
	case bool:
		if x {
			b.writeString("true")
		} else {
			b.writeString("false")
		}
	case string:
		e.buf = appendString(e.buf, x)
	case Int:
		b.writeString(string(x))
	case float64:
		b.writeString(FloatRepr(x))
	case []Value:
		if len(x) == 0 {
			b.writeString("[]")
			return nil
		}
		b.writeByte('[')
		if b.w != nil && len(x) >= parallelItems && runtime.GOMAXPROCS(0) > 1 && composite(x) {
			if err := b.encodeItems(x, depth); err != nil {
				return err
			}
			b.newline(depth)
			b.writeByte(']')
			return nil
		}
		for i, e := range x {
			if i > 0 {
				b.writeString(opt.ItemSep)
			}
			b.newline(depth + 1)
			if err := b.encode(e, depth+1); err != nil {
				return err
			}
		}
		b.newline(depth)
		b.writeByte(']')
	case *Object:
		if x == nil || x.Len() == 0 {
			b.writeString("{}")
			return nil
		}
		n := len(x.values)
		if n <= smallObject {
			// most objects (all of a testlist's) repeat a few key sequences: their order
			// and quoted keys are worked out once
			k := b.keysOf(x.kl, n)
			b.writeByte('{')
			for i, at := range k.order {
				if i > 0 {
					b.writeString(opt.ItemSep)
				}
				b.newline(depth + 1)
				b.buf = append(b.buf, k.quoted[i]...)
				if err := b.encode(x.values[at], depth+1); err != nil {
					return err
				}
			}
			b.newline(depth)
			b.writeByte('}')
			return nil
		}
		keys := x.kl.keys[:n]
		for len(b.scratch) <= depth {
			b.scratch = append(b.scratch, nil)
		}
		order := b.scratch[depth][:0]
		for i := range n {
			order = append(order, i)
		}
		if opt.SortKeys && !slices.IsSorted(keys) {
			slices.SortFunc(order, func(i, j int) int { return strings.Compare(keys[i], keys[j]) })
		}
		b.scratch[depth] = order
		b.writeByte('{')
		for i, at := range order {
			if i > 0 {
				b.writeString(opt.ItemSep)
			}
			b.newline(depth + 1)
			b.buf = appendString(b.buf, keys[at])
			b.writeString(opt.KeySep)
			if err := b.encode(x.values[at], depth+1); err != nil {
				return err
			}
		}
		b.newline(depth)
		b.writeByte('}')
	default:
		return fmt.Errorf("pyjson: cannot encode %T", v)
	}
	return nil
}

// parallelItems is the length from which a streamed array of objects or arrays (a
// manifest's cells) has its items encoded on every core.
const parallelItems = 4

func composite(x []Value) bool {
	for _, v := range x {
		switch v.(type) {
		case *Object, []Value:
		default:
			return false
		}
	}
	return true
}

// encodeItems encodes the items of x, with their separators and indentation, on every
// core: each worker encodes pieces of whole items into buffers of its own, and b writes
// them out in order as they complete. Buffers are recycled, so memory stays a few pieces' worth.
func (b *encoder) encodeItems(x []Value, depth int) error {
	type piece struct {
		buf []byte
		err error
	}
	workers := runtime.GOMAXPROCS(0)
	// a piece is a run of consecutive items, about eight pieces a worker: a manifest's
	// cells go to the file in writes of 100-200 KB, which the kernel takes in larger
	// folios and fewer calls than one write per cell (0.3 ms less for a 2.6 MB one)
	per := max(1, len(x)/(8*workers))
	done := make([]chan piece, (len(x)+per-1)/per)
	for i := range done {
		done[i] = make(chan piece, 1)
	}
	// a worker takes a buffer before an item, so the item b waits for always has one
	free := make(chan []byte, 2*workers)
	for range 2 * workers {
		free <- nil
	}
	itemsInParallel.Add(1)
	var next atomic.Int64
	opt := b.opt // workers may start after b has gone back to the pool
	for range workers {
		go func() {
			e := getEncoder(opt, nil, nil)
			for {
				buf := <-free
				i := int(next.Add(1)-1) * per
				if i >= len(x) {
					free <- buf
					putEncoder(e)
					return
				}
				if buf == nil { // sized for a piece at once: no trail of outgrown buffers
					buf = make([]byte, 0, per*64<<10)
				}
				e.buf = buf[:0]
				var err error
				for j := i; j < min(i+per, len(x)) && err == nil; j++ {
					if j > 0 {
						e.writeString(e.opt.ItemSep)
					}
					e.newline(depth + 1)
					err = e.encode(x[j], depth+1)
				}
				done[i/per] <- piece{e.buf, err}
			}
		}()
	}
	var err error
	for i := range done { // every piece is taken, even after an error, so no worker is left blocked
		p := <-done[i]
		if err == nil {
			err = p.err
		}
		if err == nil {
			err = b.flush()
		}
		if err == nil {
			_, err = b.w.Write(p.buf)
			if err != nil {
				b.err = err
			}
		}
		free <- p.buf
	}
	return err
}

// itemsInParallel counts arrays encoded by encodeItems (for the tests).
var itemsInParallel atomic.Int64

// smallObject is the size up to which an object's key order and quoted keys are
// remembered per key sequence.
const smallObject = 12

// keySeq is what an encoder remembers of one sequence of keys: the order to write them
// in (sorted under sort_keys) and each key quoted, with the key separator.
type keySeq struct {
	kl     *keyList // the list it was made for (a list and a length name one sequence)
	keys   []string
	order  []int
	quoted [][]byte
}

// keysOf returns the key sequence of the first n keys of l, from the encoder's cache when
// the last object in its slot had the same keys: at once for the same list (objects that
// share their keys), else key by key (interned strings compare by pointer first). A miss
// builds new slices, so an object being written keeps its own even when a nested one
// takes the slot.
func (b *encoder) keysOf(l *keyList, n int) *keySeq {
	m := l.keys[:n]
	slot := &b.seqs[seqSlot(n, m[0], m[n-1], len(b.seqs))]
	if k := *slot; k != nil && len(k.keys) == n {
		if k.kl == l {
			return k
		}
		if slices.Equal(k.keys, m) {
			k.kl = l // the next object with this list hits at once
			return k
		}
	}
	k := &keySeq{kl: l, keys: m, order: make([]int, n), quoted: make([][]byte, n)}
	for i := range m {
		k.order[i] = i
	}
	if b.opt.SortKeys {
		o := k.order
		for i := 1; i < len(o); i++ {
			for j := i; j > 0 && m[o[j]] < m[o[j-1]]; j-- {
				o[j], o[j-1] = o[j-1], o[j]
			}
		}
	}
	for i, at := range k.order {
		k.quoted[i] = append(appendString(nil, m[at]), b.opt.KeySep...)
	}
	*slot = k
	return k
}

// AppendMarshal appends v's encoding to buf (to reuse one buffer for many values).
func AppendMarshal(buf []byte, v Value, opt Options) ([]byte, error) {
	e := getEncoder(opt, buf, nil)
	defer putEncoder(e)
	err := e.encode(v, 0)
	return e.buf, err
}

// Encode writes v's encoding to w in pieces, so a large document is never held whole.
func Encode(w io.Writer, v Value, opt Options) error {
	e := getEncoder(opt, make([]byte, 0, 64<<10), w)
	defer putEncoder(e)
	if err := e.encode(v, 0); err != nil {
		return err
	}
	return e.flush()
}

func (e *encoder) flush() error {
	if e.w == nil || len(e.buf) == 0 || e.err != nil {
		return e.err
	}
	_, e.err = e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return e.err
}

const hexDigits = "0123456789abcdef"

func (e *encoder) writeString(s string) { e.buf = append(e.buf, s...) }
func (e *encoder) writeByte(c byte)     { e.buf = append(e.buf, c) }

// WriteString writes s as Python's json.dumps does with ensure_ascii=True: everything
// outside printable ASCII (0x20–0x7e) becomes \uXXXX, astral characters a surrogate pair,
// and <, > and & stay as they are.
func WriteString(b *strings.Builder, s string) {
	b.Write(appendString(nil, s))
}

func appendString(buf []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	var b strings.Builder
	writeEscaped(&b, s)
	return append(buf, b.String()...)
}

func writeEscaped(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
			i++
			continue
		case '\\':
			b.WriteString(`\\`)
			i++
			continue
		case '\n':
			b.WriteString(`\n`)
			i++
			continue
		case '\r':
			b.WriteString(`\r`)
			i++
			continue
		case '\t':
			b.WriteString(`\t`)
			i++
			continue
		case '\b':
			b.WriteString(`\b`)
			i++
			continue
		case '\f':
			b.WriteString(`\f`)
			i++
			continue
		}
		r, n := decodeWTF8(s[i:])
		i += n
		if r >= 0x10000 {
			r -= 0x10000
			writeU(b, 0xD800|(r>>10)&0x3FF)
			writeU(b, 0xDC00|r&0x3FF)
		} else {
			writeU(b, r)
		}
	}
	b.WriteByte('"')
}

func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[r>>12&0xF])
	b.WriteByte(hexDigits[r>>8&0xF])
	b.WriteByte(hexDigits[r>>4&0xF])
	b.WriteByte(hexDigits[r&0xF])
}

// FloatRepr formats f as Python's repr(float) (and so json.dumps): the shortest digits that
// round-trip, in fixed notation when the decimal exponent is in [-4, 16), else in
// scientific notation with a signed, at least two-digit exponent; always with a '.' or 'e'.
func FloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	point := exp + 1 // digits before the decimal point
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
	default:
		return sign + digits[:point] + "." + digits[point:]
	}
}

// Repr is Python's repr() of a str: single quotes unless the text holds a ' and no ",
// backslash escapes for \, the quote, \n, \r, \t and unprintable characters
// (cleanup.log and some seed messages use it; seed-spec §3.7).
func Repr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, n := decodeWTF8(s[i:])
		i += n
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteByte('\\')
			b.WriteByte(quote)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case (r >= 0xD800 && r <= 0xDFFF) || !unicode.IsPrint(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}
