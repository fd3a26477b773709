// Package summary is `opx summarize` (seed-spec §10): the newest attempt of each shard
// found in a run's artifacts, its result rows counted by status, and the coverage report
// and markdown table the workflow puts in its step summary.
//
// Beyond the seed: where it crashes (a results file without "rows", unreadable JSON, an
// attempt that is not an integer) opx stops with one line naming the file; equal attempts
// of one shard are resolved by the first in lexical path order (the seed takes whichever
// the filesystem lists first).
package summary

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/shard"
)

// Shard is one row of the report.
type Shard struct {
	ID                     string
	RequestedShapes        int
	Status                 string // success | failed | missing
	OK, Unsupported, Error int
	Attempt                int
	HasAttempt             bool
	Dir                    string // the chosen execution's directory ("" when missing)
}

// Report is the coverage report.
type Report struct {
	Shards  []Shard
	Success bool
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
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d |\n", s.ID, s.Status, s.RequestedShapes, s.OK, s.Unsupported, s.Error)
	}
}

// Summarize reads the manifest and the artifacts tree.
func Summarize(manifestPath, artifacts string) (*Report, error) {
	mb, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", manifestPath, errors.Unwrap(err))
	}
	// the manifest is skimmed while the artifacts are walked: both are large
	type skimmed struct {
		m   manifestInfo
		err error
	}
	mc := make(chan skimmed, 1)
	go func() {
		m, err := skimManifest(mb)
		mc <- skimmed{m, err}
	}()
	latest, first, walkErr := walkExecutions(artifacts)
	sk := <-mc
	m, err := sk.m, sk.err
	if err != nil {
		// the full parser names line and column
		if _, perr := catalog.Disk(manifestPath).ReadJSON(); perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("%s: %v", manifestPath, err)
	}
	if !m.hasRun || !m.hasSHA || !m.list {
		return nil, fmt.Errorf("%s: a manifest needs string run_id and source_sha and an include list", manifestPath)
	}
	// the seed stops at the first execution.json whose provenance differs: when that is
	// the first one, that error comes before any later one
	if first != nil && (first.runID != m.runID || first.sha != m.sha) {
		return nil, errors.New("artifact provenance does not match the requested run")
	}
	if walkErr != nil {
		return nil, walkErr
	}
	rep := &Report{Shards: make([]Shard, len(m.cells))}
	for i, cell := range m.cells {
		if !cell.hasID || !cell.hasCase {
			return nil, fmt.Errorf("%s: include[%d] needs a string id and a cases list", manifestPath, i)
		}
		rep.Shards[i] = Shard{ID: cell.id, RequestedShapes: cell.cases, Status: "missing"}
		if f, ok := latest[cell.id]; ok {
			rep.Shards[i].Attempt, rep.Shards[i].HasAttempt, rep.Shards[i].Dir = f.attempt, true, f.dir
		}
	}
	// count the shards' rows in parallel; the first error in manifest order is reported
	errs := make([]error, len(rep.Shards))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte // one read buffer per worker
			for i := range next {
				errs[i] = settle(&rep.Shards[i], &buf)
			}
		}()
	}
	for i := range rep.Shards {
		if rep.Shards[i].HasAttempt {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	rep.Success = len(rep.Shards) > 0
	for _, s := range rep.Shards {
		if s.Status != "success" {
			rep.Success = false
		}
	}
	return rep, nil
}

type found struct {
	attempt    int
	dir        string
	runID, sha string
}

// walkExecutions finds every execution.json under artifacts and keeps the newest attempt
// of each shard. Provenance is checked against the manifest afterwards; an execution of
// another run anywhere in the tree fails the walk, as the seed's does.
func walkExecutions(artifacts string) (map[string]found, *found, error) {
	latest := map[string]found{}
	if fi, err := os.Stat(artifacts); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("artifacts directory %s: not found", artifacts)
	}
	var first *found // the first execution seen: every other must share its provenance
	mismatch := false
	err := filepath.WalkDir(artifacts, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "execution.json" {
			return nil
		}
		ex, err := shard.ReadExecution(path)
		if err != nil {
			return err
		}
		if first == nil {
			first = &found{runID: ex.RunID, sha: ex.SourceSHA}
		} else if ex.RunID != first.runID || ex.SourceSHA != first.sha {
			mismatch = true
			return fs.SkipAll
		}
		attempt, err := pyInt(ex.Attempt)
		if err != nil {
			return fmt.Errorf("%s: attempt %s is not an integer", path, pyjson.Repr(ex.Attempt))
		}
		if f, ok := latest[ex.ShardID]; !ok || attempt > f.attempt {
			latest[ex.ShardID] = found{attempt: attempt, dir: filepath.Dir(path), runID: ex.RunID, sha: ex.SourceSHA}
		}
		return nil
	})
	if mismatch {
		return nil, first, errors.New("artifact provenance does not match the requested run")
	}
	return latest, first, err
}

// settle counts a found shard's rows and decides success or failure.
func settle(s *Shard, buf *[]byte) error {
	if err := countRows(s, filepath.Join(s.Dir, "results"), buf); err != nil {
		return err
	}
	exit, err := exitCode(filepath.Join(s.Dir, "status.json"))
	if err != nil {
		return err
	}
	s.Status = "failed"
	if exit && s.OK > 0 && s.Error == 0 {
		s.Status = "success"
	}
	return nil
}

// pyInt is Python's int() of a string: surrounding whitespace, a sign, '_' between digits.
func pyInt(s string) (int, error) {
	t := strings.TrimSpace(s)
	if strings.Contains(t, "__") || strings.HasPrefix(strings.TrimLeft(t, "+-"), "_") || strings.HasSuffix(t, "_") {
		return 0, errors.New("invalid")
	}
	return strconv.Atoi(strings.ReplaceAll(t, "_", ""))
}

// countRows counts the rows of every *.json under dir (seed: rglob("*.json")).
func countRows(s *Shard, dir string, buf *[]byte) error {
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		b, err := readInto(path, buf)
		if err != nil {
			return err
		}
		hasRows, err := skimStatuses(b, func(st string) error {
			switch st {
			case "ok":
				s.OK++
			case "unsupported":
				s.Unsupported++
			case "error":
				s.Error++
			default:
				return fmt.Errorf("invalid result status: %s", st)
			}
			return nil
		})
		if err != nil {
			if strings.HasPrefix(err.Error(), "invalid result status") {
				return err
			}
			return fmt.Errorf("%s: not a results file: %v", path, err)
		}
		if !hasRows {
			return fmt.Errorf("%s: results file has no \"rows\" list", path)
		}
		return nil
	})
}

// readInto reads a whole file into *buf, growing it as needed: summarize reads hundreds
// of results files and one buffer per worker spares the allocator and the GC.
func readInto(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if need := int(fi.Size()) + 1; cap(*buf) < need {
		*buf = make([]byte, 0, need+need/4)
	}
	b := (*buf)[:0]
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) { // the file grew since Stat
			b = append(b, 0)[:len(b)]
		}
	}
}

// exitCode reports whether status.json exists and says exit_code 0.
func exitCode(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var st struct {
		ExitCode *json.RawMessage `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return false, fmt.Errorf("%s: not a status file: %v", path, err)
	}
	if st.ExitCode == nil {
		return false, fmt.Errorf("%s: status file has no exit_code", path)
	}
	switch strings.TrimSpace(string(*st.ExitCode)) {
	case "0", "0.0", "false", "-0", "-0.0":
		return true, nil
	}
	return false, nil
}

// RowsIn counts the result rows in the *.json files under dir, skipping files that are
// not (yet) results documents: it is the progress count of a running shard, whose rank 0
// rewrites its results file atomically after every op.
func RowsIn(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		k := 0
		if _, err := skimStatuses(b, func(string) error { k++; return nil }); err == nil {
			n += k
		}
		return nil
	})
	return n
}
