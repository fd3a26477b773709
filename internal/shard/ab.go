package shard

// A paired A/B execution (opx run --ab, issue 59): both sides of every case measured on
// one node in one allocation, in rounds. A round runs the shard's benchmark once for each
// side, one after the other (ABBA order: the head first in every other round), each side
// with its own harness tree as source/ and its own variables; the harness warms every case
// before it times it, as in any shard. Each side's rows of a round go to
// ab/<side>-<round>/results in the stage (results/ points there while it runs), so a side
// cut short never passes for the shard's rows. After the minimum of rounds, unsure cases
// get more, up to the maximum or the time left. The head's last whole round becomes the
// shard's results: the ledger, summary and report count what the head measured; ab.json
// beside them judges every case from its pairs (internal/ab).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/summary"
)

// AB are a paired execution's two sides and its rules.
type AB struct {
	Base, Head Side
	Rules      ab.Options
}

// Side is one side of an A/B: what it is called, the harness tree staged as its source/
// ("" = the execution's HarnessDir, if any), and the variables its ranks get.
type Side struct {
	Label string      // as the report names it ("tree ../operatorx at 1a2b3c4, VLLM_X=1")
	Tree  string      // a directory
	Env   [][2]string // set for this side's ranks (and kept over the image's ENV)
}

// ABFile is a shard's A/B report, in its output directory.
const ABFile = "ab.json"

// abNames name the sides in the stage and the output, in sides' order.
var abNames = [2]string{"base", "head"}

// sides are the base and the head.
func (a *AB) sides() [2]Side { return [2]Side{a.Base, a.Head} }

// abLayout is the A/B's part of the stage: each side's harness tree as source-<side>.
func (r *execution) abLayout() []layoutOp {
	var ops []layoutOp
	for k, side := range r.o.AB.sides() {
		tree := side.Tree
		if tree == "" {
			tree = r.o.HarnessDir
		}
		if tree != "" {
			ops = append(ops, layoutOp{kind: "copy-harness", src: tree, dst: filepath.Join(r.stage, "source-"+abNames[k])})
		}
	}
	return ops
}

// abRounds measures the rounds — at most MaxPairs, and none begun that the deadline
// (the allocation's grant and the benchmark's limit within it) would not leave room for —
// running one side's benchmark with runSide (its variables given), and writes ab.json; it
// returns the first side's failure (the rounds stop: a side that cannot run will not in
// the next round either) or what ended the context.
func (r *execution) abRounds(ctx context.Context, deadline time.Time, runSide func(ctx context.Context, env [][2]string, limit time.Duration) error) error {
	rules := r.o.AB.Rules
	sides := r.o.AB.sides()
	var rounds []ab.Round
	var took time.Duration // the longest round so far
	for len(rounds) < rules.MaxPairs {
		i := len(rounds) // this round's index
		if i >= rules.MinPairs {
			cases := ab.Judged(rounds, rules)
			if ab.Needs(cases, rules) == 0 {
				break
			}
			if time.Until(deadline) < took+time.Minute/2 {
				fmt.Fprintf(r.o.Stderr, "opx: shard %s: %d case(s) still unsure after %d round(s); no time for another (the shard's limit)\n", r.cell.ID, unsure(cases), len(rounds))
				break
			}
		}
		t0 := time.Now()
		order := []int{0, 1}
		if ab.HeadFirst(i) {
			order = []int{1, 0}
		}
		round := ab.Round{}
		for _, k := range order {
			side, name := sides[k], abNames[k]
			dir := filepath.Join("ab", name+"-"+strconv.Itoa(i+1))
			if err := r.abPoint(name, dir); err != nil {
				return err
			}
			env := append([][2]string{{"OPX_AB_SIDE", name}, {"OPX_AB_ROUND", strconv.Itoa(i + 1)}}, side.Env...)
			limit := time.Until(deadline)
			if limit <= 0 {
				return fmt.Errorf("A/B round %d: no time left in the shard's limit", i+1)
			}
			fmt.Fprintf(r.o.Stderr, "opx: shard %s: A/B round %d, %s (%s)\n", r.cell.ID, i+1, name, side.Label)
			if err := runSide(ctx, env, limit); err != nil {
				return fmt.Errorf("A/B round %d, %s: %w", i+1, name, err)
			}
			rows, err := r.abRows(ctx, filepath.Join(r.stage, dir))
			if err != nil {
				return fmt.Errorf("A/B round %d, %s: %w", i+1, name, err)
			}
			if k == 0 {
				round.Base = rows
			} else {
				round.Head = rows
			}
		}
		rounds = append(rounds, round)
		took = max(took, time.Since(t0))
		if err := r.writeAB(rounds); err != nil { // after every round: what ran is kept if the next is cut short
			return err
		}
	}
	// the head's last round is the shard's rows
	last := filepath.Join(r.stage, "ab", "head-"+strconv.Itoa(len(rounds)), "results")
	res := filepath.Join(r.stage, "results")
	if err := os.Remove(res); err != nil {
		return err
	}
	return copyTree(last, res)
}

// unsure counts the measured cases still unsure.
func unsure(cases []ab.Case) int {
	n := 0
	for _, c := range cases {
		if c.Outcome == "measured" && c.Verdict == ab.Unsure {
			n++
		}
	}
	return n
}

// abPoint points the stage's source/ at the side's tree (none when the side has none: the
// other side's is never left for it) and results/ at the round's own directory (relative
// links: they resolve inside the container's /opx mount too).
func (r *execution) abPoint(side, dir string) error {
	if err := os.MkdirAll(filepath.Join(r.stage, dir, "results"), 0o755); err != nil {
		return err
	}
	if err := relink(filepath.Join(r.stage, "results"), filepath.Join(dir, "results")); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(r.stage, "source-"+side)); err == nil {
		return relink(filepath.Join(r.stage, "source"), "source-"+side)
	}
	if fi, err := os.Lstat(filepath.Join(r.stage, "source")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return os.Remove(filepath.Join(r.stage, "source"))
	}
	return nil
}

// relink makes link a symbolic link to target, replacing what link was (an empty
// directory, or a link): a directory with files in it is never removed.
func relink(link, target string) error {
	if fi, err := os.Lstat(link); err == nil {
		if fi.IsDir() {
			if err := os.Remove(link); err != nil {
				return fmt.Errorf("the stage's %s: %w", filepath.Base(link), err)
			}
		} else if fi.Mode()&os.ModeSymlink == 0 {
			return fmt.Errorf("the stage's %s is not a directory or a link", filepath.Base(link))
		}
	}
	tmp := link + ".opx-link"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// abRows is a side's rows of a round, by case key: each row's status and headline metric
// (the one opx compares: latency_us when it has it, else its first metric with a
// direction).
func (r *execution) abRows(ctx context.Context, dir string) (map[string]ab.Row, error) {
	out := map[string]ab.Row{}
	err := summary.Results(ctx, dir, summary.KeyedRows, func(path string, f *summary.ResultsFile) error {
		for _, row := range f.Rows {
			x := results.Row{Testlist: row.Testlist, OpType: row.OpType, Backend: row.Backend, WorldSize: int(r.ws), Cluster: r.cell.Cluster,
				ArgsKey: row.ArgsKey, Metrics: map[string]float64{}}
			for _, m := range row.Metrics {
				if v, ok := m.Number(); ok {
					x.Metrics[m.Name] = v
					x.MetricOrder = append(x.MetricOrder, m.Name)
				}
			}
			got := ab.Row{Testlist: row.Testlist, Status: row.Status, Message: row.Message}
			if name, ok := x.Primary(); ok {
				got.Metric, got.Lower, got.Value = name, results.DirectionOf(name) == results.Lower, x.Metrics[name]
			}
			out[x.Key()] = got
		}
		return nil
	})
	return out, err
}

// writeAB writes the shard's ab.json: the sides, the rules and every case judged.
func (r *execution) writeAB(rounds []ab.Round) error {
	rep := ab.Report{Base: r.o.AB.Base.Label, Head: r.o.AB.Head.Label, Rules: r.o.AB.Rules, Cases: ab.Judged(rounds, r.o.AB.Rules)}
	return rep.Write(filepath.Join(r.root, ABFile))
}
