package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 30: every command that reads a run, against each kind of special file where each
// file of a run should be. None hangs or panics; a FIFO, a link to /dev/zero or a link to
// nothing where a file of the run should be is one line naming it, exit 1, and no output
// written; a directory there is the same error for a file opened by name, and for one
// found by walking the tree no file (the shard's cases are missing, and the run fails;
// history records them as missing);
// a node fingerprint or a counters file (ncu's CSV, a rocprofv3 trace) is evidence,
// never a reason to refuse a run.
func TestEveryReaderAgainstEverySpecialFile(t *testing.T) {
	kinds := []struct {
		name, want string
		plant      func(p string) error
	}{
		{"fifo", "not a regular file", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"link to /dev/zero", "not a regular file", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"link to nothing", "a symbolic link to nothing", func(p string) error { return os.Symlink("/nonexistent/opx", p) }},
		{"directory", "", func(p string) error { return os.Mkdir(p, 0o755) }},
	}
	files := []struct {
		name     string
		path     func(run string) string
		evidence bool // a fingerprint or a counters file: set aside when it cannot be read
		counters bool // the cell is in counters mode (its results/counters are read)
	}{
		{"manifest", func(run string) string { return filepath.Join(run, "operatorx-manifest.json") }, false, false},
		{"results", resultsFile, false, false},
		{"execution.json", func(run string) string { return filepath.Join(run, "shards", "s1", "execution.json") }, false, false},
		{"status.json", func(run string) string { return filepath.Join(run, "shards", "s1", "status.json") }, false, false},
		{"accounting.json", func(run string) string { return filepath.Join(run, "shards", "s1", "accounting.json") }, false, false},
		{"fingerprint", func(run string) string { return filepath.Join(run, "shards", "s1", "fingerprint-before.json") }, true, false},
		{"ncu counters", func(run string) string {
			return filepath.Join(run, "shards", "s1", "results", "counters", "ncu-rank0.csv")
		}, true, true},
		{"rocprofv3 trace", func(run string) string {
			return filepath.Join(run, "shards", "s1", "results", "counters", "fetch", "mi300x-node-01", "7777", "rank0_kernel_trace.csv")
		}, true, true},
	}
	for _, f := range files {
		for _, k := range kinds {
			t.Run(f.name+"/"+k.name, func(t *testing.T) {
				_, run := shardTree(t, t.TempDir())
				if f.counters {
					for _, name := range []string{filepath.Join(run, "operatorx-manifest.json"), filepath.Join(run, "shards", "s1", "execution.json")} {
						b, err := os.ReadFile(name)
						if err != nil || !bytes.Contains(b, []byte(`"world_size": 1,`)) {
							t.Fatalf("%s: %v %s", name, err, b)
						}
						os.WriteFile(name, bytes.ReplaceAll(b, []byte(`"world_size": 1,`), []byte(`"world_size": 1, "mode": "counters",`)), 0o644)
					}
					// a rocprofv3 pass whose marker and counter files are there (the
					// counters package's test data): its kernel trace is the one planted
					pass := filepath.Join("fetch", "mi300x-node-01", "7777")
					for _, name := range []string{"rank0_marker_api_trace.csv", "rank0_counter_collection.csv"} {
						b, err := os.ReadFile(filepath.Join("..", "counters", "testdata", "rocprofv3", pass, name))
						if err != nil {
							t.Fatal(err)
						}
						writeFile(t, filepath.Join(run, "shards", "s1", "results", "counters", pass, name), string(b))
					}
				}
				out := t.TempDir()
				commands := []struct {
					args []string
					out  string // the file it writes, if any
				}{
					{[]string{"summarize", "--manifest", filepath.Join(run, "operatorx-manifest.json"), "--artifacts", run, "--out", filepath.Join(out, "s.json")}, filepath.Join(out, "s.json")},
					{[]string{"report", run, "--out", filepath.Join(out, "r.html")}, filepath.Join(out, "r.html")},
					{[]string{"export", run, "--out", filepath.Join(out, "e.csv")}, filepath.Join(out, "e.csv")},
					{[]string{"compare", run, run, "--allow-same"}, ""},
					{[]string{"history", "add", "--db", filepath.Join(out, "h.db"), "--at", "2026-12-01T00:00:00Z", run}, ""},
				}
				// evidence set aside leaves each command's answer as it is without the file
				baseline := map[string]int{}
				if f.evidence {
					p := f.path(run)
					os.RemoveAll(p)
					for _, c := range commands {
						os.Remove(c.out)
						baseline[c.args[0]] = runWithin(t, 20*time.Second, c.args...).code
					}
					os.Remove(filepath.Join(out, "h.db"))
				}
				p := f.path(run)
				os.RemoveAll(p)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := k.plant(p); err != nil {
					t.Fatal(err)
				}
				for _, c := range commands {
					os.Remove(c.out)
					r := runWithin(t, 20*time.Second, c.args...)
					name := strings.Join(c.args[:1], " ")
					if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") {
						t.Fatalf("%s panicked: %s", name, r.stderr)
					}
					switch {
					case f.evidence:
						if r.code != baseline[c.args[0]] {
							t.Errorf("%s: an unreadable %s changed the answer: exit %d (%d without it) %q", name, f.name, r.code, baseline[c.args[0]], r.stderr)
						}
						// and it is said: summarize on stderr, the report on its page
						rel, _ := filepath.Rel(filepath.Join(run, "shards", "s1"), p)
						said := rel + ": " + k.want
						switch {
						case k.want == "": // a directory: no file there (a fingerprint's is opened by name)
						case c.args[0] == "summarize" && !strings.Contains(r.stderr, "opx summarize: set aside (the attempt is judged without it): shard s1, attempt 1: "+said) && !strings.Contains(r.stderr, "opx summarize: set aside (the attempt is judged without it): shard s1, attempt 1: read "+said):
							t.Errorf("summarize did not say what it set aside (%s): %q", said, r.stderr)
						case c.args[0] == "report":
							if b, _ := os.ReadFile(c.out); !strings.Contains(string(b), said) {
								t.Errorf("the report does not list %q under evidence set aside", said)
							}
						}
					case k.want != "":
						if r.code != 1 || !strings.Contains(r.stderr, p+": "+k.want) || strings.Count(r.stderr, "\n") != 1 {
							t.Errorf("%s: exit %d %q, want one line naming %s: %s", name, r.code, r.stderr, p, k.want)
						}
						if c.out != "" {
							if _, err := os.Stat(c.out); err == nil {
								t.Errorf("%s wrote %s from a run it could not read", name, c.out)
							}
						}
					case strings.Contains(r.stderr, p+": not a regular file"): // a directory opened by name
						if r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
							t.Errorf("%s: exit %d %q", name, r.code, r.stderr)
						}
					case c.args[0] == "history": // a directory found by a walk: no file there; history records the cases as missing
						if r.code != 0 || !strings.Contains(r.stderr, "1 cases (0 measured) recorded") || !strings.Contains(r.stderr, "run 100 of") {
							t.Errorf("%s: exit %d with a directory for the %s: %q", name, r.code, f.name, r.stderr)
						}
					default: // a directory: no file there
						if r.code != 1 {
							t.Errorf("%s: exit %d with a directory for the %s: %q", name, r.code, f.name, r.stderr)
						}
					}
				}
			})
		}
	}
}
