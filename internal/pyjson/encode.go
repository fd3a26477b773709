package pyjson

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/pytext"
)

// Options selects one of json.dumps' output modes.
type Options struct {
	SortKeys bool   // sort_keys=True
	Indent   int    // indent=N; negative means no indentation
	ItemSep  string // separators[0]
	KeySep   string // separators[1]
}

// The four modes the seed uses (docs/compat-spec.md §3.1, §5.1, §5.4, §17.5).
var (
	// Identity is json.dumps(v, sort_keys=True): what shard ids hash.
	Identity = Options{SortKeys: true, Indent: -1, ItemSep: ", ", KeySep: ": "}
	// Default is json.dumps(v): insertion order, default separators.
	Default = Options{Indent: -1, ItemSep: ", ", KeySep: ": "}
	// File is json.dumps(v, indent=2) as written by write_json (files.WriteJSON adds a newline).
	File = Options{Indent: 2, ItemSep: ",", KeySep: ": "}
	// Compact is json.dumps(v, separators=(",", ":")): the matrix line.
	Compact = Options{Indent: -1, ItemSep: ",", KeySep: ":"}
)

// Marshal encodes v in the given mode. It fails only on values outside the model.
func Marshal(v Value, opt Options) ([]byte, error) {
	return AppendMarshal(make([]byte, 0, 128), v, opt) // most values opx encodes are a case's args
}

// AppendMarshal appends v's encoding to buf.
func AppendMarshal(buf []byte, v Value, opt Options) ([]byte, error) {
	e := &encoder{opt: opt, buf: buf}
	err := e.encode(v, 0)
	return e.buf, err
}

// MustMarshal is Marshal for values built by opx itself, which are always in the model.
func MustMarshal(v Value, opt Options) []byte {
	out, err := Marshal(v, opt)
	if err != nil {
		panic(err)
	}
	return out
}

// Encode writes v's encoding to w in pieces, so a large document is never held whole.
func Encode(w io.Writer, v Value, opt Options) error {
	e := &encoder{opt: opt, w: w, buf: make([]byte, 0, flushAt+4096)}
	if err := e.encode(v, 0); err != nil {
		return err
	}
	return e.flush()
}

// flushAt is how much an Encode holds before writing.
const flushAt = 64 << 10

type encoder struct {
	opt Options
	buf []byte
	w   io.Writer // Encode's: buf goes there as it fills
	err error     // the first write error
}

func (e *encoder) flush() error {
	if e.w != nil && e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
		e.buf = e.buf[:0]
	}
	return e.err
}

// newline starts a line at depth when the mode indents.
func (e *encoder) newline(depth int) {
	if e.opt.Indent < 0 {
		return
	}
	if e.w != nil && len(e.buf) >= flushAt {
		e.flush()
	}
	e.buf = append(e.buf, '\n')
	for range e.opt.Indent * depth {
		e.buf = append(e.buf, ' ')
	}
}

func (e *encoder) encode(v Value, depth int) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		e.buf = appendString(e.buf, x)
	case Int:
		e.buf = append(e.buf, x...)
	case float64:
		e.buf = append(e.buf, FloatRepr(x)...)
	case []Value:
		if len(x) == 0 {
			e.buf = append(e.buf, "[]"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, item := range x {
			if i > 0 {
				e.buf = append(e.buf, e.opt.ItemSep...)
			}
			e.newline(depth + 1)
			if err := e.encode(item, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.buf = append(e.buf, ']')
	case *Object:
		if x.Len() == 0 {
			e.buf = append(e.buf, "{}"...)
			return nil
		}
		members := x.members
		if e.opt.SortKeys && !slices.IsSortedFunc(members, byKey) {
			members = slices.Clone(members)
			slices.SortFunc(members, byKey)
		}
		e.buf = append(e.buf, '{')
		for i, m := range members {
			if i > 0 {
				e.buf = append(e.buf, e.opt.ItemSep...)
			}
			e.newline(depth + 1)
			e.buf = appendString(e.buf, m.Key)
			e.buf = append(e.buf, e.opt.KeySep...)
			if err := e.encode(m.Value, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.buf = append(e.buf, '}')
	default:
		return fmt.Errorf("pyjson: cannot encode %T", v)
	}
	return nil
}

// byKey orders members as sort_keys does: by code point, which for WTF-8 text is byte order.
func byKey(a, b Member) int { return strings.Compare(a.Key, b.Key) }

const hexDigits = "0123456789abcdef"

// shortEscapes are the characters json.dumps writes as a two-character escape.
var shortEscapes = map[byte]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\b': `\b`, '\f': `\f`}

func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			buf = append(buf, c)
			i++
			continue
		}
		if e, ok := shortEscapes[c]; ok {
			buf = append(buf, e...)
			i++
			continue
		}
		r, n := pytext.DecodeWTF8(s[i:])
		i += n
		if r >= 0x10000 {
			r -= 0x10000
			buf = appendU(buf, 0xD800|(r>>10)&0x3FF)
			buf = appendU(buf, 0xDC00|r&0x3FF)
		} else {
			buf = appendU(buf, r)
		}
	}
	return append(buf, '"')
}

func appendU(buf []byte, r rune) []byte {
	return append(buf, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
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
