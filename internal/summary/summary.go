// Package summary is `opx summarize`'s shard report: each shard's newest attempt found in a run's
// artifacts and its rows counted, as OperatorX CI (ci.py) reports them.
//
// It is `opx summarize`'s shard report (docs/compat-spec.md §10): the newest attempt of
// each shard found in a run's artifacts, its result rows counted by status, and the
// coverage report and markdown table the workflow puts in its step summary. Each shard's
// status and the report's success are the verdict's (internal/verdict), which
// internal/results settles from the shard's cases once it has read them.
//
// Beyond the seed: where it crashes (a results file without "rows", unreadable JSON, an
// attempt that is not an integer) opx stops with one line naming the file; equal attempts
// of one shard are resolved by the first in lexical path order (the seed takes whichever
// the filesystem lists first).
package summary

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/par"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/safe"
)

// Shard is one row of the report.
type Shard struct {
	ID                     string
	RequestedShapes        int
	Status                 string // verdict.Shard's: success | unsupported | failed | unfinished | missing
	OK, Unsupported, Error int
	Attempt                int
	HasAttempt             bool
	// Ended is whether the chosen execution has a status.json, Exited0 whether it says
	// exit 0 (Python's == 0).
	Ended, Exited0 bool
	Dir            string // the chosen execution's directory ("" when missing)
	// Executions is every attempt of the shard found (beyond the seed, for the case
	// ledger), oldest first; the chosen one is among them.
	Executions []Execution
	Cell       *manifest.Cell // the manifest's cell, its cases still in the file (manifest.LoadIndex)
}

// Execution is one attempt of a shard found in the artifacts: its directory, the one
// holding execution.json.
type Execution struct {
	Attempt int
	Dir     string
	Head    *manifest.Execution // its execution.json, the cell's cases left as their text
}

// Report is the coverage report.
type Report struct {
	Shards   []Shard
	Success  bool
	manifest *manifest.Manifest // Find's: its cells' cases are read from its file until Close
}

// Close releases what Find's report holds of the manifest: its cells' cases can no longer
// be read (Cell.ReadCases).
func (r *Report) Close() error {
	if r.manifest == nil {
		return nil
	}
	return r.manifest.Close()
}

// Value is the report as the seed writes it, keys in the seed's order.
func (r *Report) Value() pyjson.Value {
	shards := make([]pyjson.Value, 0, len(r.Shards))
	for _, s := range r.Shards {
		o := pyjson.Obj("shard", s.ID, "requested_shapes", s.RequestedShapes, "status", s.Status,
			"ok", s.OK, "unsupported", s.Unsupported, "error", s.Error)
		if s.HasAttempt {
			o.Set("attempt", pyjson.NewInt(int64(s.Attempt)))
		}
		shards = append(shards, o)
	}
	return pyjson.Obj("shards", shards, "success", r.Success)
}

// Markdown writes the seed's table.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintln(w, "| Shard | Status | Shapes requested | OK rows | Unsupported rows | Error rows |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: |")
	for _, s := range r.Shards {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d |\n", safe.Text(s.ID), s.Status, s.RequestedShapes, s.OK, s.Unsupported, s.Error)
	}
}

// Find indexes the manifest (manifest.LoadIndex: the report holds its file until Close)
// and finds every execution of its shards under artifacts (the seed's walk: every
// execution.json must belong to the manifest's run and source SHA). Each shard of the report gets its executions, oldest first, and the one
// summarize counts (the newest); its rows, how it ended and its status are read and
// settled by the reader of the run (internal/results: Results, Ended, and the verdict).
// Every file is read with files.ReadJSON (regular files only, bounded, Python's JSON
// grammar); the executions' heads are parsed in parallel, and ctx ends the reading.
func Find(ctx context.Context, manifestPath, artifacts string) (*Report, error) {
	// the manifest (one file, read on one core) and the executions (read on every core)
	// are read side by side; the manifest's error comes first, as in a reading in order
	var (
		execs   map[string][]found
		first   *found
		walkErr error
		done    = make(chan struct{})
	)
	walkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(done)
		execs, first, walkErr = walkExecutions(walkCtx, artifacts)
	}()
	m, err := manifest.LoadIndex(ctx, manifestPath)
	if err != nil {
		cancel()
		<-done
		return nil, err
	}
	<-done
	rep := &Report{Shards: make([]Shard, len(m.Cells)), manifest: m}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	// the seed stops at the first execution.json whose provenance differs: when that is
	// the first one, that error comes before any later one
	if first != nil && (first.runID != m.RunID || first.sha != m.SourceSHA) {
		return nil, errors.New("artifact provenance does not match the requested run")
	}
	if walkErr != nil {
		return nil, walkErr
	}
	for i, cell := range m.Cells {
		rep.Shards[i] = Shard{ID: cell.ID, RequestedShapes: cell.NumCases, Status: "missing", Cell: cell}
		if all := execs[cell.ID]; len(all) > 0 {
			f := newest(all)
			rep.Shards[i].Attempt, rep.Shards[i].HasAttempt, rep.Shards[i].Dir = f.attempt, true, f.dir
			for _, e := range all {
				rep.Shards[i].Executions = append(rep.Shards[i].Executions, Execution{Attempt: e.attempt, Dir: e.dir, Head: e.head})
			}
		}
	}
	ok = true
	return rep, nil
}

// Results hands each results file of an execution (every *.json under dir/results, in
// lexical order: the seed's rglob) to each, decoded as far as what says (ReadResults), once it is
// checked as the seed checks it: an object with a "rows" list of objects, each with a
// status of ok, unsupported or error. The file handed to each, and its rows, are another
// file's once each returns: each copies out what it keeps.
func Results(ctx context.Context, dir string, what Decode, each func(path string, f *ResultsFile) error) error {
	root := filepath.Join(dir, "results")
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		f := resultsFiles.Get().(*ResultsFile)
		defer resultsFiles.Put(f)
		if err := readResults(ctx, path, what, f); err != nil {
			return err
		}
		for _, r := range f.Rows {
			if st := r.Status; st != "ok" && st != "unsupported" && st != "error" {
				return fmt.Errorf("invalid result status: %s", st)
			}
		}
		return each(path, f)
	})
}

type found struct {
	attempt    int
	dir        string
	runID, sha string
	head       *manifest.Execution
}

// newest is the execution summarize counts: the highest attempt, the first in lexical path
// order among equal ones.
func newest(all []found) found {
	best := all[0]
	for _, f := range all[1:] {
		if f.attempt > best.attempt {
			best = f
		}
	}
	return best
}

// walkExecutions finds every execution.json under artifacts: each shard's, sorted by
// attempt (ties in lexical path order). Provenance is checked against the manifest
// afterwards; an execution of another run anywhere in the tree fails the walk, as the
// seed's does.
func walkExecutions(ctx context.Context, artifacts string) (map[string][]found, *found, error) {
	latest := map[string][]found{}
	if fi, err := os.Stat(artifacts); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("artifacts directory %s: not found", artifacts)
	}
	var paths []string
	walkErr := filepath.WalkDir(files.RunDir(artifacts), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// a link to a directory (a shard or attempt linked in) would be skipped
			// without a word and its cases read as missing: refused, naming it. A link at
			// a file is refused by its reader (files.OpenRegular), and said.
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				return files.InRunLink(path)
			}
		}
		if !d.IsDir() && d.Name() == "execution.json" {
			paths = append(paths, path)
		}
		return nil
	})
	var first *found // the first execution seen: every other must share its provenance
	mismatch := errors.New("artifact provenance does not match the requested run")
	// parsed on every core, taken in the walk's order: the first problem in that order is
	// the one reported, as the seed's walk would meet it
	err := par.Ordered(ctx, len(paths), 0, func(ctx context.Context, i int) (*manifest.Execution, error) {
		return manifest.ReadExecutionHead(ctx, paths[i]) // held until its shard is read: its facts, not its shapes
	}, func(i int, ex *manifest.Execution) error {
		if first == nil {
			first = &found{runID: ex.RunID, sha: ex.SourceSHA}
		} else if ex.RunID != first.runID || ex.SourceSHA != first.sha {
			return mismatch
		}
		attempt, err := pyjson.ParseInt(ex.Attempt)
		if err != nil {
			return fmt.Errorf("%s: attempt %s is not an integer", paths[i], pytext.Repr(ex.Attempt))
		}
		latest[ex.ShardID()] = append(latest[ex.ShardID()], found{attempt: int(attempt), dir: filepath.Dir(paths[i]), runID: ex.RunID, sha: ex.SourceSHA, head: ex})
		return nil
	})
	if errors.Is(err, mismatch) {
		return nil, first, err
	}
	for _, all := range latest {
		sort.SliceStable(all, func(i, j int) bool { return all[i].attempt < all[j].attempt })
	}
	if err == nil {
		err = walkErr
	}
	return latest, first, err
}

// Statuses reads a results file and returns each row's status as the seed's message shows
// it (str() of the value: a string as is, None, True, 1.5, ...).
// Only the statuses are decoded: each row's op and metrics are checked, not kept.
func Statuses(ctx context.Context, path string) ([]string, error) {
	f, err := ReadResults(ctx, path, OnlyStatuses)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(f.Rows))
	for i, r := range f.Rows {
		out[i] = r.Status
	}
	return out, nil
}

// pyStr is Python's str() of a JSON scalar, as the seed's message shows a status; other
// values are shown as compact JSON.
func pyStr(v pyjson.Value) string {
	if raw, ok := v.(pyjson.Raw); ok { // an object or list as a status: built to be shown
		v, _ = pyjson.Parse(raw)
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return string(pyjson.MustMarshal(v, pyjson.Default))
}

// RowsIn counts the result rows in the *.json files under dir, skipping files that are
// not (yet) results documents: it is the progress count of a running shard, whose rank 0
// rewrites its results file atomically after every op.
func RowsIn(ctx context.Context, dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		if st, err := Statuses(ctx, path); err == nil {
			n += len(st)
		}
		return nil
	})
	return n
}
