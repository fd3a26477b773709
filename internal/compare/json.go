package compare

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// The cases of a comparison are written as json.Marshal writes a Case, field by field:
// WriteJSON writes a case for every key of both runs (128,000 of them, 109 MB, at the
// largest sweep), and encoding/json spends most of its time there finding a Case's fields
// by reflection. TestAppendCaseIsMarshal holds these functions to json.Marshal, byte for
// byte, error for error.

// appendCase appends c as json.Marshal writes it.
func appendCase(dst []byte, c *Case) ([]byte, error) {
	dst = append(dst, `{"key":`...)
	dst = appendString(dst, c.Key)
	dst = appendField(dst, `,"testlist":`, c.Testlist)
	dst = appendField(dst, `,"op_type":`, c.OpType)
	dst = appendField(dst, `,"args":`, c.Args)
	dst = appendField(dst, `,"backend":`, c.Backend)
	dst = appendField(dst, `,"cluster":`, c.Cluster)
	dst = strconv.AppendInt(append(dst, `,"world_size":`...), int64(c.WorldSize), 10)
	if c.BaseStatus != "" {
		dst = appendField(dst, `,"base_status":`, c.BaseStatus)
	}
	if c.NewStatus != "" {
		dst = appendField(dst, `,"new_status":`, c.NewStatus)
	}
	if c.NewMessage != "" {
		dst = appendField(dst, `,"new_message":`, c.NewMessage)
	}
	dst = appendField(dst, `,"class":`, c.Class)
	var err error
	if c.Primary != nil {
		if dst, err = appendMetric(append(dst, `,"primary":`...), c.Primary); err != nil {
			return dst, err
		}
	}
	if len(c.Metrics) > 0 {
		dst = append(dst, `,"metrics":[`...)
		for i := range c.Metrics {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendMetric(dst, &c.Metrics[i]); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ']')
	}
	if p := c.PctOfRoofline; p != nil {
		dst = append(dst, `,"pct_of_roofline":{`...)
		sep := ""
		for _, f := range []struct {
			name string
			v    float64
		}{{`"base":`, p.Base}, {`"new":`, p.New}} {
			if f.v != 0 {
				if dst, err = appendFloat(append(append(dst, sep...), f.name...), f.v); err != nil {
					return dst, err
				}
				sep = ","
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// appendMetric appends m as json.Marshal writes it.
func appendMetric(dst []byte, m *Metric) ([]byte, error) {
	dst = append(dst, `{"name":`...)
	dst = appendString(dst, m.Name)
	dst = appendField(dst, `,"direction":`, m.Direction)
	var err error
	for _, f := range []struct {
		name string
		v    float64
	}{{`,"base":`, m.Base}, {`,"new":`, m.New}, {`,"ratio":`, m.Ratio}, {`,"speedup":`, m.Speedup}} {
		if dst, err = appendFloat(append(dst, f.name...), f.v); err != nil {
			return dst, err
		}
	}
	dst = appendField(dst, `,"change":`, m.Change)
	dst = appendField(dst, `,"class":`, m.Class)
	dst = appendField(dst, `,"noise":`, m.Noise)
	for _, f := range []struct {
		name string
		v    float64
	}{{`,"base_lo":`, m.BaseLo}, {`,"base_hi":`, m.BaseHi}, {`,"new_lo":`, m.NewLo}, {`,"new_hi":`, m.NewHi}} {
		if f.v != 0 { // omitempty
			if dst, err = appendFloat(append(dst, f.name...), f.v); err != nil {
				return dst, err
			}
		}
	}
	return append(dst, '}'), nil
}

func appendField(dst []byte, name, s string) []byte {
	return appendString(append(dst, name...), s)
}

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

// appendString appends s quoted as encoding/json writes a string: <, > and & escaped
// for HTML, control characters as \b \f \n \r \t or \u00XX, U+2028 and U+2029 escaped,
// and each byte of invalid UTF-8 as \ufffd.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
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
