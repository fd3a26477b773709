package manifest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
)

// Execution is execution.json (docs/compat-spec.md §12.5): which cell an execution ran, for which
// run, and where its stage was.
type Execution struct {
	Cell                    *Cell
	SourceSHA, RunID, Stage string
	Attempt                 string
	// Token is the tag execute put on its allocation (--comment); "" in an execution.json
	// that has none, whose allocation is then looked for by the run's derived token.
	Token string
	// Peaks is the runner's operator.peaks when its platform entry declares them (beyond
	// the seed): the limits the site's GPUs run at, for judging the rows.
	Peaks *pyjson.Object
}

// ShardID is the cell's id.
func (e *Execution) ShardID() string { return e.Cell.ID }

// ReadExecution reads and checks an execution.json.
func ReadExecution(ctx context.Context, path string) (*Execution, error) {
	return readExecution(ctx, path, math.MaxInt)
}

// ExecutionOwner is the run id, the runner and the stage an execution.json names, read
// leniently: ok is false when the file is not a readable JSON object. recover checks
// them, in the seed's order (run and runner, then the stage's user), before
// ReadExecution checks the layout.
func ExecutionOwner(ctx context.Context, path string) (runID, runner, stage string, ok bool) {
	v, err := files.ReadJSON(ctx, path)
	o, isObj := v.(*pyjson.Object)
	if err != nil || !isObj {
		return "", "", "", false
	}
	runID, _ = o.String("run_id")
	stage, _ = o.String("stage")
	cell, _ := o.Object("cell")
	runner, _ = cell.String("runner")
	return runID, runner, stage, true
}

// ReadExecutionHead is ReadExecution without the cell's cases (only how many it lists,
// Cell.NumCases): for readers that need an execution's provenance, attempt and cell facts
// but not its 500 shapes — summarize's walk over every execution of a run, which holds
// them all from the walk that finds them to each shard's turn. The whole file is still
// checked against the grammar; what is returned holds none of its text, which is read
// into a buffer the next reading reuses.
func ReadExecutionHead(ctx context.Context, path string) (*Execution, error) {
	buf := heads.Get().(*[]byte)
	defer heads.Put(buf)
	b, err := files.ReadRegularInto(ctx, path, files.MaxInput, *buf)
	if err != nil {
		return nil, err
	}
	*buf = b
	v, n, err := decodeHead(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	e, err := decodeExecution(path, v)
	if err != nil {
		return nil, err
	}
	e.Cell.NumCases = n
	return e, nil
}

// decodeHead reads an execution.json in one pass of the decoder, as Parse would read it:
// every member built (each its own copy, none of b's text), but the cases of its cell,
// which are checked and counted (n: how many its last "cases" list holds).
func decodeHead(b []byte) (doc pyjson.Value, n int, err error) {
	d, err := pyjson.NewDecoder(b)
	if err != nil {
		return nil, 0, err
	}
	if d.Kind() != '{' {
		if doc, err = d.Value(); err == nil {
			err = d.End()
		}
		return doc, 0, err
	}
	o := pyjson.NewObject()
	err = d.Object(func(key []byte) error {
		if string(key) != "cell" || d.Kind() != '{' {
			v, err := d.Value()
			o.Set(string(key), v)
			return err
		}
		n = 0 // a repeated "cell": the last is the one
		cell, err := decodeCellBut(d, func() error {
			n = 0
			if d.Kind() != '[' {
				return d.Skip()
			}
			return d.Array(func(int) error { n++; return d.Skip() })
		})
		o.Set("cell", cell)
		return err
	})
	if err == nil {
		err = d.End()
	}
	return o, n, err
}

// decodeCellBut reads a cell's object from d, every member but its cases built; each
// "cases" value is handed to cases, which reads it.
func decodeCellBut(d *pyjson.Decoder, cases func() error) (*pyjson.Object, error) {
	o := pyjson.NewObject()
	err := d.Object(func(key []byte) error {
		if string(key) == "cases" {
			return cases()
		}
		v, err := d.Value()
		o.Set(string(key), v)
		return err
	})
	return o, err
}

// heads are ReadExecutionHead's read buffers.
var heads = sync.Pool{New: func() any { return new([]byte) }}

func readExecution(ctx context.Context, path string, depth int) (*Execution, error) {
	v, err := files.ReadJSONDepth(ctx, path, depth)
	if err != nil {
		return nil, err
	}
	return decodeExecution(path, v)
}

// decodeExecution is the typed execution.json, checked.
func decodeExecution(path string, v pyjson.Value) (*Execution, error) {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	e := &Execution{}
	for _, f := range []struct {
		k string
		p *string
	}{{"source_sha", &e.SourceSHA}, {"run_id", &e.RunID}, {"attempt", &e.Attempt}, {"stage", &e.Stage}} {
		if _, present := o.Get(f.k); !present && f.k == "stage" {
			continue // what summarize reads needs none, as ci.py's does not; finalize refuses an empty stage
		}
		s, ok := o.String(f.k)
		if !ok {
			return nil, fmt.Errorf("%s: %q must be a string", path, f.k)
		}
		*f.p = s
	}
	cell, ok := o.Object("cell")
	if !ok {
		return nil, fmt.Errorf("%s: \"cell\" must be an object", path)
	}
	if v, present := o.Get("token"); present {
		if e.Token, ok = v.(string); !ok || !strings.HasPrefix(e.Token, "opx-") || strings.ContainsAny(e.Token, " \t\n") {
			return nil, fmt.Errorf("%s: \"token\" must be a string starting with opx- and holding no white space", path)
		}
	}
	if v, present := o.Get("peaks"); present {
		if e.Peaks, ok = v.(*pyjson.Object); !ok {
			return nil, fmt.Errorf("%s: \"peaks\" must be an object", path)
		}
	}
	if _, ok = cell.String("id"); !ok {
		return nil, fmt.Errorf("%s: cell.id must be a string", path)
	}
	if v, present := cell.Get("runner"); present { // ci.py's summarize reads none; when there, a string
		if _, ok = v.(string); !ok {
			return nil, fmt.Errorf("%s: cell.runner must be a string", path)
		}
	}
	e.Cell = DecodeCell(cell)
	return e, nil
}

// Write writes the execution.json, atomically, with the cell as the manifest has it.
func (e *Execution) Write(path string) error {
	o := pyjson.Obj("cell", e.Cell.Raw, "source_sha", e.SourceSHA, "run_id", e.RunID,
		"attempt", e.Attempt, "stage", e.Stage)
	if e.Token != "" { // none for an execution that never started (its setup failed)
		o.Set("token", e.Token)
	}
	if e.Peaks != nil {
		o.Set("peaks", e.Peaks)
	}
	return files.WriteJSON(path, o)
}
