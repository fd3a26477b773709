// Package verdict is the one definition of what a run measured: each case measured,
// unsupported, error or missing, and the words, exit code and colour of each.
//
// It is the one definition of what a run measured (docs/verdict.md): every
// case is exactly one Outcome, a shard's status and a run's success follow from its
// cases, and every command's words, exit codes and colours come from here.
//
// A case is measured (an ok row carrying a finite, positive headline metric), unsupported
// (the backend declined it: answered, not measured), error, or missing (no row). A run
// succeeds only when no case is error or missing, no shard failed, and every backend in it
// measured at least one case: a backend that measured nothing across the whole run is a
// broken image or backend, and the run says so.
package verdict

import (
	"fmt"
	"math"
	"strings"
)

// Outcome is what one case came to.
type Outcome uint8

const (
	Missing     Outcome = iota // no row
	Error                      // a row that is neither ok nor unsupported, or an invalid measurement
	Unsupported                // the backend declined it: answered, not measured
	Measured                   // an ok row with its headline metric
)

func (o Outcome) String() string {
	switch o {
	case Measured:
		return "measured"
	case Unsupported:
		return "unsupported"
	case Error:
		return "error"
	}
	return "missing"
}

// Status is the row status of an outcome, OfStatus's inverse ("ok" for measured; "missing"
// for a case no row answered).
func (o Outcome) Status() string {
	if o == Measured {
		return "ok"
	}
	return o.String()
}

// ParseOutcome is the outcome String names, and whether it names one.
func ParseOutcome(word string) (Outcome, bool) {
	for _, o := range []Outcome{Measured, Unsupported, Error, Missing} {
		if o.String() == word {
			return o, true
		}
	}
	return Missing, false
}

// OfStatus is a row's outcome from its status as the reader settled it ("ok" rows whose
// headline value is no measurement are already "error" then, see Invalid): ok is
// measured, unsupported unsupported, missing or none missing, anything else an error.
func OfStatus(status string) Outcome {
	switch status {
	case "ok":
		return Measured
	case "unsupported":
		return Unsupported
	case "missing", "":
		return Missing
	}
	return Error
}

// Better is whether a row of outcome o replaces a kept row of outcome than: a case keeps
// its best row over all attempts.
func Better(o, than Outcome) bool { return o > than }

// Invalid says why an ok row's headline metric is no measurement ("" when it is one): it
// must be there, finite and positive. shown is the value as the row wrote it (for the
// message, asked only then), present whether the row has any metric with a direction.
func Invalid(name string, v float64, shown func() string, present bool) string {
	switch {
	case !present:
		return "invalid measurement: an ok row without a latency, time or throughput metric"
	case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
		return fmt.Sprintf("invalid measurement: %s is %s (a measured value must be finite and positive)", name, shown())
	}
	return ""
}

// Tally counts cases by outcome.
type Tally struct {
	Measured    int `json:"measured"`
	Unsupported int `json:"unsupported"`
	Error       int `json:"error"`
	Missing     int `json:"missing"`
}

// Add counts n cases of outcome o.
func (t *Tally) Add(o Outcome, n int) {
	switch o {
	case Measured:
		t.Measured += n
	case Unsupported:
		t.Unsupported += n
	case Error:
		t.Error += n
	default:
		t.Missing += n
	}
}

// Plus is the two tallies summed.
func (t Tally) Plus(u Tally) Tally {
	return Tally{t.Measured + u.Measured, t.Unsupported + u.Unsupported, t.Error + u.Error, t.Missing + u.Missing}
}

// Cases is how many cases were counted.
func (t Tally) Cases() int { return t.Measured + t.Unsupported + t.Error + t.Missing }

// Settled is whether no case is error or missing.
func (t Tally) Settled() bool { return t.Error == 0 && t.Missing == 0 }

// String is the tally in the words every command uses: "4 of 6 cases measured, 2
// unsupported, 0 error, 0 missing". Unsupported cases are never counted as measured.
func (t Tally) String() string {
	return fmt.Sprintf("%d of %d cases measured, %d unsupported, %d error, %d missing", t.Measured, t.Cases(), t.Unsupported, t.Error, t.Missing)
}

// Shard statuses: the words of summarize's Status column, the report's shard table and
// the ledger's, and of every attempt's outcome.
const (
	Success    = "success"     // exited cleanly, no case error or missing, at least one measured
	Declined   = "unsupported" // exited cleanly, every case answered, none measured
	Failed     = "failed"      // did not exit cleanly, or a case is error or missing
	NotRun     = "missing"     // no execution of it was found
	Unfinished = "unfinished"  // an attempt with no status.json: killed, or still running
)

// Shard is a shard's status: found is whether an execution of it was found, exited0
// whether its newest execution's status.json says exit 0 (false when it has none), and t
// its cases, each its best row over all attempts. A shard whose every case is unsupported
// is answered, not failed (its run fails only when its backend measured nothing anywhere).
func Shard(found, exited0 bool, t Tally) string {
	switch {
	case !found:
		return NotRun
	case !exited0 || !t.Settled() || t.Cases() == 0:
		return Failed
	case t.Measured == 0:
		return Declined
	}
	return Success
}

// Attempt is one execution's outcome: unfinished when it has no status.json (killed, or
// still running), else Shard's rule over the cases it was asked to run.
func Attempt(ended, exited0 bool, t Tally) string {
	if !ended {
		return Unfinished
	}
	return Shard(true, exited0, t)
}

// Good is whether a shard status lets its run succeed.
func Good(status string) bool { return status == Success || status == Declined }

// Run is what a run's verdict is judged from: its cases by backend and its shards'
// statuses.
type Run struct {
	backends []string
	by       map[string]*Tally
	shards   map[string]int
	failed   []string // the first shards that did not succeed, for the reasons
	// unkeyed are the shards whose cases could not be keyed (ci.py's minimal manifests),
	// judged by ci.py's rule; unkeyedWhy says why, of the first
	unkeyed    []string
	unkeyedWhy string
}

// Unkeyed counts a shard whose cases could not be keyed, and why: it is judged by
// ci.py's rule (its status, given to Shard), and the verdict says so instead of claiming
// that no case was requested.
func (r *Run) Unkeyed(id, why string) {
	if len(r.unkeyed) == 0 {
		r.unkeyedWhy = why
	}
	r.unkeyed = append(r.unkeyed, id)
}

// Case counts one case of backend.
func (r *Run) Case(backend string, o Outcome) { r.Cases(backend, o, 1) }

// Cases counts n cases of backend, each of outcome o.
func (r *Run) Cases(backend string, o Outcome, n int) {
	if r.by == nil {
		r.by = map[string]*Tally{}
	}
	t := r.by[backend]
	if t == nil {
		t = &Tally{}
		r.by[backend] = t
		r.backends = append(r.backends, backend)
	}
	t.Add(o, n)
}

// Shard counts one shard of the given status.
func (r *Run) Shard(id, status string) {
	if r.shards == nil {
		r.shards = map[string]int{}
	}
	r.shards[status]++
	if !Good(status) && len(r.failed) < 3 {
		r.failed = append(r.failed, id)
	}
}

// Tally is the run's cases over every backend.
func (r *Run) Tally() Tally {
	var t Tally
	for _, b := range r.backends {
		t = t.Plus(*r.by[b])
	}
	return t
}

// Verdict is a run judged.
type Verdict struct {
	OK    bool
	Tally Tally
	// Rule is, when some shards' cases could not be keyed, the rule they were judged by
	// and why ("" otherwise): Line says it.
	Rule    string
	Reasons []string // why it failed, worst first (none when OK)
	counted int      // the reason that is the tally's error and missing cases (-1: none)
}

// Verdict judges the run: success only when it has cases, none is error or missing, no
// shard failed, and every backend measured at least one.
func (r *Run) Verdict() Verdict {
	v := Verdict{Tally: r.Tally(), counted: -1}
	if len(r.unkeyed) > 0 {
		v.Rule = fmt.Sprintf("judged by ci.py's rule (each shard exited 0 with an ok row and no error row, rows counted by status): the cases of %d shard(s) could not be keyed (shard %s: %s)",
			len(r.unkeyed), r.unkeyed[0], r.unkeyedWhy)
	} else if v.Tally.Cases() == 0 {
		v.Reasons = append(v.Reasons, "no case was requested")
	}
	for _, b := range r.backends {
		if t := r.by[b]; t.Measured == 0 && t.Cases() > 0 {
			v.Reasons = append(v.Reasons, fmt.Sprintf("backend %s measured nothing (%s)", b, t.none()))
		}
	}
	if t := v.Tally; t.Error > 0 || t.Missing > 0 {
		v.counted = len(v.Reasons)
		v.Reasons = append(v.Reasons, fmt.Sprintf("%d of %d cases error or missing (%d error, %d missing)", t.Error+t.Missing, t.Cases(), t.Error, t.Missing))
	}
	total, bad := 0, 0
	for st, n := range r.shards {
		total += n
		if !Good(st) {
			bad += n
		}
	}
	if bad > 0 {
		s := fmt.Sprintf("%d of %d shards did not succeed (%s", bad, total, strings.Join(r.failed, ", "))
		if bad > len(r.failed) {
			s += ", ..."
		}
		v.Reasons = append(v.Reasons, s+")")
	}
	v.OK = len(v.Reasons) == 0
	return v
}

// none says what a backend that measured nothing answered instead: "7212 unsupported",
// "3 error, 1 missing".
func (t *Tally) none() string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{t.Unsupported, "unsupported"}, {t.Error, "error"}, {t.Missing, "missing"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Word is the verdict in one word: "success" or "failed".
func (v Verdict) Word() string {
	if v.OK {
		return "success"
	}
	return "failed"
}

// Class is the colour every page and table gives it: "good" or "bad".
func (v Verdict) Class() string {
	if v.OK {
		return "good"
	}
	return "bad"
}

// Line is the verdict with its counts and reasons, one line: "success: 4 of 6 cases
// measured, 2 unsupported, 0 error, 0 missing" or "failed: 0 of 7212 cases measured, 7212
// unsupported, 0 error, 0 missing; backend cpu measured nothing (7212 unsupported)".
func (v Verdict) Line() string {
	if v.OK {
		if v.Rule != "" {
			return "success: " + v.Rule
		}
		return "success: " + v.Tally.String()
	}
	parts := []string{v.Tally.String()}
	if v.Rule != "" {
		parts[0] = v.Rule
	}
	for i, r := range v.Reasons {
		if i != v.counted { // the tally says it
			parts = append(parts, r)
		}
	}
	return "failed: " + strings.Join(parts, "; ")
}
