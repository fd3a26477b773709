package sweep

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/resume"
	"github.com/semianalysis/opx/internal/shard"
)

// runResume is opx run --resume DIR: finalize the executions an earlier opx run left
// unfinished (a SIGKILL, a lost login session: their allocations cancelled and confirmed
// gone, their checkpointed rows collected), read the case ledger of every attempt, and
// run the next attempt with only the cases that have no ok or unsupported row — then
// summarize and report the whole run again.
func runResume(ctx context.Context, o Options) error {
	dir, err := filepath.Abs(o.Resume)
	if err != nil {
		return err
	}
	dir = files.RunDir(dir) // opx run --resume .opx-run/latest: the run it points to
	s := newSweep(ctx, o, dir)
	defer s.pr.finish()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--resume %s: no such run directory (opx run prints the exact --resume command when a run is missing cases)", o.Resume)
	}
	if _, err := os.Stat(s.mpath); err != nil {
		return fmt.Errorf("--resume %s: no operatorx-manifest.json in it (is it an opx run directory?)", o.Resume)
	}
	if err := checkABRun(ctx, dir); err != nil {
		return err
	}
	release, err := claimForResume(dir)
	if err != nil {
		return err
	}
	defer release()
	m, err := manifest.LoadOutline(ctx, s.mpath)
	if err != nil {
		return err
	}
	if len(m.Cells) == 0 {
		return fmt.Errorf("--resume %s: its manifest has no shards", o.Resume)
	}
	s.p.RunID, s.p.SourceSHA, s.p.Runner = m.RunID, m.SourceSHA, m.Cells[0].Runner
	if s.p.PlatformConfig == "" {
		s.p.PlatformConfig = recordedPlatformConfig(ctx, dir)
	}
	if err := s.finalizeLeftovers(ctx); err != nil {
		return err
	}
	rp, err := resume.Make(ctx, s.mpath, s.shards, 0)
	if err != nil {
		return err
	}
	if len(rp.Reasons) == 0 { // run.json keeps the newest attempt that ran
		s.p.Attempt = strconv.Itoa(rp.Attempt - 1)
		s.pr.logf("resume: nothing to rerun: every case of %s has an ok or unsupported row", s.mpath)
		return s.finish(ctx, nil)
	}
	// a cluster run: this host must be able to ask for an allocation before anything is
	// listed or a new attempt made (a run that could not allocate is most often resumed
	// from the host that could not)
	if s.p.Runner != platform.Local {
		if err := (&shard.Slurm{UID: os.Getuid(), Env: o.Environ}).Reachable(ctx); err != nil {
			return fmt.Errorf("--resume %s: this host cannot ask Slurm for an allocation: %w; check it first: %s (nothing was rerun)", o.Resume, err, s.doctorCommand())
		}
	}
	s.p.Attempt = strconv.Itoa(rp.Attempt)
	s.pr.logf("resume: attempt %d reruns %d case(s) (%d shape(s) in %d shard(s)):", rp.Attempt, len(rp.Reasons), rp.Shapes, rp.Cells)
	for _, r := range rp.Reasons {
		s.pr.logf("  rerun %s: %s", r.Key, r.Why)
	}
	s.exec = filepath.Join(dir, "operatorx-manifest.attempt-"+s.p.Attempt+".json")
	if err := files.WriteJSON(s.exec, rp.Manifest); err != nil {
		return err
	}
	return s.executeAndFinish(ctx)
}

// finalizeLeftovers finalizes every execution under shards/ that has no status.json.
func (s *sweep) finalizeLeftovers(ctx context.Context) error {
	var open []string
	err := filepath.WalkDir(s.shards, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.Name() == "execution.json" && !d.IsDir() {
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), "status.json")); errors.Is(err, fs.ErrNotExist) {
				open = append(open, filepath.Dir(path))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sl := &shard.Slurm{UID: os.Getuid(), Env: s.o.Environ, Warn: s.o.Stderr}
	for _, out := range open {
		s.pr.logf("resume: finalizing %s (left unfinished: its allocation is cancelled, its checkpointed rows collected)", out)
		if err := shard.Finalize(ctx, sl, out, s.o.CleanupSecs); err != nil {
			return fmt.Errorf("finalizing %s: %w", out, err)
		}
	}
	return nil
}

// recordedPlatformConfig is the platform config run.json names ("" when none).
func recordedPlatformConfig(ctx context.Context, dir string) string {
	rec, err := results.ReadRunRecord(ctx, dir)
	if err != nil {
		return ""
	}
	return rec.PlatformConfig
}

// claimForResume takes an existing run directory's lock (lockRun): a lock its opx run
// held when it was killed is free, a live one refuses, naming its process.
func claimForResume(dir string) (release func(), err error) {
	if err := files.CheckOwnDir(dir); err != nil {
		return nil, fmt.Errorf("--resume %w", err)
	}
	return lockRun(dir)
}
