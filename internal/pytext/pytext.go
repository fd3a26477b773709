// Package pytext holds Python's rules for text that opx follows to the byte: repr() of a str,
// and the WTF-8 form of names that are not valid UTF-8.
//
// It holds Python's rules for text that opx must follow to the byte: repr() of
// a str, which the seed's messages and cleanup.log quote names with, and the WTF-8 form in
// which Python's json module lets a lone surrogate travel through a str. The JSON codec
// (package pyjson) builds on it; messages use Repr without touching JSON.
package pytext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Repr is Python's repr() of a str: single quotes unless the text holds a ' and no ",
// backslash escapes for \, the quote, \n, \r, \t and unprintable characters
// (cleanup.log and some seed messages use it; docs/compat-spec.md §3.7).
func Repr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, n := DecodeWTF8(s[i:])
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

// AppendWTF8 is utf8.AppendRune, except that surrogates are encoded as three bytes
// instead of being replaced.
func AppendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(b, r)
}

// DecodeWTF8 decodes one code point of a WTF-8 string, accepting encoded surrogates.
// Invalid bytes decode as U+FFFD, one byte at a time.
func DecodeWTF8(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s)
}
