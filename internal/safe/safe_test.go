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
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
