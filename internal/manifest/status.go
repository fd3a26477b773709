package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
)

// StatusFile is the file's name in a shard's output directory.
const StatusFile = "status.json"

// Status is an execution's status.json, how execute ended (docs/compat-spec.md §6, step 12):
// {"exit_code": 0 or 1, "slurm_jobs": [...]}, and beyond the seed the failure, what failed.
type Status struct {
	// HasExitCode is whether the file names an exit_code; ExitCode is it as text (as the
	// report shows it), Exited0 whether it is zero as the seed tests it (Python's == 0:
	// 0, 0.0, -0.0 and false are zero; a string or null is not).
	HasExitCode bool
	ExitCode    string
	Exited0     bool
	// Failure is the phase that failed, its error and its log's name ("" when none of
	// them was written).
	Failure Failure
}

// Failure is status.json's account of a failed execution: the phase, the error, and the
// phase's log when it has one.
type Failure struct{ Phase, Message, Log string }

// WriteStatus writes a status.json as execute ends: the exit code, the Slurm jobs, and
// the failure when there was one (nil: none): the one writer of the format.
func WriteStatus(path string, exitCode int, jobs []string, f *Failure) error {
	o := pyjson.Obj("exit_code", exitCode, "slurm_jobs", jobs)
	if f != nil { // beyond the seed: what failed, for the report
		fo := pyjson.Obj("phase", f.Phase, "message", f.Message)
		if f.Log != "" {
			fo.Set("log", f.Log)
		}
		o.Set("failure", fo)
	}
	return files.WriteJSON(path, o)
}

// ReadStatus reads a status.json: the one reader of the format. A file that is not there
// is (nil, nil): the execution has not ended, or was killed. One that is not JSON or not
// an object is an error naming it ("not a status file"); members of the wrong type are
// read as absent.
func ReadStatus(ctx context.Context, path string) (*Status, error) {
	v, err := files.ReadJSON(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		var syntaxErr *pyjson.SyntaxError
		if errors.As(err, &syntaxErr) {
			return nil, fmt.Errorf("%s: not a status file: %w", path, syntaxErr)
		}
		return nil, err
	}
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("%s: not a status file: a status file is a JSON object", path)
	}
	s := &Status{}
	if x, ok := o.Get("exit_code"); ok {
		s.HasExitCode, s.ExitCode, s.Exited0 = true, pyjson.Scalar(x), exitZero(x)
	}
	if f, ok := o.Object("failure"); ok {
		s.Failure.Phase, _ = f.String("phase")
		s.Failure.Message, _ = f.String("message")
		s.Failure.Log, _ = f.String("log")
	}
	return s, nil
}

// exitZero is Python's x == 0 for a JSON value.
func exitZero(x pyjson.Value) bool {
	switch n := x.(type) {
	case pyjson.Int:
		return n.Big().Sign() == 0
	case float64:
		return n == 0
	case bool:
		return !n
	}
	return false
}
