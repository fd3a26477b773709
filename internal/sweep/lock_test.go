package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The run lock is flock(2): one holder at a time, named to the others; a lock file its
// process left behind when it was killed is free; of many racing for a stale lock exactly
// one gets it (issue 30: remove-then-create let two resumes both take it over).
func TestRunLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, runLock), []byte("pid 999999999\n"), 0o644) // stale: no process holds it
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	got, refused := 0, 0
	unlocks := make(chan func(), n)
	for range n {
		wg.Go(func() {
			unlock, err := lockRun(dir)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				got++
				unlocks <- unlock
				return
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("another opx run (pid %d) is writing to %s", os.Getpid(), dir)) {
				t.Errorf("refused with %v", err)
			}
			refused++
		})
	}
	wg.Wait()
	if got != 1 || refused != n-1 {
		t.Fatalf("%d took the lock, %d were refused; want exactly one", got, refused)
	}
	(<-unlocks)()
	unlock, err := lockRun(dir) // let go: free again
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Lstat(filepath.Join(dir, runLock)); !os.IsNotExist(err) {
		t.Errorf("a run that let its lock go left %s behind: %v", runLock, err)
	}
}

// The lock file is removed as its holder lets go: a taker racing with that removal never
// holds a lock on a file the path no longer names, so two never hold the directory at once.
func TestRunLockRemovedAsItIsLetGo(t *testing.T) {
	dir := t.TempDir()
	var holders, most, taken int32
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 300 {
				unlock, err := lockRun(dir)
				if err != nil {
					continue
				}
				mu.Lock()
				holders++
				taken++
				most = max(most, holders)
				mu.Unlock()
				time.Sleep(10 * time.Microsecond)
				mu.Lock()
				holders--
				mu.Unlock()
				unlock()
			}
		})
	}
	wg.Wait()
	if most != 1 || taken == 0 {
		t.Errorf("at most %d held the lock at once (taken %d times); want 1", most, taken)
	}
	if _, err := os.Lstat(filepath.Join(dir, runLock)); !os.IsNotExist(err) {
		t.Errorf("the lock file is left: %v", err)
	}
}

// A FIFO, a link or a directory where the lock or run.json should be is an error said at
// once (or, for run.json, no platform config), never a read that blocks (issue 30).
func TestRunLockAndRecordAreNeverSpecialFiles(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink", "dir"} {
		dir := t.TempDir()
		for _, name := range []string{runLock, "run.json"} {
			p := filepath.Join(dir, name)
			switch kind {
			case "fifo":
				syscall.Mkfifo(p, 0o644)
			case "symlink":
				os.Symlink("/dev/zero", p)
			case "dir":
				os.Mkdir(p, 0o755)
			}
		}
		done := make(chan error, 1)
		go func() {
			_, err := lockRun(dir)
			if recordedPlatformConfig(t.Context(), dir) != "" {
				err = fmt.Errorf("a platform config from a %s", kind)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "the run lock "+filepath.Join(dir, runLock)) {
				t.Errorf("%s: %v", kind, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the lock or run.json blocks", kind)
		}
	}
}
