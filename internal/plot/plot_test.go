package plot

import (
	"strings"
	"testing"
)

// The SVG escapes every text it draws (a node name or a mark's label from a store is
// outside text), draws a dot per point, a spread line where one was recorded and a dashed
// line per mark, and nothing for a series with no point.
func TestSVG(t *testing.T) {
	if got := SVG(Series{Metric: "time_ms"}); got != "" {
		t.Errorf("no point: %q", got)
	}
	s := Series{Metric: "time_ms", LowerIsBetter: true, Marks: []Mark{{At: 1_700_100_000, Label: `1.10x <slower>`}}}
	for i := range 10 {
		p := Point{At: 1_700_000_000 + int64(i)*86400, V: 1 + float64(i)/100, Node: `node-"<a>`}
		if i == 3 {
			p.Spread, p.Lo, p.Hi = true, 0.9, 1.2
		}
		s.Points = append(s.Points, p)
	}
	got := SVG(s)
	for _, want := range []string{`<svg viewBox="0 0 900 240"`, "lower is better", "1.10x &lt;slower&gt;", "node-&#34;&lt;a&gt;", `class="cp"`, `class="sp"`} {
		if !strings.Contains(got, want) {
			t.Errorf("the SVG lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "<a>") || strings.Contains(got, "<slower>") {
		t.Errorf("outside text drawn unescaped:\n%s", got)
	}
	if n := strings.Count(got, "<circle"); n != 10 {
		t.Errorf("%d dots for 10 points", n)
	}
	if n := strings.Count(got, `class="sp"`); n != 1 {
		t.Errorf("%d spread lines for 1 recorded spread", n)
	}
}
