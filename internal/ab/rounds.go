package ab

// The rounds of a paired A/B execution (opx run --ab): each round measures every case of
// the shard once on each side, one side after the other in ABBA order, on one node in one
// allocation; a round's two rows of a case are one pair.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Row is one side's row of a case in one round: its status ("ok", "unsupported", "error")
// and, when ok, its headline metric (Value > 0; Metric "" when the row has none).
type Row struct {
	Testlist, Status, Message string
	Metric                    string
	Lower                     bool
	Value                     float64
}

// Round is one round's rows of both sides, by case key.
type Round struct{ Base, Head map[string]Row }

// Judged is every case of the rounds judged from its pairs, in key order: a case both
// sides measured in a round is a pair of that round (the same metric on both sides); a
// case the head did not measure where the base did is Lost (it fails the check). The
// measured cases are judged together: each fails at their joint level (Options.Cases, at
// least their number).
func Judged(rounds []Round, o Options) []Case {
	keys := map[string]bool{}
	for _, r := range rounds {
		for k := range r.Base {
			keys[k] = true
		}
		for k := range r.Head {
			keys[k] = true
		}
	}
	var out []Case
	var pairs [][]Pair
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		c, p := paired(k, rounds)
		out, pairs = append(out, c), append(pairs, p)
	}
	measured := 0
	for _, c := range out {
		if c.Outcome == "measured" {
			measured++
		}
	}
	o.Cases = max(o.Cases, measured)
	for i := range out {
		if out[i].Outcome == "measured" {
			out[i].Result, _ = Judge(pairs[i], out[i].Lower, o) // measured values only: Judge cannot refuse them
		}
		out[i].Verdict = cmp.Or(out[i].Verdict, Unsure)
	}
	return out
}

// paired is one case over the rounds, not yet judged: its pairs (the rounds in which both
// sides measured it with the same metric) and, when it has none, what the sides said.
func paired(key string, rounds []Round) (Case, []Pair) {
	c := Case{Key: key}
	var pairs []Pair
	baseOK, headOK := false, false
	var baseSaid, headSaid string // what a side said when it did not measure (its newest)
	for _, r := range rounds {
		b, hasB := r.Base[key]
		h, hasH := r.Head[key]
		for _, x := range []Row{b, h} {
			if x.Testlist != "" {
				c.Testlist = x.Testlist
			}
		}
		bOK, hOK := hasB && measured(b), hasH && measured(h)
		baseOK, headOK = baseOK || bOK, headOK || hOK
		if !bOK {
			baseSaid = said(b, hasB)
		}
		if !hOK {
			headSaid = said(h, hasH)
		}
		if bOK && hOK && b.Metric == h.Metric {
			c.Metric, c.Lower = b.Metric, b.Lower
			pairs = append(pairs, Pair{Base: b.Value, Head: h.Value})
		}
	}
	switch {
	case len(pairs) > 0:
		c.Outcome = "measured"
	case baseOK && !headOK:
		c.Outcome, c.Lost = "head: "+headSaid, true
	case headOK && !baseOK:
		c.Outcome = "base: " + baseSaid
	case baseOK && headOK: // the head's headline metric is another: nothing to compare, and a change
		c.Outcome, c.Lost = "head: measured another metric than the base", true
	default:
		c.Outcome = cmp.Or(headSaid, baseSaid)
	}
	return c, pairs
}

// measured is whether a row is an ok row with a value to pair.
func measured(r Row) bool { return r.Status == "ok" && r.Metric != "" && r.Value > 0 }

// said is what a side's row says of a case it did not measure.
func said(r Row, has bool) string {
	switch {
	case !has:
		return "missing"
	case r.Status == "ok":
		return "error: ok with no measured metric"
	case r.Message != "":
		return fmt.Sprintf("%s (%s)", r.Status, r.Message)
	}
	return r.Status
}

// Short is whether a measured case's A/B ended before it was judged: fewer than MinPairs
// pairs (its shard failed or was stopped, or a side failed it in some rounds), or slower
// beyond the threshold without failing yet and fewer than MaxPairs pairs (the rounds that
// could fail it did not run: the shard's time ran out, or it failed). The check cannot
// pass it.
func (c Case) Short(o Options) bool {
	return c.Outcome == "measured" && (c.Pairs < o.MinPairs || c.Verdict == Slower && c.Beyond && !c.Fails && c.Pairs < o.MaxPairs)
}

// Needs is how many more rounds the cases need (More, the most of any case still to be
// decided; a case not measured on both sides needs none: another round will not measure it).
func Needs(cases []Case, o Options) int {
	n := 0
	for _, c := range cases {
		if c.Outcome == "measured" {
			n = max(n, More(c.Result, o))
		}
	}
	if len(cases) == 0 || !slices.ContainsFunc(cases, func(c Case) bool { return c.Outcome == "measured" }) {
		return 0
	}
	return n
}
