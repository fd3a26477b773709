package results

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/semianalysis/opx/internal/files"
)

// RunRecord is <dir>/run.json: when the sweep (or its latest resume) started and ended,
// the run's provenance, the attempt it ran, the platform config its shards need (a resume
// reuses it), and whether a signal cut it short. It is written when the shards start
// (finished_at null) and again at the end.
type RunRecord struct {
	StartedAt      string  `json:"started_at"`
	FinishedAt     *string `json:"finished_at"`
	RunID          string  `json:"run_id"`
	Attempt        string  `json:"attempt"`
	SourceSHA      string  `json:"source_sha"`
	PlatformConfig string  `json:"platform_config,omitempty"`
	OpxVersion     string  `json:"opx_version"`
	Interrupted    *string `json:"interrupted"`
	// AB is an A/B run's sides (opx run --ab-base/--ab-head): such a run is not resumed.
	AB *ABSides `json:"ab,omitempty"`
}

// ABSides are an A/B run's sides as its report names them.
type ABSides struct {
	Base string `json:"base"`
	Head string `json:"head"`
}

// ReadRunRecord is dir's run.json (os.ErrNotExist when the directory has none: not an opx
// run --out directory).
func ReadRunRecord(ctx context.Context, dir string) (*RunRecord, error) {
	b, err := files.ReadRegular(ctx, filepath.Join(dir, "run.json"), 1<<20) // never a FIFO's endless read
	if err != nil {
		return nil, err
	}
	var rec RunRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "run.json"), err)
	}
	return &rec, nil
}
