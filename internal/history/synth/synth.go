// Package synth makes labelled series of the kind a nightly history holds (steps, noise,
// outliers, A/A) and scores a detector against them.
//
// It makes labelled series of the kind a nightly benchmark history holds —
// known steps of several sizes, lognormal noise of 1–3%, isolated outliers, slow drifts,
// and A/A series that never change — and scores a detector's
// findings against the labels. scripts/history-bench prints the figures
// docs/history.md publishes; the history tests hold the detector to them.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/semianalysis/opx/internal/history/changes"
)

// Kind is what a series holds.
type Kind string

const (
	AA       Kind = "a/a"          // noise only
	Step     Kind = "step"         // one step
	Outliers Kind = "outliers"     // noise and isolated outliers, no step
	StepOut  Kind = "step+outlier" // one step, and outliers
	Drift    Kind = "drift"        // a slow drift over the newest runs
)

// Series is one labelled series.
type Series struct {
	Kind  Kind
	Noise float64 // lognormal sigma: 0.01 is about 1%
	Step  float64 // the step's size as a ratio - 1 (0.05: 5% slower); 0 when none
	At    int     // the step's first index (-1 when none)
	Obs   []changes.Obs
}

// Spec is a corpus to make: for each kind, each noise and each step size, Count series of
// length N (steps and outliers are placed at random; a step leaves at least AfterMin
// points of its new level).
type Spec struct {
	N, Count, AfterMin int
	Noises, Steps      []float64
	Seed               uint64
	// AA makes only A/A series (Count per noise): a history where nothing changed.
	AA bool
}

// Default is the corpus docs/history.md's figures are measured on.
var Default = Spec{N: 60, Count: 100, AfterMin: 5, Noises: []float64{0.01, 0.02, 0.03}, Steps: []float64{0.02, 0.05, 0.10, 0.20}, Seed: 1}

// Make makes the corpus.
func Make(s Spec) []Series {
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	var out []Series
	for _, noise := range s.Noises {
		if s.AA {
			for range s.Count {
				out = append(out, one(rng, s, AA, noise, 0))
			}
			continue
		}
		for range s.Count {
			out = append(out, one(rng, s, AA, noise, 0))
			out = append(out, one(rng, s, Outliers, noise, 0))
			out = append(out, one(rng, s, Drift, noise, 0.08))
		}
		for _, step := range s.Steps {
			for range s.Count {
				sign := 1.0
				if rng.IntN(2) == 0 {
					sign = -1
				}
				out = append(out, one(rng, s, Step, noise, sign*step))
				out = append(out, one(rng, s, StepOut, noise, sign*step))
			}
		}
	}
	return out
}

var nodes = []string{"node-a", "node-b", "node-c", "node-d"}

func one(rng *rand.Rand, s Spec, k Kind, noise, step float64) Series {
	base := math.Exp(rng.Float64()*8 - 2) // levels from 0.1 to 400 (microseconds, say)
	se := Series{Kind: k, Noise: noise, Step: step, At: -1}
	if k == Step || k == StepOut {
		se.At = 8 + rng.IntN(s.N-8-s.AfterMin+1)
	}
	driftFrom := s.N - 15
	for i := range s.N {
		v := base * math.Exp(rng.NormFloat64()*noise)
		node := nodes[rng.IntN(len(nodes))]
		switch {
		case (k == Step || k == StepOut) && i >= se.At:
			v *= 1 + step
		case k == Drift && i >= driftFrom:
			v *= 1 + step*float64(i-driftFrom+1)/15
		}
		se.Obs = append(se.Obs, changes.Obs{V: v, Node: node})
	}
	if k == Outliers || k == StepOut {
		for range 1 + rng.IntN(2) {
			i := rng.IntN(s.N - 1) // never the newest run: there an outlier is a suspect by design
			se.Obs[i].V *= 1 + 0.15 + rng.Float64()*0.35
		}
	}
	return se
}

// Score is a detector's findings against the labels, for one group of series.
type Score struct {
	Series        int
	Steps, Found  int // true steps, and those found (a change within 2 runs of it, same direction)
	Calls, Wrong  int // changes called, and those that match no step
	SeriesFlagged int // series with at least one wrong call
}

// Precision is the share of calls that match a step (1 when nothing was called).
func (s Score) Precision() float64 {
	if s.Calls == 0 {
		return 1
	}
	return float64(s.Calls-s.Wrong) / float64(s.Calls)
}

// Recall is the share of steps found (1 when there were none).
func (s Score) Recall() float64 {
	if s.Steps == 0 {
		return 1
	}
	return float64(s.Found) / float64(s.Steps)
}

// FlaggedRate is the share of series with a wrong call.
func (s Score) FlaggedRate() float64 {
	if s.Series == 0 {
		return 0
	}
	return float64(s.SeriesFlagged) / float64(s.Series)
}

func (s Score) String() string {
	return fmt.Sprintf("series %d, steps %d, recall %.3f, precision %.3f (%d calls, %d wrong), series with a wrong call %.2f%%",
		s.Series, s.Steps, s.Recall(), s.Precision(), s.Calls, s.Wrong, 100*s.FlaggedRate())
}

// Judge scores one series' findings. A drift's calls are not wrong when they fall within
// its drifting runs (it did change), nor a node step's when they name its node.
func Judge(se Series, found []changes.Change) Score {
	sc := Score{Series: 1}
	if se.At >= 0 {
		sc.Steps = 1
	}
	hit := false
	for _, c := range found {
		sc.Calls++
		match := false
		switch se.Kind {
		case Step, StepOut:
			match = abs(c.At-se.At) <= 2 && (c.Ratio > 1) == (se.Step > 0)
		case Drift:
			match = c.At >= len(se.Obs)-16 && c.Ratio > 1
		}
		if match && !hit {
			hit = true
			sc.Found = 1
			continue
		}
		if !match || hit && se.Kind != Drift {
			sc.Wrong++
		}
	}
	if sc.Wrong > 0 {
		sc.SeriesFlagged = 1
	}
	return sc
}

// Add is two scores together.
func (s Score) Add(o Score) Score {
	return Score{Series: s.Series + o.Series, Steps: s.Steps + o.Steps, Found: s.Found + o.Found, Calls: s.Calls + o.Calls,
		Wrong: s.Wrong + o.Wrong, SeriesFlagged: s.SeriesFlagged + o.SeriesFlagged}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
