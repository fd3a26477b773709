// Package safe makes outside text safe to print: control and format characters escaped for
// terminals, Markdown escaped for step summaries, messages capped.
//
// It makes outside text safe to print: manifests, testlists and results files
// come from anywhere, and a name holding an escape sequence must not reach a terminal (or
// a GitHub step summary) raw, where it could rewrite the screen or hide a line.
package safe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s with every control character (C0 but tab, DEL, C1), every format
// character (Unicode category Cf: the bidi overrides and isolates that reverse what
// follows, zero-width spaces and joiners that hide it) and every invalid UTF-8 byte
// written as a Go escape (\x1b, \u009b, \u202e); printable text is unchanged.
func Text(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune is whether r is a control character but tab, or a format character.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) && r != '\t' || unicode.Is(unicode.Cf, r)
}

// OneLine is a message as opx prints it: one line, its runs of white space one space, and
// any control character an input smuggled into it shown escaped.
func OneLine(s string) string { return Text(strings.Join(strings.Fields(s), " ")) }

// Slack is outside text for a Slack message, on one line: control and format characters
// escaped (Text), and the three characters Slack asks to be escaped as entities (&, <, >:
// no link, no "<!channel>" mention). Slack has no escape for its emphasis marks: a caller
// shows such text in a code span (SlackCode).
func Slack(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(OneLine(s))
}

// SlackCode is outside text as a Slack code span shows it literally: Slack's text, in
// backticks, a backtick in it turned into a quote (a code span cannot hold one).
func SlackCode(s string) string { return "`" + strings.ReplaceAll(Slack(s), "`", "'") + "`" }

// Markdown is outside text as GitHub Markdown shows it literally, on one line: control
// and format characters escaped (Text: no reversed or hidden text), HTML's <, > and & as
// entities (an error message's "<img>" or "</table>" must not become markup in a step
// summary), table pipes escaped, and the characters of inline syntax backslash-escaped —
// brackets (no link, no image: "![ok](https://host/pixel.png)" stays that text), code
// spans' backticks, emphasis and strikethrough (* ~, and _ at a word's edge: latency_us
// stays as it is), the backslash itself, and a heading's or list's mark at the start.
// Every Markdown output of opx writes outside text through it.
func Markdown(s string) string {
	t := OneLine(s)
	var b strings.Builder
	b.Grow(len(t) + 8)
	prev := ' '
	for i, r := range t {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '|', '\\', '`', '*', '~', '[', ']':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '_':
			next, _ := utf8.DecodeRuneInString(t[i+1:])
			if !wordRune(prev) || !wordRune(next) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case '#', '-', '+', '=':
			if i == 0 {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// MaxMessage is the most of an outside message (a row's, a shard's failure) opx keeps: a
// 20 MB message in one row must not make a 20 MB page or ledger.
const MaxMessage = 4096

// Cap is s cut to at most n bytes (at a character's start), followed by
// "… (N bytes more)" when it was cut.
func Cap(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := Prefix(s, n)
	return fmt.Sprintf("%s… (%d bytes more)", cut, len(s)-len(cut))
}

// Prefix is the longest start of s of at most n bytes that ends at a character's end: a
// hard limit (a GitHub body, a Slack section) that never splits a character.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Trunc is s cut to at most n runes, the last of them "…" when it was cut.
func Trunc(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// ShellWord is s as one POSIX shell word: as it is when it holds only characters a shell
// leaves alone, else single-quoted (” for an empty s).
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
