package ab

import (
	"math"
	"math/rand/v2"
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
	for i := range 12 { // two cases measured: failing takes the 99.5% level, 9 pairs or more
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
	if c := got["slow"]; c.Outcome != "measured" || c.Pairs != 12 || c.Verdict != Slower || !c.Fails {
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
	// fewer than MinPairs rounds: the measured cases need the rest; an unsure one another
	// round; a slower one beyond the threshold that does not fail yet at the check's level
	// (8 pairs cannot reach 99.5%) another round too
	if n := Needs(Judged(rounds[:3], Defaults), Defaults); n != 5 {
		t.Errorf("after 3 rounds: %d more, want 5", n)
	}
	if c := Judged(rounds[:8], Defaults)[3]; c.Key != "slow" || c.Verdict != Slower || c.Fails || !c.Beyond || Needs(Judged(rounds[:8], Defaults), Defaults) != 2 {
		t.Errorf("after 8 rounds, two cases: %+v, needs %d", c, Needs(Judged(rounds[:8], Defaults), Defaults))
	}
	// an A/B that ended early: its cases judged on fewer than MinPairs pairs never pass
	if conc, why := (Report{Rules: Defaults, Cases: Judged(rounds[:5], Defaults)[2:3]}).Conclusion(); conc != "failure" || !strings.Contains(why, "the A/B ended before it could judge (fewer than 8 pairs") {
		t.Errorf("five rounds: %s: %s", conc, why)
	}
	// a case slower beyond the threshold whose rounds stopped before it could fail (20
	// cases judged together need 12 pairs): the A/B ended early, never a pass
	o20 := Defaults
	o20.Cases = 20
	slow8 := Judged(rounds[:8], o20)[3]
	if slow8.Key != "slow" || slow8.Fails || !slow8.Beyond || !slow8.Short(o20) {
		t.Errorf("slower, 8 pairs, a family of 20: %+v", slow8)
	}
	if conc, why := (Report{Rules: o20, Cases: []Case{slow8}}).Conclusion(); conc != "failure" || !strings.Contains(why, "the A/B ended before it could judge") {
		t.Errorf("%s: %s", conc, why)
	}
	// a head that measures another headline metric cannot be compared: it fails
	other := []Round{{Base: map[string]Row{"x": ok(10)}, Head: map[string]Row{"x": {Testlist: "t", Status: "ok", Metric: "tflops", Value: 3}}}}
	if c := Judged(other, Defaults)[0]; !c.Lost || c.Outcome != "head: measured another metric than the base" {
		t.Errorf("another metric: %+v", c)
	}
	noisy := make([]Round, 8)
	for i := range noisy {
		noisy[i] = Round{Base: map[string]Row{"x": ok(100)}, Head: map[string]Row{"x": ok([]float64{80, 125}[i%2])}}
	}
	if n := Needs(Judged(noisy, Defaults), Defaults); n != 2 {
		t.Errorf("an unsure case after 8 rounds: %d more, want 2", n)
	}
}

// The fewest pairs with which a case can fail: 2/2^n below the level's error (the
// signed-rank interval's extreme Walsh averages).
func TestPairsToFail(t *testing.T) {
	for cases, want := range map[int]int{0: 8, 1: 8, 2: 9, 6: 11, 20: 12, 200: 16, 1000: 18} {
		o := Defaults
		o.Cases = cases
		if got := PairsToFail(o); got != want {
			t.Errorf("%d cases: %d pairs, want %d", cases, got, want)
		}
	}
}

// aaPRs runs n simulated A/A pull requests of m cases at a per-run noise through the
// rounds as the runner does (Judged, Needs) and counts those whose check fails; cases 1
// judges each case alone (no family level), as the check did before.
func aaPRs(seed uint64, n, m int, noise float64, alone bool) int {
	rng := rand.New(rand.NewPCG(seed, 0xaa))
	failed := 0
	o := Defaults
	if alone {
		o.Cases = 1
	}
	for range n {
		var rounds []Round
		for {
			if len(rounds) >= o.MinPairs {
				cases := Judged(rounds, o)
				if alone { // each case judged on its own level
					for i := range cases {
						var pairs []Pair
						for _, r := range rounds {
							pairs = append(pairs, Pair{r.Base[cases[i].Key].Value, r.Head[cases[i].Key].Value})
						}
						cases[i].Result, _ = Judge(pairs, true, o)
					}
				}
				if Needs(cases, o) == 0 || len(rounds) >= o.MaxPairs {
					if conc, _ := (Report{Rules: o, Cases: cases}).Conclusion(); conc != "success" {
						failed++
					}
					break
				}
			}
			r := Round{Base: map[string]Row{}, Head: map[string]Row{}}
			for c := range m {
				k := string(rune('a' + c))
				r.Base[k] = Row{Status: "ok", Metric: "latency_us", Lower: true, Value: 100 * math.Exp(rng.NormFloat64()*noise)}
				r.Head[k] = Row{Status: "ok", Metric: "latency_us", Lower: true, Value: 100 * math.Exp(rng.NormFloat64()*noise)}
			}
			rounds = append(rounds, r)
		}
	}
	return failed
}

// An A/A pull request of 20 cases on a noisy machine (10% a run: this machine's local
// runner reads ±10% intervals) fails its check at most 1-Level of the time at the check's
// family level; each case judged alone at 99% it fails several times as often (measured:
// 0 and 6 of 400, draw 1; on the local runner, 1 of 200 runs of four cases at 8 pairs
// before the family level).
func TestAAPullRequestsAtTheFamilyLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 800 pull requests")
	}
	family, alone := aaPRs(1, 400, 20, 0.10, false), aaPRs(1, 400, 20, 0.10, true)
	if family > 2 || alone < 4 {
		t.Errorf("A/A PRs of 20 cases at 10%% noise failing: %d of 400 at the family level (want at most 0.5%%), %d of 400 alone (want the inflation shown)", family, alone)
	}
	t.Logf("failing A/A PRs of 20 cases at 10%% noise: %d of 400 at the family level, %d of 400 each case alone", family, alone)
}
