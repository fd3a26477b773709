package cli

// The bad-input catalogue: malformed or hostile inputs across every command. Each one
// must exit non-zero with one line on stderr that names the problem and where, no panic
// or stack trace, no half-written output (a pre-existing output file is left as it was,
// no temporary file is left behind), and nothing of the user's deleted.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

type badCase struct {
	name string
	// setup returns the command line (in dir); files listed in keep must be unchanged
	// afterwards and exist.
	setup func(t *testing.T, dir string) (args []string, keep []string)
	env   map[string]string
	want  string // in the one stderr line
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodShape = `{"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []}`

// planArgs is a valid local cpu plan into dir/out.json, with extra flags appended.
func planArgs(dir string, extra ...string) []string {
	return append([]string{"plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1",
		"--out", filepath.Join(dir, "out.json")}, extra...)
}

// existingOut puts a file the failed command must not touch where plan writes.
func existingOut(t *testing.T, dir string) []string {
	return []string{writeFile(t, filepath.Join(dir, "out.json"), `{"previous": "manifest"}`)}
}

// localManifest plans one local cpu shard; returns the manifest and the shard id.
func localManifest(t *testing.T, dir string, platformConfig ...string) (string, string) {
	t.Helper()
	m := filepath.Join(dir, "m.json")
	args := []string{"plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1",
		"--run-id", "9", "--attempt", "1", "--source-sha", "abc", "--out", m}
	if len(platformConfig) > 0 {
		args = []string{"plan", "--runner", "cluster:bad-stage", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1",
			"--run-id", "9", "--attempt", "1", "--source-sha", "abc", "--out", m, "--platform-config", platformConfig[0]}
	}
	r := runOpx(t, args...)
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	id := r.stdout[strings.Index(r.stdout, `"id":"`)+6:]
	return m, id[:strings.IndexByte(id, '"')]
}

func executeArgs(m, id, out string, extra ...string) []string {
	return append([]string{"execute", "--manifest", m, "--shard", id, "--run-id", "9", "--attempt", "1", "--source-sha", "abc",
		"--runner-name", "t", "--time-minutes", "10", "--cleanup-seconds", "5", "--output", out}, extra...)
}

// stagePlatform declares a container-less custom runner staging under root.
func stagePlatform(t *testing.T, dir, root string) string {
	return writeFile(t, filepath.Join(dir, "platforms.json"), `{"platforms": {"cluster:bad-stage": {"cluster": "bad_8x", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": {"container": "none", "partition": "debug", "stage_dir": "`+root+`"}}}}`)
}

// pyxisLab declares a pyxis custom runner staging under root (made here) and a one-shard
// manifest for it (shard lab-0000000000000000, no image); it returns both paths.
func pyxisLab(t *testing.T, dir, root string) (cfg, manifest string) {
	os.MkdirAll(root, 0o755)
	cfg = writeFile(t, filepath.Join(dir, "platforms.json"), `{"platforms": {"cluster:lab-pyxis": {"cluster": "lab_8x", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": {"partition": "debug", "stage_dir": "`+root+`"}}}}`)
	manifest = writeFile(t, filepath.Join(dir, "m.json"), `{"version": 1, "include": [{"id": "lab-0000000000000000", "runner": "cluster:lab-pyxis", "cluster": "lab_8x",
	  "nodes": 1, "gpus_per_node": 8, "image_platform": "linux/amd64", "world_size": 1, "image": "", "mode": "timing",
	  "backends": ["cpu"], "offset": 0, "cases": [{"testlist": "t", "shape": `+goodShape+`}], "parallel": {"dcp": 1, "dp": 1, "ep": 1, "tp": 1},
	  "digest": "", "import_uri": ""}], "source_sha": "abc", "run_id": "9", "attempt": "1"}`)
	return cfg, manifest
}

// shardTree is a one-shard run for summarize/report/compare; mutate edits files after.
func shardTree(t *testing.T, dir string) (manifest, artifacts string) {
	run := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}})
	return filepath.Join(run, "operatorx-manifest.json"), run
}

func resultsFile(artifacts string) string {
	return filepath.Join(artifacts, "shards", "s1", "results", "cpu", "local", "r.json")
}

func badInputs() []badCase {
	tl := func(t *testing.T, dir, body string) string {
		writeFile(t, filepath.Join(dir, "tl", "bad.json"), body)
		return filepath.Join(dir, "tl")
	}
	plan := func(name, want string, extra func(t *testing.T, dir string) []string) badCase {
		return badCase{name: "plan: " + name, want: want, setup: func(t *testing.T, dir string) ([]string, []string) {
			keep := existingOut(t, dir)
			return planArgs(dir, extra(t, dir)...), keep
		}}
	}
	cases := []badCase{
		plan("testlist with broken JSON", "bad.json: invalid JSON at line 1", func(t *testing.T, dir string) []string {
			return []string{"--testlist-dir", tl(t, dir, `[{"type": "gemm",, }]`), "--testlists", "bad"}
		}),
		plan("truncated testlist", "bad.json: invalid JSON", func(t *testing.T, dir string) []string {
			return []string{"--testlist-dir", tl(t, dir, "["+goodShape[:40]), "--testlists", "bad"}
		}),
		plan("testlist that is an object", "bad.json", func(t *testing.T, dir string) []string {
			return []string{"--testlist-dir", tl(t, dir, `{"type": "gemm"}`), "--testlists", "bad"}
		}),
		plan("testlist entry whose args are a list", "bad", func(t *testing.T, dir string) []string {
			return []string{"--testlist-dir", tl(t, dir, `[{"type": "gemm", "args": [1], "sources": []}]`), "--testlists", "bad"}
		}),
		plan("testlist name with ..", "../../etc/passwd", func(t *testing.T, dir string) []string {
			return []string{"--testlists", "../../etc/passwd"}
		}),
		plan("testlist name with a slash", "a/b", func(t *testing.T, dir string) []string { return []string{"--testlists", "a/b"} }),
		plan("testlist symlinked out of the directory", "bad", func(t *testing.T, dir string) []string {
			d := filepath.Join(dir, "tl")
			os.MkdirAll(d, 0o755)
			os.Symlink("/etc/hostname", filepath.Join(d, "bad.json"))
			return []string{"--testlist-dir", d, "--testlists", "bad"}
		}),
		plan("unknown testlist", "unknown testlist", func(t *testing.T, dir string) []string { return []string{"--testlists", "nosuch"} }),
		plan("unknown runner", "cluster:nosuch", func(t *testing.T, dir string) []string { return []string{"--runner", "cluster:nosuch"} }),
		plan("unknown backend", "nosuch", func(t *testing.T, dir string) []string { return []string{"--backends", "nosuch"} }),
		plan("world size 3", "world sizes must be selected from 1,2,4,8", func(t *testing.T, dir string) []string { return []string{"--world-sizes", "3"} }),
		plan("world size not a number", "x", func(t *testing.T, dir string) []string { return []string{"--world-sizes", "x"} }),
		plan("chunk size 0", "chunk", func(t *testing.T, dir string) []string { return []string{"--chunk-size", "0"} }),
		plan("unknown mode", "mode", func(t *testing.T, dir string) []string { return []string{"--mode", "fast"} }),
		plan("containers.toml broken", "c.toml", func(t *testing.T, dir string) []string {
			return []string{"--containers", writeFile(t, filepath.Join(dir, "c.toml"), "[nvidia.vllm\nimage = ")}
		}),
		plan("containers.toml with a number for an image", "c.toml", func(t *testing.T, dir string) []string {
			return []string{"--containers", writeFile(t, filepath.Join(dir, "c.toml"), "[nvidia.vllm]\nimage = 1\n")}
		}),
		plan("containers.toml missing", "c.toml", func(t *testing.T, dir string) []string {
			return []string{"--containers", filepath.Join(dir, "c.toml")}
		}),
		plan("platform config broken", "p.json", func(t *testing.T, dir string) []string {
			return []string{"--platform-config", writeFile(t, filepath.Join(dir, "p.json"), `{"platforms": {`)}
		}),
		plan("custom runner without a cluster", "cluster:mine", func(t *testing.T, dir string) []string {
			return []string{"--platform-config", writeFile(t, filepath.Join(dir, "p.json"), `{"platforms": {"cluster:mine": {"gpus_per_node": 8}}}`), "--runner", "cluster:mine"}
		}),
		plan("recipes broken", "r.json", func(t *testing.T, dir string) []string {
			return []string{"--recipes", writeFile(t, filepath.Join(dir, "r.json"), `{"recipes": [}`)}
		}),
		// inputs are read at once, but with several broken the one reported is the first
		// the sequential order meets: testlists in the given order, platform config, containers
		plan("second testlist unknown, platform config and containers broken", "unknown testlist \"nosuch\"", func(t *testing.T, dir string) []string {
			return []string{"--testlists", "cpu_smoke,nosuch",
				"--platform-config", writeFile(t, filepath.Join(dir, "p.json"), `{"platforms": {`),
				"--containers", writeFile(t, filepath.Join(dir, "c.toml"), "[nvidia.vllm\nimage = ")}
		}),
		plan("broken testlist before an unknown one", "bad.json: invalid JSON", func(t *testing.T, dir string) []string {
			return []string{"--testlist-dir", tl(t, dir, `[{"type": "gemm",, }]`), "--testlists", "bad,nosuch"}
		}),
		plan("platform config and containers broken", "p.json", func(t *testing.T, dir string) []string {
			return []string{"--platform-config", writeFile(t, filepath.Join(dir, "p.json"), `{"platforms": {`),
				"--containers", writeFile(t, filepath.Join(dir, "c.toml"), "[nvidia.vllm\nimage = ")}
		}),
		{name: "plan: --out under a regular file", want: "file: not a directory", setup: func(t *testing.T, dir string) ([]string, []string) {
			f := writeFile(t, filepath.Join(dir, "file"), "x")
			return planArgs(dir, "--out", filepath.Join(f, "out.json")), []string{f}
		}},
	}
	cases = append(cases,
		badCase{name: "execute: manifest missing", want: "nosuch.json", setup: func(t *testing.T, dir string) ([]string, []string) {
			return executeArgs(filepath.Join(dir, "nosuch.json"), "x", filepath.Join(dir, "out")), nil
		}},
		badCase{name: "execute: manifest with broken JSON", want: "m.json: invalid JSON", setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "m.json"), `{"include": [`)
			return executeArgs(m, "x", filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: shard id with ..", want: "invalid shard", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, _ := localManifest(t, dir)
			return executeArgs(m, "../../etc", filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: run id with a slash", want: "invalid run id", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			a := executeArgs(m, id, filepath.Join(dir, "out"))
			a[6] = "9/../../x"
			return a, []string{m}
		}},
		badCase{name: "execute: attempt with ..", want: "invalid attempt", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			a := executeArgs(m, id, filepath.Join(dir, "out"))
			a[8] = ".."
			return a, []string{m}
		}},
		badCase{name: "execute: source SHA differs from the manifest", want: "manifest source/run mismatch", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			a := executeArgs(m, id, filepath.Join(dir, "out"))
			a[10] = "def"
			return a, []string{m}
		}},
		badCase{name: "execute: shard not in the manifest", want: "is not in", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, _ := localManifest(t, dir)
			return executeArgs(m, "local-0000000000000000", filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: output directory already there", want: "out", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			keep := writeFile(t, filepath.Join(dir, "out", "mine.txt"), "user data")
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m, keep}
		}},
		badCase{name: "execute: runner missing from the platform config", want: "cluster:bad-stage", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir, stagePlatform(t, dir, dir))
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: symlinked stage base", want: "unsafe shared OperatorX stage directory", setup: func(t *testing.T, dir string) ([]string, []string) {
			root := filepath.Join(dir, "shared")
			os.MkdirAll(filepath.Join(dir, "elsewhere"), 0o700)
			os.MkdirAll(root, 0o755)
			os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(root, fmt.Sprintf(".operatorx-%d", os.Getuid())))
			cfg := stagePlatform(t, dir, root)
			m, id := localManifest(t, dir, cfg)
			return executeArgs(m, id, filepath.Join(dir, "out"), "--platform-config", cfg), []string{m}
		}},
		badCase{name: "execute: group-writable stage base", want: "unsafe shared OperatorX stage directory", setup: func(t *testing.T, dir string) ([]string, []string) {
			root := filepath.Join(dir, "shared")
			base := filepath.Join(root, fmt.Sprintf(".operatorx-%d", os.Getuid()))
			os.MkdirAll(base, 0o700)
			os.Chmod(base, 0o770)
			cfg := stagePlatform(t, dir, root)
			m, id := localManifest(t, dir, cfg)
			return executeArgs(m, id, filepath.Join(dir, "out"), "--platform-config", cfg), []string{m}
		}},
		badCase{name: "execute: pyxis shard without a digest", want: "has no image digest for vllm/vllm-openai:v0.11.0", setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "m.json"), `{"version": 1, "include": [{"id": "h100-0000000000000000", "runner": "cluster:h100-dsxe", "cluster": "h100_dsxe_8x",
			  "nodes": 1, "gpus_per_node": 8, "image_platform": "linux/amd64", "world_size": 1, "image": "vllm/vllm-openai:v0.11.0", "mode": "timing",
			  "backends": ["vllm"], "offset": 0, "cases": [{"testlist": "t", "shape": `+goodShape+`}], "parallel": {"dcp": 1, "dp": 1, "ep": 1, "tp": 1},
			  "digest": "", "import_uri": ""}], "source_sha": "abc", "run_id": "9", "attempt": "1"}`)
			return executeArgs(m, "h100-0000000000000000", filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "run: --out holding a user's report and summary", want: "is not empty", setup: func(t *testing.T, dir string) ([]string, []string) {
			rep := writeFile(t, filepath.Join(dir, "out", "report.html"), "<p>my report</p>")
			sum := writeFile(t, filepath.Join(dir, "out", "summary.json"), `{"mine": true}`)
			return []string{"run", "--out", filepath.Join(dir, "out")}, []string{rep, sum}
		}},
		badCase{name: "run: --out that another run is writing", want: fmt.Sprintf("another opx run (pid %d) is writing to", os.Getpid()), setup: func(t *testing.T, dir string) ([]string, []string) {
			lock := heldLock(t, filepath.Join(dir, "out", ".opx-run.lock"))
			return []string{"run", "--out", filepath.Join(dir, "out")}, []string{lock}
		}},
		badCase{name: "run: --resume of a directory that is no opx run", want: "no operatorx-manifest.json in it (is it an opx run directory?)", setup: func(t *testing.T, dir string) ([]string, []string) {
			mine := writeFile(t, filepath.Join(dir, "notes", "todo.txt"), "mine")
			return []string{"run", "--resume", filepath.Join(dir, "notes")}, []string{mine}
		}},
		badCase{name: "run: --resume of a run another opx run is writing", want: fmt.Sprintf("another opx run (pid %d) is writing to", os.Getpid()), setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "out", "operatorx-manifest.json"), `{"run_id": "1", "source_sha": "a", "include": []}`)
			lock := heldLock(t, filepath.Join(dir, "out", ".opx-run.lock")) // held: by this test
			return []string{"run", "--resume", filepath.Join(dir, "out")}, []string{m, lock}
		}},
		badCase{name: "run: an A/B with one side", want: "an A/B needs both sides: give --ab-base SIDE and --ab-head SIDE", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B side of an unknown part", want: `--ab-base 'image=foo': unknown part 'image'; a side is comma-separated tree=DIR`, setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "image=foo", "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B side whose tree is not there", want: "--ab-head 'tree=" + "/nonexistent/harness': tree=/nonexistent/harness: no such directory", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "env=X=1", "--ab-head", "tree=/nonexistent/harness"}, nil
		}},
		badCase{name: "run: an A/B side of a commit with no tree", want: "commit= needs tree=", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "commit=HEAD", "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B side of a commit its tree lacks", want: "commit=no-such-rev: git rev-parse", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "tree=" + gitRepo(t, dir) + ",commit=no-such-rev", "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B side's variable without a value", want: "env=X: give env=NAME=VALUE", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "env=X", "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B side's variable set twice", want: "env=A=2: A is set twice on one side", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "env=A=1,env=A=2", "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B side's tree its commit does not hold", want: "has no such directory (extra/)", setup: func(t *testing.T, dir string) ([]string, []string) {
			repo := gitRepo(t, dir)
			git := testenv.Git(t, repo)
			first := git("rev-list", "--max-parents=0", "HEAD")
			writeFile(t, filepath.Join(repo, "extra", "a.py"), "x\n")
			git("add", ".")
			git("commit", "-q", "-m", "extra")
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "tree=" + filepath.Join(repo, "extra") + ",commit=" + first, "--ab-head", "env=X=1"}, nil
		}},
		badCase{name: "run: an A/B of too few pairs", want: "--ab-min-pairs 4: at least 8", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-base", "env=X=0", "--ab-head", "env=X=1", "--ab-min-pairs", "4"}, nil
		}},
		badCase{name: "run: an A/B rule without an A/B", want: "--ab-threshold is for an A/B: give --ab-base and --ab-head", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--out", filepath.Join(dir, "out"), "--ab-threshold", "5"}, nil
		}},
		badCase{name: "run: --resume of an A/B run killed before its report", want: "an A/B run (opx run --ab-base/--ab-head) is not resumed: run it again", setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "out", "operatorx-manifest.json"), `{"run_id": "1", "source_sha": "a", "include": []}`)
			a := writeFile(t, filepath.Join(dir, "out", "shards", "local-0123456789abcdef", "ab", "base-1", "results", "r.json"), `{"rows": []}`)
			return []string{"run", "--resume", filepath.Join(dir, "out")}, []string{m, a}
		}},
		badCase{name: "run: --resume of an A/B run killed before any round", want: "an A/B run (opx run --ab-base/--ab-head) is not resumed: run it again", setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "out", "operatorx-manifest.json"), `{"run_id": "1", "source_sha": "a", "include": []}`)
			r := writeFile(t, filepath.Join(dir, "out", "run.json"), `{"started_at": "2026-12-07T00:00:00Z", "finished_at": null, "run_id": "1", "attempt": "1", "source_sha": "a", "opx_version": "x", "interrupted": null, "ab": {"base": "a", "head": "b"}}`)
			return []string{"run", "--resume", filepath.Join(dir, "out")}, []string{m, r}
		}},
		badCase{name: "run: --resume of an A/B run", want: "an A/B run (opx run --ab-base/--ab-head) is not resumed: run it again", setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "out", "operatorx-manifest.json"), `{"run_id": "1", "source_sha": "a", "include": []}`)
			a := writeFile(t, filepath.Join(dir, "out", "ab.json"), `{"base": "a", "head": "b", "rules": {}, "cases": []}`)
			return []string{"run", "--resume", filepath.Join(dir, "out")}, []string{m, a}
		}},
		badCase{name: "run: --resume with a selection", want: "--resume reruns the run's own manifest in its own directory: drop --testlists", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"run", "--resume", dir, "--testlists", "cpu_smoke"}, nil
		}},
		badCase{name: "plan: --resume of artifacts with no manifest", want: "no operatorx-manifest.json in it; pass --manifest", setup: func(t *testing.T, dir string) ([]string, []string) {
			os.MkdirAll(filepath.Join(dir, "art"), 0o755)
			return []string{"plan", "--resume", filepath.Join(dir, "art"), "--out", filepath.Join(dir, "r.json")}, nil
		}},
		badCase{name: "plan: --resume for an attempt not after the newest", want: "attempt 1 is not after the newest attempt found (1)", setup: func(t *testing.T, dir string) ([]string, []string) {
			cell := `{"id": "s1", "runner": "local", "cluster": "local", "world_size": 1, "backends": ["cpu"], "cases": [{"testlist": "t", "shape": ` + goodShape + `}]}`
			m := writeFile(t, filepath.Join(dir, "art", "operatorx-manifest.json"), `{"run_id": "1", "source_sha": "a", "include": [`+cell+`]}`)
			writeFile(t, filepath.Join(dir, "art", "s1", "execution.json"), `{"cell": `+cell+`, "source_sha": "a", "run_id": "1", "attempt": "1", "stage": "/x"}`)
			return []string{"plan", "--resume", filepath.Join(dir, "art"), "--attempt", "1", "--out", filepath.Join(dir, "r.json")}, []string{m}
		}},
		badCase{name: "plan: --estimate-from a file that is no ledger", want: "not a case ledger", setup: func(t *testing.T, dir string) ([]string, []string) {
			l := writeFile(t, filepath.Join(dir, "cases.json"), `{"shards": []}`)
			out := filepath.Join(dir, "m.json")
			t.Cleanup(func() {
				if _, err := os.Stat(out); err == nil {
					t.Errorf("plan wrote %s although its --estimate-from was refused", out)
				}
			})
			return []string{"plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1", "--out", out, "--estimate-from", l}, []string{l}
		}},
		badCase{name: "finalize: stage below a symlinked .operatorx-<uid>", want: "refusing unsafe stage cleanup", setup: func(t *testing.T, dir string) ([]string, []string) {
			// the base is a symlink to a directory of the user's: finalize must not empty it
			precious := writeFile(t, filepath.Join(dir, "precious", "9-1-x-abc", "results", "data.json"), `{"rows": []}`)
			os.MkdirAll(filepath.Join(dir, "root"), 0o755)
			base := filepath.Join(dir, "root", fmt.Sprintf(".operatorx-%d", os.Getuid()))
			os.Symlink(filepath.Join(dir, "precious"), base)
			writeFile(t, filepath.Join(dir, "out", "execution.json"), `{"cell": {"id": "x", "runner": "local"}, "source_sha": "a", "run_id": "9", "attempt": "1", "stage": "`+filepath.Join(base, "9-1-x-abc")+`"}`)
			return []string{"finalize", "--output", filepath.Join(dir, "out"), "--cleanup-seconds", "5"}, []string{precious}
		}},
		badCase{name: "finalize: stage whose .operatorx-<uid> is open to others", want: "is open to other users", setup: func(t *testing.T, dir string) ([]string, []string) {
			base := filepath.Join(dir, "root", fmt.Sprintf(".operatorx-%d", os.Getuid()))
			precious := writeFile(t, filepath.Join(base, "9-1-x-abc", "results", "data.json"), `{"rows": []}`)
			os.Chmod(base, 0o777)
			writeFile(t, filepath.Join(dir, "out", "execution.json"), `{"cell": {"id": "x", "runner": "local"}, "source_sha": "a", "run_id": "9", "attempt": "1", "stage": "`+filepath.Join(base, "9-1-x-abc")+`"}`)
			return []string{"finalize", "--output", filepath.Join(dir, "out"), "--cleanup-seconds", "5"}, []string{precious}
		}},
		badCase{name: "execute: manifest cluster that climbs out of the results", want: "has cluster '../..'", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, bytes.Replace(b, []byte(`"cluster": "local"`), []byte(`"cluster": "../.."`), 1), 0o644)
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: operator.peaks that are not numbers", want: "platform entry for local: operator.peaks.bf16_tflops is string, not a number", setup: func(t *testing.T, dir string) ([]string, []string) {
			cfg := writeFile(t, filepath.Join(dir, "platforms.json"), `{"base": "opx:embedded", "platforms": {"local": {"operator": {"container": "none", "peaks": {"bf16_tflops": "fast"}}}}}`)
			m, id := localManifest(t, dir)
			return executeArgs(m, id, filepath.Join(dir, "out"), "--platform-config", cfg), []string{m}
		}},
		badCase{name: "execute: manifest world_size -1", want: "world_size -1", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, bytes.Replace(b, []byte(`"world_size": 1`), []byte(`"world_size": -1`), 1), 0o644)
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: manifest world_size 0", want: "world_size 0", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, bytes.Replace(b, []byte(`"world_size": 1`), []byte(`"world_size": 0`), 1), 0o644)
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "bench: OPERATORX_CLUSTER that climbs out of the results", want: "OPERATORX_CLUSTER='../..' is not a plain name",
			env: map[string]string{"OPERATORX_CLUSTER": "../.."}, setup: func(t *testing.T, dir string) ([]string, []string) {
				writeFile(t, filepath.Join(dir, "tl", "t.json"), "["+goodShape+"]")
				return []string{"bench", "--testlist-dir", filepath.Join(dir, "tl"), "--results-dir", filepath.Join(dir, "res")}, nil
			}},
		badCase{name: "execute: relative stage_dir", want: "storage root shared is not an absolute path", setup: func(t *testing.T, dir string) ([]string, []string) {
			cfg := stagePlatform(t, dir, "shared")
			m, id := localManifest(t, dir, cfg)
			return executeArgs(m, id, filepath.Join(dir, "out"), "--platform-config", cfg), []string{m}
		}},
		badCase{name: "execute: relative TMPDIR for the local runner", want: "TMPDIR=tmp is not an absolute path", env: map[string]string{"TMPDIR": "tmp"},
			setup: func(t *testing.T, dir string) ([]string, []string) {
				m, id := localManifest(t, dir)
				return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
			}},
		badCase{name: "execute: manifest backend holding a comma", want: "has backend 'cpu,vllm'", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, bytes.Replace(b, []byte("\"backends\": [\n        \"cpu\""), []byte("\"backends\": [\n        \"cpu,vllm\""), 1), 0o644)
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: manifest env name holding '='", want: "env member 'LD_PRELOAD=/x.so A'", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, bytes.Replace(b, []byte(`"mode": "timing",`), []byte(`"mode": "timing", "env": {"LD_PRELOAD=/x.so A": "1"},`), 1), 0o644)
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: manifest import_uri that is not docker://", want: "has import_uri 'file:///etc/shadow'", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, id := localManifest(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, bytes.Replace(b, []byte(`"import_uri": ""`), []byte(`"import_uri": "file:///etc/shadow"`), 1), 0o644)
			return executeArgs(m, id, filepath.Join(dir, "out")), []string{m}
		}},
		badCase{name: "execute: pyxis stage root holding ':'", want: "holds ':' or ',', which pyxis cannot mount", setup: func(t *testing.T, dir string) ([]string, []string) {
			cfg, m := pyxisLab(t, dir, filepath.Join(dir, "a:b"))
			return executeArgs(m, "lab-0000000000000000", filepath.Join(dir, "out"), "--platform-config", cfg), []string{m}
		}},
		plan("counters mode with the cpu backend", "counters mode profiles GPU kernels with ncu or rocprofv3; the cpu backend has none", func(t *testing.T, dir string) []string {
			return []string{"--mode", "counters"}
		}),
		badCase{name: "finalize: stage outside the stage base", want: "refusing unsafe stage cleanup", setup: func(t *testing.T, dir string) ([]string, []string) {
			precious := writeFile(t, filepath.Join(dir, "precious", "results", "data.json"), `{"rows": []}`)
			writeFile(t, filepath.Join(dir, "out", "execution.json"), `{"cell": {"id": "x", "runner": "local"}, "source_sha": "a", "run_id": "9", "attempt": "1", "stage": "`+filepath.Join(dir, "precious")+`"}`)
			return []string{"finalize", "--output", filepath.Join(dir, "out"), "--cleanup-seconds", "5"}, []string{precious}
		}},
		badCase{name: "finalize: execution.json broken", want: "execution.json", setup: func(t *testing.T, dir string) ([]string, []string) {
			e := writeFile(t, filepath.Join(dir, "out", "execution.json"), `{"cell": `)
			return []string{"finalize", "--output", filepath.Join(dir, "out"), "--cleanup-seconds", "5"}, []string{e}
		}},
		badCase{name: "finalize: cleanup timeout 0", want: "cleanup", setup: func(t *testing.T, dir string) ([]string, []string) {
			os.MkdirAll(filepath.Join(dir, "out"), 0o755)
			return []string{"finalize", "--output", filepath.Join(dir, "out"), "--cleanup-seconds", "0"}, nil
		}},
		badCase{name: "recover: artifacts directory missing", want: "nosuch", setup: func(t *testing.T, dir string) ([]string, []string) {
			os.MkdirAll(filepath.Join(dir, "shared"), 0o755)
			return []string{"recover", "--artifacts", filepath.Join(dir, "nosuch"), "--run-id", "9", "--runner", "cluster:bad-stage",
				"--platform-config", stagePlatform(t, dir, filepath.Join(dir, "shared")), "--cleanup-seconds", "5"}, nil
		}},
		badCase{name: "recover: another run's artifact, whose layout is broken too", want: "recovery artifact does not match requested run/runner", setup: func(t *testing.T, dir string) ([]string, []string) {
			// ci.py checks run and runner before the layout: the same words here (issue 32)
			os.MkdirAll(filepath.Join(dir, "shared"), 0o755)
			e := writeFile(t, filepath.Join(dir, "art", "s1", "execution.json"), `{"cell": {"runner": "cluster:bad-stage"}, "run_id": "8", "attempt": 1}`)
			return []string{"recover", "--artifacts", filepath.Join(dir, "art"), "--run-id", "9", "--runner", "cluster:bad-stage",
				"--platform-config", stagePlatform(t, dir, filepath.Join(dir, "shared")), "--cleanup-seconds", "5"}, []string{e}
		}},
		badCase{name: "recover: unknown runner", want: "cluster:nosuch", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"recover", "--artifacts", dir, "--run-id", "9", "--runner", "cluster:nosuch", "--cleanup-seconds", "5"}, nil
		}},
		badCase{name: "import: architecture mismatch", want: "linux/ppc64le", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"import", "--cache", filepath.Join(dir, "cache"), "--image", "vllm/vllm-openai:v1", "--digest", "sha256:" + strings.Repeat("a", 64), "--image-platform", "linux/ppc64le"}, nil
		}},
		badCase{name: "import: digest that is not sha256", want: "--digest 'md5:abc' is not a sha256", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"import", "--cache", filepath.Join(dir, "cache"), "--image", "vllm/vllm-openai:v1", "--digest", "md5:abc", "--image-platform", "linux/amd64"}, nil
		}},
		badCase{name: "rank: no Slurm rank variables", want: "SLURM_PROCID", env: map[string]string{"SLURM_PROCID": "", "SLURM_LOCALID": "", "WORLD_SIZE": ""},
			setup: func(t *testing.T, dir string) ([]string, []string) { return []string{"rank"}, nil }},
		badCase{name: "rank: rank outside the world", want: "SLURM_PROCID=5 is outside WORLD_SIZE=2", env: map[string]string{"SLURM_PROCID": "5", "SLURM_LOCALID": "5", "WORLD_SIZE": "2", "SLURM_JOB_ID": "7"},
			setup: func(t *testing.T, dir string) ([]string, []string) { return []string{"rank"}, nil }},
		badCase{name: "rank: WORLD_SIZE not a number", want: "WORLD_SIZE='two' is not a non-negative integer", env: map[string]string{"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "WORLD_SIZE": "two", "SLURM_JOB_ID": "7"},
			setup: func(t *testing.T, dir string) ([]string, []string) { return []string{"rank"}, nil }},
		badCase{name: "bench: testlist entry with a number for sources", want: "bad[0]: 'sources' must be a list of '<org>/<model>[/<role>]' strings", env: map[string]string{"OPERATORX_CLUSTER": "local"},
			setup: func(t *testing.T, dir string) ([]string, []string) {
				writeFile(t, filepath.Join(dir, "tl", "bad.json"), `[{"type": "gemm", "args": {}, "sources": 3}]`)
				return []string{"bench", "--strict", "--testlist-dir", filepath.Join(dir, "tl"), "--testlists", "bad", "--results-dir", filepath.Join(dir, "res")}, nil
			}},
		badCase{name: "bench: unknown testlist", want: "unknown testlist", env: map[string]string{"OPERATORX_CLUSTER": "local"},
			setup: func(t *testing.T, dir string) ([]string, []string) {
				return []string{"bench", "--testlists", "nosuch", "--results-dir", filepath.Join(dir, "res")}, nil
			}},
		badCase{name: "bench: OPERATORX_PARALLEL not JSON", want: "OPERATORX_PARALLEL", env: map[string]string{"OPERATORX_CLUSTER": "local", "OPERATORX_PARALLEL": "{tp: 2"},
			setup: func(t *testing.T, dir string) ([]string, []string) {
				return []string{"bench", "--testlists", "cpu_smoke", "--results-dir", filepath.Join(dir, "res")}, nil
			}},
		badCase{name: "summarize: results without rows", want: `r.json: results file has no "rows" list`, setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			writeFile(t, resultsFile(a), `{"run": {}}`)
			return []string{"summarize", "--manifest", m, "--artifacts", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "summarize: results with broken JSON", want: "r.json: not a results file", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			writeFile(t, resultsFile(a), `{"rows": [{"status": "ok"}`)
			return []string{"summarize", "--manifest", m, "--artifacts", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "summarize: invalid row status", want: "invalid result status: great", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			writeFile(t, resultsFile(a), `{"rows": [{"status": "great"}]}`)
			return []string{"summarize", "--manifest", m, "--artifacts", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "summarize: manifest without include", want: "include", setup: func(t *testing.T, dir string) ([]string, []string) {
			m := writeFile(t, filepath.Join(dir, "m.json"), `{"run_id": "1", "source_sha": "a"}`)
			os.MkdirAll(filepath.Join(dir, "a"), 0o755)
			return []string{"summarize", "--manifest", m, "--artifacts", filepath.Join(dir, "a"), "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "summarize: artifacts of another run", want: "artifact provenance does not match the requested run", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			p := filepath.Join(a, "shards", "s1", "execution.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"run_id": "100"`), []byte(`"run_id": "101"`), 1), 0o644)
			return []string{"summarize", "--manifest", m, "--artifacts", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "summarize: status.json broken", want: "status.json: not a status file", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			writeFile(t, filepath.Join(a, "shards", "s1", "status.json"), `{"exit_code": `)
			return []string{"summarize", "--manifest", m, "--artifacts", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "summarize: attempt that is not a number", want: "attempt 'one' is not an integer", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			p := filepath.Join(a, "shards", "s1", "execution.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"attempt": "1"`), []byte(`"attempt": "one"`), 1), 0o644)
			return []string{"summarize", "--manifest", m, "--artifacts", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "report: directory without a manifest", want: "no operatorx-manifest.json in it", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"report", dir}, nil
		}},
		badCase{name: "report: rows that are not objects", want: "r.json: not a results file: rows[0] is integer, not an object", setup: func(t *testing.T, dir string) ([]string, []string) {
			_, a := shardTree(t, dir)
			writeFile(t, resultsFile(a), `{"rows": [1]}`)
			return []string{"report", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "report: manifest truncated", want: "operatorx-manifest.json: invalid JSON", setup: func(t *testing.T, dir string) ([]string, []string) {
			m, a := shardTree(t, dir)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, b[:len(b)/2], 0o644)
			return []string{"report", a, "--out", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "compare: NEW missing", want: "new: run directory", setup: func(t *testing.T, dir string) ([]string, []string) {
			_, a := shardTree(t, dir)
			return []string{"compare", a, filepath.Join(dir, "nosuch")}, nil
		}},
		badCase{name: "compare: BASE results broken", want: "base: ", setup: func(t *testing.T, dir string) ([]string, []string) {
			_, a := shardTree(t, dir)
			_, b := shardTree(t, dir)
			writeFile(t, resultsFile(a), `{"rows": [{"status": "ok", "op": {"args": {"m": 1}}}`)
			return []string{"compare", a, b, "--json", filepath.Join(dir, "out.json")}, existingOut(t, dir)
		}},
		badCase{name: "doctor: unknown runner", want: "unknown runner cluster:nosuch", setup: func(t *testing.T, dir string) ([]string, []string) {
			return []string{"doctor", "--runner", "cluster:nosuch"}, nil
		}},
	)
	return cases
}

func TestBadInputCatalogue(t *testing.T) {
	cases := badInputs()
	clean := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args, keep := c.setup(t, dir)
			before := map[string][]byte{}
			for _, k := range keep {
				b, err := os.ReadFile(k)
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				before[k] = b
			}
			var out, errb bytes.Buffer
			getenv := func(k string) string {
				if v, ok := c.env[k]; ok {
					return v
				}
				return os.Getenv(k)
			}
			environ := func() []string {
				var env []string
				for _, kv := range os.Environ() {
					if _, ok := c.env[kv[:strings.IndexByte(kv, '=')]]; !ok {
						env = append(env, kv)
					}
				}
				for k, v := range c.env {
					if v != "" {
						env = append(env, k+"="+v)
					}
				}
				return env
			}
			code := Main(context.Background(), args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: getenv, Environ: environ})
			msg := strings.TrimSpace(errb.String())
			ok := true
			fail := func(format string, a ...any) { ok = false; t.Errorf(format, a...) }
			if code == 0 {
				fail("exit 0")
			}
			if strings.Contains(msg, "\n") || msg == "" {
				fail("want one line on stderr, got %q", msg)
			}
			if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
				fail("panic: %q", msg)
			}
			if !strings.Contains(msg, c.want) {
				fail("stderr %q does not name %q", msg, c.want)
			}
			for k, b := range before {
				if after, err := os.ReadFile(k); err != nil || !bytes.Equal(after, b) {
					fail("%s was changed or removed (%v)", k, err)
				}
			}
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".tmp") {
					fail("temporary file left behind: %s", p)
				}
				return nil
			})
			if ok {
				clean++
			}
		})
	}
	t.Logf("%d bad inputs, %d answered cleanly", len(cases), clean)
	if len(cases) < 40 {
		t.Errorf("the catalogue has %d inputs; keep at least 40", len(cases))
	}
}

// An --out that is one of the command's inputs is refused before anything is read or
// written (issue 30): the run stays readable.
func TestOutputThatIsAnInputIsRefused(t *testing.T) {
	dir := craftedRun(t, "300", map[int][3]float64{1: {100, 98, 102}})
	m := filepath.Join(dir, "operatorx-manifest.json")
	before, _ := os.ReadFile(m)
	link := filepath.Join(t.TempDir(), "link.json")
	os.Symlink(m, link)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"summarize", "--manifest", m, "--artifacts", filepath.Join(dir, "shards"), "--out", m}, "--out " + m + " is the run's manifest, an input"},
		{[]string{"summarize", "--manifest", m, "--artifacts", filepath.Join(dir, "shards"), "--out", link}, "is the run's manifest, an input"},
		{[]string{"summarize", "--manifest", m, "--artifacts", filepath.Join(dir, "shards"), "--out", filepath.Join(t.TempDir(), "s.json"), "--cases", m}, "--cases"},
		{[]string{"export", dir, "--out", m}, "is the run's manifest, an input"},
		{[]string{"report", dir, "--out", m}, "is the run's manifest, an input"},
		{[]string{"export", dir, "--out", filepath.Join(dir, "shards", "s1", "status.json")}, "is a file of the run in " + dir + ", an input"},
		{[]string{"report", dir, "--out", filepath.Join(dir, "shards", "s1", "results", "cpu", "local", "r.json")}, "is a file of the run in " + dir},
		{[]string{"compare", dir, dir, "--json", m}, "--json " + m + " is the run's manifest"},
		// opx run's ledger and record, which resume, --estimate-from and history add read
		{[]string{"compare", dir, dir, "--junit", filepath.Join(dir, "cases.json")}, "--junit " + filepath.Join(dir, "cases.json") + " is a file of the run in"},
		{[]string{"export", dir, "--out", filepath.Join(dir, "run.json")}, "is a file of the run in " + dir},
	} {
		r := runOpx(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if after, _ := os.ReadFile(m); string(after) != string(before) {
		t.Error("the manifest was written over")
	}
	if r := runOpx(t, "export", dir, "--format", "csv"); r.code != 0 {
		t.Errorf("the run is no longer readable: %d %s", r.code, r.stderr)
	}
	// a file of one's own beside the run is fine
	if r := runOpx(t, "compare", dir, dir, "--allow-same", "--json", filepath.Join(dir, "compare.json")); r.code != 0 {
		t.Errorf("compare --json beside the run: %d %s", r.code, r.stderr)
	}
}

// heldLock is a run lock a live opx run holds: the file, flock(2)ed by this test until it
// ends.
func heldLock(t *testing.T, path string) string {
	t.Helper()
	writeFile(t, path, fmt.Sprintf("pid %d\n", os.Getpid()))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path
}

// opx run --manifest checks the whole manifest — its run id, attempt, every cell id —
// before it makes the run directory: a cell id "../../x" or a run id of 129 characters
// is refused with one line, and no run directory, summary or report is left.
func TestRunManifestCheckedBeforeTheRunDirectory(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "m.json")
	if r := runOpx(t, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1", "--out", m); r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	good, _ := os.ReadFile(m)
	var doc map[string]any
	json.Unmarshal(good, &doc)
	id := doc["include"].([]any)[0].(map[string]any)["id"].(string)
	for _, c := range []struct{ name, from, to, want string }{
		{"cell id ../../x", `"id": "` + id + `"`, `"id": "../../x"`, `a cell id '../../x'`},
		{"run id of 129 characters", `"run_id": "local"`, `"run_id": "` + strings.Repeat("r", 129) + `"`, "its run id"},
	} {
		bad := filepath.Join(dir, "bad.json")
		os.WriteFile(bad, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o644)
		out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
		r := runOpx(t, "run", "--manifest", bad, "--out", out)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d %q", c.name, r.code, r.stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: the run directory was made", c.name)
		}
	}
}

// Messages blame the right thing (issue 48): a mistyped subcommand is one "did you mean"
// and exit 2, a mistyped flag or backend names the nearest one, an empty or wrong path
// says what it is.
func TestMessagesBlameTheRightThing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	os.WriteFile(file, []byte("<html></html>"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"history", "chek", "--fail-on-regression", "5"}, 2, `unknown command "chek" for "opx history"; did you mean check?`},
		{[]string{"history", "chek"}, 2, `did you mean check?`},
		{[]string{"hist", "add"}, 2, `unknown command "hist" for "opx"; did you mean history or list?`},
		{[]string{"list"}, 2, "say what to list: runners, backends, testlists or images"},
		{[]string{"run", "--testlist", "cpu_smoke"}, 2, "did you mean --testlists?"},
		{[]string{"serve", "--port", "8080"}, 2, "unknown flag: --port; did you mean --listen? (opx serve listens on an address and port: --listen 127.0.0.1:8080)"},
		// a selection the planner refuses exits 1 from run as from plan (ci.py's code), with
		// a "did you mean" for a typo of a runner, testlist or backend
		{[]string{"run", "--backends", "cpuu", "--out", filepath.Join(dir, "r1")}, 1, "no backend cpuu on the local runner (it runs: cpu, vllm; see opx list backends); did you mean cpu?"},
		{[]string{"run", "--runner", "locall", "--out", filepath.Join(dir, "r9")}, 1, "unsupported runner: locall (runners: "},
		{[]string{"run", "--runner", "locall", "--out", filepath.Join(dir, "r9")}, 1, "; did you mean local?)"},
		{[]string{"plan", "--runner", "locall", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1"}, 1, "; did you mean local?)"},
		{[]string{"run", "--runner", "h200-dgxc", "--out", filepath.Join(dir, "r10")}, 1, "; did you mean cluster:h200-dgxc?)"},
		{[]string{"plan", "--runner", "h200_dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1"}, 1, "; did you mean cluster:h200-dgxc?)"},
		{[]string{"run", "--testlists", "cpu_smok", "--out", filepath.Join(dir, "r11")}, 1, `unknown testlist "cpu_smok" in embedded testlists; available: `},
		{[]string{"run", "--testlists", "cpu_smok", "--out", filepath.Join(dir, "r11")}, 1, "; did you mean cpu_smoke?"},
		{[]string{"plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smok", "--world-sizes", "1"}, 1, "; did you mean cpu_smoke?"},
		{[]string{"run", "--world-sizes=", "--out", filepath.Join(dir, "r2")}, 1, "--world-sizes is empty: give the world sizes to sweep (the local runner offers 1 on a machine of one device)"},
		{[]string{"run", "--world-sizes", "1,x", "--out", filepath.Join(dir, "r6")}, 1, "invalid literal for int() with base 10: 'x'"},
		{[]string{"run", "--testlists", "smoke_parallel", "--out", filepath.Join(dir, "r7")}, 1, "selection contains no runnable shapes (the shapes of smoke_parallel run at world size 2, 4, 8; selected 1)"},
		// the local runner names the world sizes it offers, never only the clusters' 1,2,4,8
		{[]string{"run", "--world-sizes", "3", "--out", filepath.Join(dir, "r12")}, 1, "world sizes must be selected from 1,2,4,8 (single node) (the local runner offers world sizes 1 on this machine: 1 device(s))"},
		{[]string{"run", "--world-sizes", "2", "--out", filepath.Join(dir, "r8")}, 1, "world size 2 exceeds the local runner's 1 device(s) on this machine (it offers world sizes 1)"},
		{[]string{"run", "--resume", filepath.Join(dir, "nosuch")}, 1, "no such run directory"},
		{[]string{"report", file}, 1, "is a file, not a run directory"},
		{[]string{"doctor", "--runner", "h200"}, 2, "unknown runner h200: embedded platforms.json has no entry for it (runners: cluster:h100-dsxe, "},
		{[]string{"doctor", "--runner", "h200"}, 2, "local); did you mean cluster:h200-dgxc?"},
		{[]string{"run", "--time-minutes", "0", "--out", filepath.Join(dir, "r3")}, 2, "--time-minutes 0: give a positive number of minutes (salloc reads 0 as no limit)"},
		{[]string{"run", "--time-minutes", "-5", "--out", filepath.Join(dir, "r4")}, 2, "--time-minutes -5: give a positive number"},
		{[]string{"run", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--time-minutes", "3", "--out", filepath.Join(dir, "r5")}, 2,
			"--time-minutes 3: an allocation of 180 s cannot hold the benchmark's own timeout (300 s) and 300 s for the image import and cleanup: give 10 or more"},
	} {
		r := runOpx(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 2 {
			t.Errorf("opx %s: exit %d %q, want %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.want)
		}
	}
}

// compare's header names each side's run by id, source SHA and time, each labelled.
func TestCompareHeaderNamesRuns(t *testing.T) {
	base := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}})
	nw := craftedRun(t, "101", map[int][3]float64{1: {100, 98, 102}})
	r := runOpx(t, "compare", base, nw)
	if !strings.Contains(r.stdout, "(run 100, source abc") || !strings.Contains(r.stdout, "(run 101, source abc") {
		t.Errorf("compare's header: %q", r.stdout)
	}
}

// A cluster shard that cannot start on this host (its stage root does not exist) is
// recorded like any failed attempt — its phase and reason in the ledger — and the run's
// last advice is to check the host with opx doctor before resuming.
func TestUnstartableShardIsRecorded(t *testing.T) {
	dir := t.TempDir()
	cfg := stagePlatform(t, dir, filepath.Join(dir, "no-such-root"))
	out := filepath.Join(dir, "run")
	r := runOpx(t, "run", "--runner", "cluster:bad-stage", "--platform-config", cfg, "--backends", "cpu", "--testlists", "cpu_smoke", "--out", out)
	if r.code != 1 || !strings.Contains(r.stderr, "could not start on this host: check it first, opx doctor --runner cluster:bad-stage") {
		t.Fatalf("exit %d %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "cases.json"))
	if err != nil || !strings.Contains(string(b), `"failure":"setup: `) || !strings.Contains(string(b), `"outcome":"failed"`) {
		t.Errorf("the ledger does not say why the shard did not run: %v %.600s", err, b)
	}
	// its page names the day it was tried (run.json), not "time not recorded"
	if page, _ := os.ReadFile(filepath.Join(out, "report.html")); !regexp.MustCompile(`<title>opx report — run [^<]* · started 20\d\d-\d\d-\d\d \d\d:\d\d UTC; nothing was allocated</title>`).Match(page) {
		t.Errorf("the page of a run that could not start names no date: %.400s", page)
	}
}
