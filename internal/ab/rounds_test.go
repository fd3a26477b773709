package ab

import (
	"strings"
	"testing"
)

// Rounds pair a case's rows of both sides round by round; what a side did not measure is
// said, and fails the check only where the base measured it and the head did not.
func TestJudgedRounds(t *testing.T) {
	ok := func(v float64) Row {
		return Row{Testlist: "t", Status: "ok", Metric: "latency_us", Lower: true, Value: v}
	}
	var rounds []Round
	for i := range 8 {
		jitter := 1 + float64(i%3)/1000
		rounds = append(rounds, Round{
			Base: map[string]Row{"slow": ok(100 * jitter), "same": ok(50 * jitter), "lost": ok(10), "new": {Testlist: "t", Status: "error", Message: "boom"},
				"unsup": {Testlist: "t", Status: "unsupported", Message: "bf16"}},
			Head: map[string]Row{"slow": ok(150 * jitter), "same": ok(50 * jitter), "new": ok(7), "unsup": {Testlist: "t", Status: "unsupported", Message: "bf16"}},
		})
	}
	cases := Judged(rounds, Defaults)
	got := map[string]Case{}
	for _, c := range cases {
		got[c.Key] = c
	}
	if len(cases) != 5 || cases[0].Key != "lost" {
		t.Fatalf("cases %v: five, in key order", cases)
	}
	if c := got["slow"]; c.Outcome != "measured" || c.Pairs != 8 || c.Verdict != Slower || !c.Fails {
		t.Errorf("slow: %+v", c)
	}
	if c := got["same"]; c.Verdict != Same || c.Fails {
		t.Errorf("same: %+v", c)
	}
	if c := got["lost"]; !c.Lost || c.Outcome != "head: missing" {
		t.Errorf("lost: %+v", c)
	}
	if c := got["new"]; c.Lost || c.Outcome != "base: error (boom)" {
		t.Errorf("new on the head: %+v", c)
	}
	if c := got["unsup"]; c.Lost || c.Outcome != "unsupported (bf16)" {
		t.Errorf("unsupported on both: %+v", c)
	}
	if n := Needs(cases, Defaults); n != 0 {
		t.Errorf("decided cases need %d more rounds", n)
	}
	rep := Report{Rules: Defaults, Cases: cases}
	if conc, why := rep.Conclusion(); conc != "failure" || why != "1 case(s) slower beyond 2%" {
		t.Errorf("conclusion %s: %s", conc, why)
	}
	rep.Cases = []Case{got["same"], got["lost"], got["unsup"], got["new"]}
	if conc, why := rep.Conclusion(); conc != "failure" || !strings.Contains(why, "1 case(s) the base measured and the head did not") {
		t.Errorf("a lost case: %s: %s", conc, why)
	}
	rep.Cases = []Case{got["same"], got["unsup"], got["new"]}
	if conc, why := rep.Conclusion(); conc != "success" {
		t.Errorf("unsupported on both sides and new on the head fail nothing: %s: %s", conc, why)
	}
	rep.Cases = []Case{got["unsup"]}
	if conc, _ := rep.Conclusion(); conc != "failure" {
		t.Errorf("nothing measured on both sides is never a success")
	}
	// fewer than MinPairs rounds: the measured cases need the rest; an unsure one another round
	if n := Needs(Judged(rounds[:3], Defaults), Defaults); n != 5 {
		t.Errorf("after 3 rounds: %d more, want 5", n)
	}
	noisy := make([]Round, 8)
	for i := range noisy {
		noisy[i] = Round{Base: map[string]Row{"x": ok(100)}, Head: map[string]Row{"x": ok([]float64{80, 125}[i%2])}}
	}
	if n := Needs(Judged(noisy, Defaults), Defaults); n != 2 {
		t.Errorf("an unsure case after 8 rounds: %d more, want 2", n)
	}
}
