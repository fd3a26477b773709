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
	"strconv"
	"strings"

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
	mv, err := catalog.Disk(manifestPath).ReadJSON()
	if err != nil {
		return nil, err
	}
	manifest, ok := mv.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("%s: a manifest is a JSON object", manifestPath)
	}
	runID, ok1 := manifest.String("run_id")
	sha, ok2 := manifest.String("source_sha")
	include, ok3 := manifest.Array("include")
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("%s: a manifest needs string run_id and source_sha and an include list", manifestPath)
	}
	type found struct {
		attempt int
		dir     string
	}
	latest := map[string]found{}
	if fi, err := os.Stat(artifacts); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("artifacts directory %s: not found", artifacts)
	}
	err = filepath.WalkDir(artifacts, func(path string, d fs.DirEntry, err error) error {
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
		if ex.RunID != runID || ex.SourceSHA != sha {
			return errors.New("artifact provenance does not match the requested run")
		}
		attempt, err := pyInt(ex.Attempt)
		if err != nil {
			return fmt.Errorf("%s: attempt %s is not an integer", path, pyjson.Repr(ex.Attempt))
		}
		if f, ok := latest[ex.ShardID]; !ok || attempt > f.attempt {
			latest[ex.ShardID] = found{attempt, filepath.Dir(path)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	for i, cv := range include {
		cell, ok := cv.(*pyjson.Object)
		id, ok2 := cell.String("id")
		cases, ok3 := cell.Array("cases")
		if !ok || !ok2 || !ok3 {
			return nil, fmt.Errorf("%s: include[%d] needs a string id and a cases list", manifestPath, i)
		}
		s := Shard{ID: id, RequestedShapes: len(cases), Status: "missing"}
		if f, ok := latest[id]; ok {
			s.Attempt, s.HasAttempt, s.Dir = f.attempt, true, f.dir
			if err := countRows(&s, filepath.Join(f.dir, "results")); err != nil {
				return nil, err
			}
			exit, err := exitCode(filepath.Join(f.dir, "status.json"))
			if err != nil {
				return nil, err
			}
			s.Status = "failed"
			if exit && s.OK > 0 && s.Error == 0 {
				s.Status = "success"
			}
		}
		rep.Shards = append(rep.Shards, s)
	}
	rep.Success = len(rep.Shards) > 0
	for _, s := range rep.Shards {
		if s.Status != "success" {
			rep.Success = false
		}
	}
	return rep, nil
}

// pyInt is Python's int() of a string: surrounding whitespace, a sign, '_' between digits.
func pyInt(s string) (int, error) {
	t := strings.TrimSpace(s)
	if strings.Contains(t, "__") || strings.HasPrefix(strings.TrimLeft(t, "+-"), "_") || strings.HasSuffix(t, "_") {
		return 0, errors.New("invalid")
	}
	return strconv.Atoi(strings.ReplaceAll(t, "_", ""))
}

type resultsDoc struct {
	Rows *[]struct {
		Status json.RawMessage `json:"status"`
	} `json:"rows"`
}

// countRows counts the rows of every *.json under dir (seed: rglob("*.json")).
func countRows(s *Shard, dir string) error {
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
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var doc resultsDoc
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s: not a results file: %v", path, err)
		}
		if doc.Rows == nil {
			return fmt.Errorf("%s: results file has no \"rows\" list", path)
		}
		for _, r := range *doc.Rows {
			var st string
			if err := json.Unmarshal(r.Status, &st); err != nil {
				st = string(r.Status)
				if st == "" || st == "null" {
					st = "None"
				}
			}
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
		}
		return nil
	})
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
