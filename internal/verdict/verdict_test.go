package verdict

import (
	"math"
	"strings"
	"testing"
)

func TestOfStatus(t *testing.T) {
	for status, want := range map[string]Outcome{"ok": Measured, "unsupported": Unsupported, "error": Error, "boom": Error,
		"missing": Missing, "": Missing} {
		if got := OfStatus(status); got != want {
			t.Errorf("OfStatus(%q) = %s, want %s", status, got, want)
		}
	}
	if !Better(Measured, Unsupported) || !Better(Unsupported, Error) || !Better(Error, Missing) || Better(Error, Error) {
		t.Error("a case keeps its best row: measured > unsupported > error > missing")
	}
}

func TestInvalid(t *testing.T) {
	for _, c := range []struct {
		v       float64
		shown   string // as the row wrote it
		present bool
		want    string
	}{
		{12.5, "12.5", true, ""},
		{math.Inf(1), "Infinity", true, "invalid measurement: latency_us is Infinity (a measured value must be finite and positive)"},
		{math.NaN(), "NaN", true, "invalid measurement: latency_us is NaN (a measured value must be finite and positive)"},
		{0, "0", true, "invalid measurement: latency_us is 0 (a measured value must be finite and positive)"},
		{-3, "-3", true, "invalid measurement: latency_us is -3 (a measured value must be finite and positive)"},
		{0, "", false, "invalid measurement: an ok row without a latency, time or throughput metric"},
	} {
		if got := Invalid("latency_us", c.v, func() string { return c.shown }, c.present); got != c.want {
			t.Errorf("Invalid(%v, %v) = %q, want %q", c.v, c.present, got, c.want)
		}
	}
}

func TestShard(t *testing.T) {
	for _, c := range []struct {
		name             string
		found, exited0   bool
		t                Tally
		want, attemptWas string
	}{
		{"never ran", false, false, Tally{Missing: 3}, NotRun, ""},
		{"measured and answered", true, true, Tally{Measured: 2, Unsupported: 1}, Success, Success},
		{"one unsupported case (--chunk-size 1)", true, true, Tally{Unsupported: 1}, Declined, Declined},
		{"exit 1", true, false, Tally{Measured: 3}, Failed, Failed},
		{"an error row", true, true, Tally{Measured: 2, Error: 1}, Failed, Failed},
		{"a case without a row", true, true, Tally{Measured: 2, Missing: 1}, Failed, Failed},
		{"no case", true, true, Tally{}, Failed, Failed},
	} {
		if got := Shard(c.found, c.exited0, c.t); got != c.want {
			t.Errorf("%s: Shard = %s, want %s", c.name, got, c.want)
		}
		if c.found {
			if got := Attempt(true, c.exited0, c.t); got != c.attemptWas {
				t.Errorf("%s: Attempt = %s, want %s", c.name, got, c.attemptWas)
			}
		}
	}
	if got := Attempt(false, false, Tally{Measured: 3}); got != Unfinished {
		t.Errorf("no status.json: %s, want unfinished", got)
	}
	if !Good(Success) || !Good(Declined) || Good(Failed) || Good(NotRun) || Good(Unfinished) {
		t.Error("Good: success and unsupported only")
	}
}

func TestRunVerdict(t *testing.T) {
	run := func(cases map[string][]Outcome, shards ...string) Verdict {
		var r Run
		for _, b := range []string{"cpu", "vllm"} {
			for _, o := range cases[b] {
				r.Case(b, o)
			}
		}
		for i, s := range shards {
			r.Shard(string(rune('a'+i)), s)
		}
		return r.Verdict()
	}
	n := func(o Outcome, k int) []Outcome {
		out := make([]Outcome, k)
		for i := range out {
			out[i] = o
		}
		return out
	}
	for _, c := range []struct {
		name string
		v    Verdict
		ok   bool
		line string
	}{
		{"every backend measured", run(map[string][]Outcome{"cpu": {Measured, Unsupported}, "vllm": {Measured}}, Success, Success), true,
			"success: 2 of 3 cases measured, 1 unsupported, 0 error, 0 missing"},
		{"chunk-size 1: a shard of one unsupported case", run(map[string][]Outcome{"cpu": {Measured, Unsupported}}, Success, Declined), true,
			"success: 1 of 2 cases measured, 1 unsupported, 0 error, 0 missing"},
		{"every case unsupported", run(map[string][]Outcome{"cpu": n(Unsupported, 7212)}, Declined, Declined), false,
			"failed: 0 of 7212 cases measured, 7212 unsupported, 0 error, 0 missing; backend cpu measured nothing (7212 unsupported)"},
		{"one backend measured nothing", run(map[string][]Outcome{"cpu": {Measured}, "vllm": {Error, Missing}}, Failed), false,
			"failed: 1 of 3 cases measured, 0 unsupported, 1 error, 1 missing; backend vllm measured nothing (1 error, 1 missing); 1 of 1 shards did not succeed (a)"},
		{"a shard failed though its cases are in", run(map[string][]Outcome{"cpu": {Measured}}, Failed), false,
			"failed: 1 of 1 cases measured, 0 unsupported, 0 error, 0 missing; 1 of 1 shards did not succeed (a)"},
		{"nothing requested", run(nil), false, "failed: 0 of 0 cases measured, 0 unsupported, 0 error, 0 missing; no case was requested"},
		{"many shards failed", run(map[string][]Outcome{"cpu": {Measured, Missing}}, Failed, Failed, NotRun, Failed), false,
			"failed: 1 of 2 cases measured, 0 unsupported, 0 error, 1 missing; 4 of 4 shards did not succeed (a, b, c, ...)"},
	} {
		if c.v.OK != c.ok || c.v.Line() != c.line {
			t.Errorf("%s: %v %q, want %v %q", c.name, c.v.OK, c.v.Line(), c.ok, c.line)
		}
		if (c.v.Word() == "success") != c.ok || (c.v.Class() == "good") != c.ok || (len(c.v.Reasons) == 0) != c.ok {
			t.Errorf("%s: word %s, class %s, reasons %q disagree with ok %v", c.name, c.v.Word(), c.v.Class(), c.v.Reasons, c.ok)
		}
	}
	// the error-or-missing reason is in the reasons, said once in the line (by the tally)
	v := run(map[string][]Outcome{"cpu": {Measured, Error}}, Failed)
	if why := strings.Join(v.Reasons, "; "); why != "1 of 2 cases error or missing (1 error, 0 missing); 1 of 1 shards did not succeed (a)" {
		t.Errorf("why %q", why)
	}
}

// An outcome's word and its row status go back to it: one vocabulary for every command.
func TestOutcomeWords(t *testing.T) {
	for _, o := range []Outcome{Measured, Unsupported, Error, Missing} {
		if got, ok := ParseOutcome(o.String()); !ok || got != o {
			t.Errorf("ParseOutcome(%q) = %v %v", o.String(), got, ok)
		}
		if got := OfStatus(o.Status()); got != o {
			t.Errorf("OfStatus(%q) = %v, want %v", o.Status(), got, o)
		}
	}
	if _, ok := ParseOutcome("fine"); ok {
		t.Error("ParseOutcome took a word of no outcome")
	}
}
