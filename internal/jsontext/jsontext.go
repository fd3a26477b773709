// Package jsontext writes JSON a member at a time, byte for byte as encoding/json would, for the
// records opx writes by the hundred thousand.
//
// It writes a JSON object member by member as encoding/json writes a
// struct (Record), for the documents opx writes a record at a time by the hundred
// thousand (compare's cases, export's JSON lines): there encoding/json spends most of its
// time finding a struct's fields by reflection. Its tests hold it to encoding/json, byte
// for byte and error for error.
package jsontext

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// appendFloat appends f as encoding/json writes a float64: as ES6 writes a number, an
// exponent below 1e-6 and from 1e21; NaN and ±Inf are json.Marshal's error.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, &json.UnsupportedValueError{Value: reflect.ValueOf(f), Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // e-09 as e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// appendString appends s quoted as encoding/json writes a string: with html (as
// json.Marshal does) <, > and & escaped, control characters as \b \f \n \r \t or \u00XX,
// U+2028 and U+2029 escaped, and each byte of invalid UTF-8 as \ufffd.
func appendString(dst []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!html || (b != '<' && b != '>' && b != '&')) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}

// A Record is a JSON object written member by member as encoding/json writes a struct's
// fields: each member is given with its name and the separator before it (`,"name":`),
// and the first error — a float that is not finite, as json.Marshal refuses it — is kept
// in Err, after which nothing more is written.
type Record struct {
	B        []byte
	Err      error
	KeepHTML bool // <, > and & as they stand (an Encoder with SetEscapeHTML(false)), not escaped
}

// Raw appends text as it stands.
func (r *Record) Raw(text string) {
	if r.Err == nil {
		r.B = append(r.B, text...)
	}
}

// String appends a member whose value is s.
func (r *Record) String(name, s string) {
	if r.Err == nil {
		r.B = appendString(append(r.B, name...), s, !r.KeepHTML)
	}
}

// Int appends a member whose value is n.
func (r *Record) Int(name string, n int) {
	if r.Err == nil {
		r.B = strconv.AppendInt(append(r.B, name...), int64(n), 10)
	}
}

// Bool appends a member whose value is b.
func (r *Record) Bool(name string, b bool) {
	if r.Err == nil {
		r.B = strconv.AppendBool(append(r.B, name...), b)
	}
}

// Float appends a member whose value is f.
func (r *Record) Float(name string, f float64) {
	if r.Err == nil {
		r.B, r.Err = appendFloat(append(r.B, name...), f)
	}
}
