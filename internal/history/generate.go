// Generated stores for benchmarks and tests (scripts/serve-bench): nightly runs of many
// cases with a known step.

package history

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// Generated describes a store of generated nightly runs, for opx serve's benchmark and
// tests (scripts/bench-serve.sh): Runs nightly runs of the same Cases GEMM cases on each
// of Clusters, 1% lognormal noise around a level of the case's own (its spread ±2%), eight nodes by turns,
// and from run StepAt on every 50th case 1.3x slower (StepAt 0: no step).
type Generated struct {
	Runs, Cases int
	Clusters    []string
	StepAt      int
	Seed        uint64
	// From is the first run's time; a run a day after it.
	From time.Time
}

// Generate writes the generated runs into the store, one add each, as opx history add
// writes a run.
func (s *Store) Generate(ctx context.Context, g Generated) error {
	rng := rand.New(rand.NewPCG(g.Seed, 0x5e7e))
	if g.From.IsZero() {
		g.From = time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	}
	for r := range g.Runs {
		rec := &recorded{runID: fmt.Sprintf("nightly-%d", r+1), attempt: 1, at: g.From.AddDate(0, 0, r), sourceSHA: fmt.Sprintf("%040x", r+1),
			opxVersion: "opx generated", cells: map[string]*pyjson.Object{}}
		rec.origin = rec.at.Format(time.RFC3339Nano)
		for ci, cluster := range g.Clusters {
			cell := fmt.Sprintf("cell-%d", ci)
			rec.cells[cell] = pyjson.Obj("id", cell)
			for c := range g.Cases {
				args := fmt.Sprintf(`{"a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "k": 4096, "m": %d, "n": 4096, "out": "bf16"}`, 16*(c+1))
				level := 20 + float64(c%97) + 5*float64(ci)
				if g.StepAt > 0 && r >= g.StepAt && c%50 == 0 {
					level *= 1.3
				}
				v := level * math.Exp(rng.NormFloat64()*0.01)
				p := point{key: results.CaseKey("gemm_perf", "gemm", args, "vllm", 1, cluster), testlist: "gemm_perf", op: "gemm", args: args,
					backend: "vllm", cluster: cluster, ws: 1, metric: "latency_us", lower: true, outcome: verdict.Measured, value: v,
					lo: v * 0.98, hi: v * 1.02, spread: true, n: 9, gpuSeconds: 0.4, cell: cell,
					ctx: context_{Node: fmt.Sprintf("node-%d", (r+c)%8), GPU: "GPU of " + cluster, Driver: "550.54.15", ImageDigest: "sha256:aaa"}}
				rec.points = append(rec.points, p)
				rec.measured++
			}
		}
		if err := s.write(ctx, "generated", rec); err != nil {
			return err
		}
	}
	return nil
}
