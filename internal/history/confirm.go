// Confirmation runs: the manifest of a run's suspects, and the settling of each suspect by
// the run that measured it again elsewhere (confirmed, or cleared as noise or its node's).

package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// Cleared is a suspect a confirmation run did not reproduce.
type Cleared struct {
	Key   string  `json:"key"`
	RunID string  `json:"run_id"` // the suspect's run
	Ratio float64 `json:"ratio"`  // what the suspect's run seemed to show
	// Reason is "noise", or "node" when the node that measured it was the odd one out
	// for several suspects of that run (Node names it).
	Reason string `json:"reason"`
	Node   string `json:"node,omitempty"`
	By     string `json:"by"` // the confirmation run
}

// confirmation is one confirmation run's point of a suspect.
type confirmation struct {
	series, suspect int64
	value           float64
	measured        bool
	node, runID     string
	kind            string // the confirming run's kind of machine
}

// settle sets the confirmation runs against the suspects they re-measured: a suspect
// whose re-measurement (on another node) lies nearer its new level than its old one is
// confirmed; one nearer its old level is cleared — as that node's alone when the node
// that measured it was the odd one out for at least two suspects of that run that were
// cleared, else as noise. Changes no confirmation run re-measured are kept as they are.
func (s *Store) settle(ctx context.Context, f *Found, found []finding, ctxs map[int64]context_, o changes.Options) ([]finding, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT c.series, c.suspect_run, c.outcome, c.value, c.ctx, r.run_id FROM confirmations c JOIN runs r ON r.id = c.run`)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	byCase := map[[2]int64][]confirmation{}
	for rows.Next() {
		var c confirmation
		var outcome int
		var v *float64
		var ctxID int64
		if err := rows.Scan(&c.series, &c.suspect, &outcome, &v, &ctxID, &c.runID); err != nil {
			rows.Close()
			return nil, err
		}
		c.measured = verdict.Outcome(outcome) == verdict.Measured && v != nil && *v > 0
		if c.measured {
			c.value = *v
		}
		c.node, c.kind = ctxs[ctxID].Node, ctxs[ctxID].kind()
		byCase[[2]int64{c.series, c.suspect}] = append(byCase[[2]int64{c.series, c.suspect}], c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(byCase) == 0 {
		return found, nil
	}
	type clearing struct {
		i    int
		node string
		by   string
	}
	var cleared []clearing
	type runNode struct {
		run  int64
		node string
	}
	perNode := map[runNode]int{} // suspects cleared, by suspect run and node
	var kept []finding
	for i, fc := range found {
		ch := &found[i].ch
		cs := byCase[[2]int64{ch.series, ch.run}]
		var vs []float64
		var on, otherKinds []string
		by := ""
		for _, c := range cs {
			if !c.measured {
				continue
			}
			if c.kind != "" && !slices.Contains(ch.kindsOn, c.kind) && !slices.Contains(ch.kindsOn, "") {
				// another kind of machine than measured the new level: its level is its own,
				// and says nothing of this one's (a pool of kinds); neither confirms nor clears
				otherKinds, by = appendNew(otherKinds, c.kind), c.runID
				continue
			}
			// on the level the change is said on (Levelled): its kind's offset taken out
			v := c.value / changes.KindRatio(fc.se.obs, c.kind, o)
			vs, on, by = append(vs, math.Log(v)), appendNew(on, c.node), c.runID
		}
		if len(vs) == 0 && len(otherKinds) > 0 && ch.Status == Suspected {
			ch.Confirmation = fmt.Sprintf("inconclusive: run %s measured it on another kind of machine (%s)", by, strings.Join(otherKinds, ", "))
			kept = append(kept, finding{fc.se, *ch})
			continue
		}
		if len(vs) == 0 || ch.Status != Suspected {
			kept = append(kept, fc)
			continue
		}
		slices.Sort(vs)
		v := vs[len(vs)/2]
		if math.Abs(v-math.Log(ch.After)) < math.Abs(v-math.Log(ch.Before)) {
			ch.Status = Confirmed
			ch.Confirmation = fmt.Sprintf("confirmed by run %s on %s", by, strings.Join(on, ", "))
			kept = append(kept, finding{fc.se, *ch})
			continue
		}
		node := strings.Join(ch.measuredOn, ",")
		if slices.ContainsFunc(on, func(n string) bool { return slices.Contains(ch.measuredOn, n) }) {
			node = "" // re-measured on the same node: it cannot be the node's alone
		}
		perNode[runNode{ch.run, node}]++
		cleared = append(cleared, clearing{i, node, by})
	}
	for _, c := range cleared {
		ch := found[c.i].ch
		x := Cleared{Key: ch.Key, RunID: ch.RunID, Ratio: ch.Ratio, Reason: "noise", By: c.by}
		if perNode[runNode{ch.run, c.node}] >= 2 && c.node != "" {
			x.Reason, x.Node = "node", c.node
			f.OddNodes[c.node]++
		}
		f.Cleared = append(f.Cleared, x)
	}
	sort.SliceStable(f.Cleared, func(i, j int) bool { return f.Cleared[i].Key < f.Cleared[j].Key })
	return kept, nil
}

// confirmRunID is the run id of a confirmation of run id: "confirm-" and the id, made a
// run id opx run accepts whatever the id was (its characters outside the alphabet as '-',
// and one too long cut and given a digest of the whole, so two long ids stay two).
func confirmRunID(id string) string {
	b := []byte("confirm-" + id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.ReplaceAll(string(b), "..", "-.")
	if len(out) > 128 {
		h := sha256.Sum256([]byte(id))
		out = out[:128-13] + "-" + hex.EncodeToString(h[:6])
	}
	return out
}

func appendNew(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// ConfirmManifest writes a manifest of just the suspected changes, ready for
// `opx run --manifest` or the workflow's shards: for each suspect run, the cells that
// measured its suspects (as the store kept them), each holding only those cases, on only
// their backends, excluding the nodes that measured them (exclude_nodes: salloc --exclude),
// with a "confirms" member naming the run and cases it re-measures, which
// `opx history add` reads to settle them. It returns how many cases it holds (0: no
// suspect, and no file written).
func (s *Store) ConfirmManifest(ctx context.Context, f *Found, path string) (int, error) {
	run, sus := newestSuspects(f)
	if len(sus) == 0 {
		return 0, nil
	}
	ref := f.byID[run]
	cellKeys := map[int64][]*Change{}
	var cellOrder []int64
	for _, ch := range sus {
		if _, ok := cellKeys[ch.cell]; !ok {
			cellOrder = append(cellOrder, ch.cell)
		}
		cellKeys[ch.cell] = append(cellKeys[ch.cell], ch)
	}
	runID := confirmRunID(ref.RunID)
	var include, cases []pyjson.Value
	for _, id := range cellOrder {
		o, cell, err := s.storedCell(ctx, id)
		if err != nil {
			return 0, err
		}
		out, theirs, err := confirmCell(o, cell, cellKeys[id], runID)
		if err != nil {
			return 0, err
		}
		if out != nil {
			include, cases = append(include, out), append(cases, theirs...)
		}
	}
	meta, err := s.runMeta(ctx)
	if err != nil {
		return 0, err
	}
	m := pyjson.Obj("version", 1, "excluded_shapes", 0, "source_sha", meta[run].sourceSHA, "run_id", runID, "attempt", "1",
		"confirms", pyjson.Obj("run_id", ref.RunID, "at", ref.At.UTC().Format("2006-01-02T15:04:05Z"), "origin", ref.origin, "cases", cases), "include", include)
	if err := files.WriteJSON(path, m); err != nil {
		return 0, err
	}
	return len(cases), nil
}

// newestSuspects is the newest run with suspected changes, and its suspects: one manifest
// per confirmation (a confirmation run settles one run's).
func newestSuspects(f *Found) (int64, []*Change) {
	byRun := map[int64][]*Change{}
	var runsOrder []int64
	for i := range f.Changes {
		ch := &f.Changes[i]
		if ch.Status != Suspected {
			continue
		}
		if _, ok := byRun[ch.run]; !ok {
			runsOrder = append(runsOrder, ch.run)
		}
		byRun[ch.run] = append(byRun[ch.run], ch)
	}
	if len(runsOrder) == 0 {
		return 0, nil
	}
	sort.Slice(runsOrder, func(i, j int) bool { return f.byID[runsOrder[i]].At.After(f.byID[runsOrder[j]].At) })
	return runsOrder[0], byRun[runsOrder[0]]
}

// storedCell is a cell the store keeps (gzip-compressed JSON), parsed.
func (s *Store) storedCell(ctx context.Context, id int64) (*pyjson.Object, *manifest.Cell, error) {
	var body []byte
	if err := s.db.QueryRowContext(ctx, s.q("SELECT body FROM cells WHERE id = ?"), id).Scan(&body); err != nil {
		return nil, nil, fmt.Errorf("%s: the cell of a suspect: %w", s.Where, err)
	}
	raw, err := gunzip(body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the cell of a suspect: %w", s.Where, err)
	}
	v, err := pyjson.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the cell of a suspect: %w", s.Where, err)
	}
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, nil, fmt.Errorf("%s: the cell of a suspect is not an object", s.Where)
	}
	return o, manifest.DecodeCell(o), nil
}

// confirmCell is the confirmation manifest's cell for a stored cell's suspects: the cell
// holding only their shapes and backends, excluding the nodes that measured them, with
// the manifest's "confirms" entry of each (nil when the cell no longer holds them).
func confirmCell(o *pyjson.Object, cell *manifest.Cell, sus []*Change, runID string) (*pyjson.Object, []pyjson.Value, error) {
	want := map[string]bool{}
	var backends, exclude []string
	for _, ch := range sus {
		want[ch.caseKey] = true
	}
	var keep []int
	for i := range cell.Cases {
		cs, err := results.ShapeCases(cell, i)
		if err != nil {
			return nil, nil, err
		}
		hit := false
		for _, c := range cs {
			if want[c.Key] {
				hit, backends = true, appendNew(backends, c.Backend)
			}
		}
		if hit {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		return nil, nil, nil // the cell no longer holds the case (cannot happen for a cell stored with it)
	}
	var cases []pyjson.Value
	for _, ch := range sus {
		for _, node := range ch.measuredOn {
			exclude = appendNew(exclude, node)
		}
		nodes := make([]pyjson.Value, 0, len(ch.measuredOn))
		for _, node := range ch.measuredOn {
			nodes = append(nodes, node)
		}
		cases = append(cases, pyjson.Obj("key", ch.Key, "nodes", nodes))
	}
	out := manifest.Narrow(o, keep)
	bs := make([]pyjson.Value, 0, len(backends))
	for _, b := range backends {
		bs = append(bs, b)
	}
	ex := make([]pyjson.Value, 0, len(exclude))
	for _, e := range exclude {
		ex = append(ex, e)
	}
	out.Set("backends", bs)
	out.Set("exclude_nodes", ex)
	out.Set("queue-token", manifest.QueueToken(runID, "1", cell.ID))
	return out, cases, nil
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
