package safe

import "testing"

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"gemm m=1 n=64":      "gemm m=1 n=64",
		"tab\tstays":         "tab\tstays",
		"\x1b[31mred\x1b[0m": `\x1b[31mred\x1b[0m`,
		"line\nbreak\r":      `line\x0abreak\x0d`,
		"c1 \u009b csi":      `c1 \x9b csi`,
		"bad \xff byte":      `bad \xff byte`,
		"µs ×2 — ok":         "µs ×2 — ok",
		"del\x7f":            `del\x7f`,
		"rtl \u202egnp.exe":  `rtl \u202egnp.exe`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// Outside text in Markdown is shown as it is: no image, no link, no emphasis, no code
// span, no heading, no reversed or hidden text; ordinary names stay readable.
func TestMarkdown(t *testing.T) {
	for in, want := range map[string]string{
		"latency_us of gemm m=1": "latency_us of gemm m=1",
		"![ok](https://evil.example/pixel.png) [rerun passed: approve](https://evil.example)": `!\[ok\](https://evil.example/pixel.png) \[rerun passed: approve\](https://evil.example)`,
		"a \u202eevil\u202c b \u200bzw": `a \\u202eevil\\u202c b \\u200bzw`, // shown as \u202e
		"*bold* _em_ ~~gone~~ `code`":   "\\*bold\\* \\_em\\_ \\~\\~gone\\~\\~ \\`code\\`",
		"# heading":                     `\# heading`,
		"- item":                        `\- item`,
		"<img src=x> & | pipe":          `&lt;img src=x&gt; &amp; \| pipe`,
		`back\slash`:                    `back\\slash`,
		"two\nlines":                    "two lines",
	} {
		if got := Markdown(in); got != want {
			t.Errorf("Markdown(%q) = %q, want %q", in, got, want)
		}
	}
}

// A message is capped at a character's start, and says how much was left out.
func TestCap(t *testing.T) {
	if got := Cap("short", 10); got != "short" {
		t.Errorf("Cap of a short message: %q", got)
	}
	if got := Cap("aaaaµbbb", 5); got != "aaaa… (5 bytes more)" {
		t.Errorf("Cap in the middle of a character: %q", got)
	}
}

func TestSlack(t *testing.T) {
	for in, want := range map[string]string{
		"gemm <!channel> & co":    "gemm &lt;!channel&gt; &amp; co",
		"two\nlines\x1b[31m":      `two lines\x1b[31m`,
		"<https://evil|click me>": "&lt;https://evil|click me&gt;",
	} {
		if got := Slack(in); got != want {
			t.Errorf("Slack(%q) = %q, want %q", in, got, want)
		}
	}
	if got := SlackCode("a`b <c>"); got != "`a'b &lt;c&gt;`" {
		t.Errorf("SlackCode: %q", got)
	}
}

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"éé", 3, "é"}, {"é", 0, ""}} {
		if got := Prefix(c.s, c.n); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
