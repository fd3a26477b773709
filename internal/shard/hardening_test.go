package shard_test

// Findings of the hardening review (issue 16), reproduced against the real local Slurm
// that scripts/test.sh starts. "The controller is unreachable" is made real for opx alone:
// opx is handed a copy of slurm.conf whose SlurmctldPort nobody listens on, so its own
// scancel, squeue and scontrol fail exactly as they do when slurmctld is down, while the
// test (and every other test) keeps talking to the live controller.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/testenv"
)

// deadConf writes a copy of the cluster's slurm.conf that points at a port with no
// controller, and returns its path and a function that makes it point at the live one.
func (c *cluster) deadConf() (string, func()) {
	c.t.Helper()
	path, kill, revive := c.swappableConf()
	kill()
	return path, revive
}

// swappableConf writes a copy of the cluster's slurm.conf, live, and returns its path and
// functions that make it point at a port with no controller (kill) and back (revive).
func (c *cluster) swappableConf() (string, func(), func()) {
	c.t.Helper()
	b, err := os.ReadFile(c.conf)
	if err != nil {
		c.t.Fatal(err)
	}
	dir := c.t.TempDir()
	path := filepath.Join(dir, "slurm.conf")
	dead := regexp.MustCompile(`(?m)^SlurmctldPort=\d+$`).ReplaceAll(b, []byte("SlurmctldPort=1"))
	// each client call then fails at once instead of retrying for MessageTimeout
	dead = regexp.MustCompile(`(?m)^MessageTimeout=\d+$`).ReplaceAll(dead, []byte("MessageTimeout=1"))
	// the node's gres.conf sits beside slurm.conf
	if g, err := os.ReadFile(filepath.Join(filepath.Dir(c.conf), "gres.conf")); err == nil {
		os.WriteFile(filepath.Join(dir, "gres.conf"), g, 0o644)
	}
	put := func(text []byte) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, text, 0o644); err != nil {
			c.t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			c.t.Fatal(err)
		}
	}
	put(b)
	return path, func() { put(dead) }, func() { put(b) }
}

// orphan makes an execution directory whose allocation (tagged with token) is running
// and whose stage holds one checkpointed row, its allocation.log empty (execute died
// before salloc's answer reached it); it returns the output dir, stage and job id.
func (c *cluster) orphan(name, token string, withExecutionToken bool) (string, string, string) {
	c.t.Helper()
	out, stage := c.staged(name, token, withExecutionToken)
	os.WriteFile(filepath.Join(out, "allocation.log"), nil, 0o644)
	hold := exec.Command("salloc", "--no-shell", "--time=5", "--comment="+token, "--job-name=orphan")
	hold.Env = c.env()
	b, err := hold.CombinedOutput()
	if err != nil {
		c.t.Fatalf("salloc: %v %s", err, b)
	}
	job := regexp.MustCompile(`allocation (\d+)`).FindSubmatch(b)
	if job == nil {
		c.t.Fatalf("salloc said %q", b)
	}
	return out, stage, string(job[1])
}

// staged makes an execution directory and its stage, which holds one checkpointed row.
func (c *cluster) staged(name, token string, withExecutionToken bool) (string, string) {
	c.t.Helper()
	base := filepath.Join(c.stageRoot, fmt.Sprintf(".operatorx-%d", os.Getuid()))
	os.MkdirAll(base, 0o700)
	stage, _ := os.MkdirTemp(base, "77-1-opxtest-loopback-0123456789abcdef-")
	os.MkdirAll(filepath.Join(stage, "results", "cpu", "x"), 0o755)
	os.WriteFile(filepath.Join(stage, "results", "cpu", "x", "r.json"), []byte(`{"rows": [{"status": "ok"}]}`), 0o644)
	out := filepath.Join(c.dir, name)
	os.Mkdir(out, 0o700)
	tok := ""
	if withExecutionToken {
		tok = `, "token": "` + token + `"`
	}
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "opxtest-loopback-0123456789abcdef", "runner": "cluster:opxtest-loopback"},
	  "source_sha": "abc", "run_id": "77", "attempt": "1", "stage": "`+stage+`"`+tok+`}`), 0o644)
	return out, stage
}

func (c *cluster) jobListed(job string) bool {
	for _, line := range strings.Split(c.squeue(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == job {
			return true
		}
	}
	return false
}

// Finding 10b: one failed squeue during finalize's token lookup was swallowed — rc 0, stage
// removed, job still running, no cleanup.log. Now the lookup is retried, and when the
// controller never answers finalize fails, keeps the stage and logs every try.
func TestFinalizeTokenLookupWithControllerDown(t *testing.T) {
	c := slurmCluster(t)
	token := "opx-" + strings.Repeat("ab", 12) + "-0000beef"
	out, stage, job := c.orphan("out-dead-lookup", token, true)
	dead, _ := c.deadConf()
	cmd := exec.Command(opxBin, "finalize", "--output", out, "--cleanup-seconds", "2")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+dead)
	r := run(cmd)
	if r.code != 1 || !strings.Contains(r.stderr, "listing this user's jobs to tell which are this execution's") || !strings.Contains(r.stderr, "retaining staged evidence") {
		t.Fatalf("finalize with the controller down: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(stage, "results", "cpu", "x", "r.json")); err != nil {
		t.Errorf("the stage was removed although the allocation could not be checked: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
	if n := strings.Count(string(log), "jobs rc=1"); n < 2 {
		t.Errorf("cleanup.log should record each failed lookup (%d): %q", n, log)
	}
	if !c.jobListed(job) {
		t.Fatalf("job %s should still be running: %q", job, c.squeue())
	}
	// the controller answers again: the same finalize now releases it
	if r := run(c.opx("finalize", "--output", out, "--cleanup-seconds", "30")); r.code != 0 {
		t.Fatalf("finalize: %d %s", r.code, r.stderr)
	}
	if c.jobListed(job) {
		t.Errorf("job %s survived finalize", job)
	}
	if got := rows(t, out); got["ok"] != 1 {
		t.Errorf("rows %v", got)
	}
}

// Finding 10a: with slurmctld down at cleanup, scancel was sent once and never again, and
// the job held its node for its whole time limit. Now finalize asks again until the
// controller answers (it must see the job's tag before it cancels anything): the
// controller comes back a few seconds into cleanup and the job is released within the
// same finalize. (Resending a refused scancel: TestCleanupResendsARefusedScancel.)
func TestCleanupResendsScancelWhenControllerReturns(t *testing.T) {
	c := slurmCluster(t)
	out, stage, job := c.orphan("out-dead-scancel", "opx-"+strings.Repeat("cd", 12)+"-0000beef", true)
	os.WriteFile(filepath.Join(out, "allocation.log"), []byte("salloc: Granted job allocation "+job+"\n"), 0o644)
	dead, revive := c.deadConf()
	cmd := exec.Command(opxBin, "finalize", "--output", out, "--cleanup-seconds", "60")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+dead)
	// finalize knows the job from allocation.log; it asks which jobs carry the tag until
	// the controller answers
	var res outcome
	done := make(chan struct{})
	go func() { res = run(cmd); close(done) }()
	waitFor(t, "a failed listing in cleanup.log", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
		return strings.Contains(string(b), "jobs rc=")
	})
	if !c.jobListed(job) {
		t.Fatalf("job %s ended before the controller came back", job)
	}
	revive()
	<-done
	if res.code != 0 {
		t.Fatalf("finalize exit %d: %s", res.code, res.stderr)
	}
	if c.jobListed(job) {
		t.Errorf("job %s still running after finalize: %q", job, c.squeue())
	}
	if _, err := os.Stat(stage); err == nil {
		t.Errorf("stage %s left after a successful cleanup", stage)
	}
}

// Finding 11: SCANCEL_STATE and SQUEUE_STATES in the environment changed what scancel
// cancels and what squeue reports, so "released" was claimed for a job still running.
// opx's own Slurm calls now run with those variables removed.
func TestSlurmInputVariablesDoNotFoolCleanup(t *testing.T) {
	c := slurmCluster(t)
	out, _, job := c.orphan("out-env", "opx-"+strings.Repeat("ef", 12)+"-0000beef", true)
	cmd := c.opx("finalize", "--output", out, "--cleanup-seconds", "30")
	cmd.Env = append(cmd.Env, "SCANCEL_STATE=PENDING", "SQUEUE_STATES=PENDING", "SQUEUE_FORMAT=%i", "SCANCEL_USER=nobody", "SQUEUE_USERS=nobody")
	r := run(cmd)
	if r.code != 0 {
		t.Fatalf("finalize exit %d: %s", r.code, r.stderr)
	}
	if c.jobListed(job) {
		t.Errorf("finalize said the allocation was released, but job %s is still running", job)
	}
}

// Finding 5: a shard whose job was cancelled from outside (scancel, or Slurm's time limit)
// was recorded as exit_code 0 with rows missing. Now the step's end is checked against the
// allocation: the shard fails, and says why.
func TestExternallyCancelledShardFails(t *testing.T) {
	c := slurmCluster(t)
	m, id := c.plan("slow", 1)
	out := filepath.Join(c.dir, "out-external-cancel")
	cmd := c.execute(m, id, out)
	var res outcome
	done := make(chan struct{})
	go func() { res = run(cmd); close(done) }()
	waitFor(t, "the benchmark step", 60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(out, "benchmark.log"))
		return err == nil && len(shard.AllocationIDs(t.Context(), out)) == 1
	})
	job := shard.AllocationIDs(t.Context(), out)[0]
	time.Sleep(300 * time.Millisecond)
	if b, err := exec.Command("scancel", job).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v %s", err, b)
	}
	<-done
	if res.code == 0 {
		t.Fatalf("execute exit 0 for a shard whose allocation was cancelled: %s", res.stderr)
	}
	if !strings.Contains(res.stderr, "allocation "+job+" ended before the step finished: it was cancelled") {
		t.Errorf("stderr does not say the allocation was cancelled: %q", res.stderr)
	}
	if code, ok := status(t, out); !ok || code == 0 {
		t.Errorf("status.json exit_code %d (present %v)", code, ok)
	}
	c.assertClean(out)
}

func TestEndedEarly(t *testing.T) {
	for state, want := range map[string]string{
		"RUNNING":    "",
		"COMPLETING": "allocation 7 ended before the step finished: it is ending (JobState=COMPLETING)",
		"CANCELLED":  "allocation 7 ended before the step finished: it was cancelled (scancel, or the workflow was cancelled) (JobState=CANCELLED)",
		"TIMEOUT":    "allocation 7 ended before the step finished: it reached its time limit (JobState=TIMEOUT)",
		"NODE_FAIL":  "allocation 7 ended before the step finished: its node failed (JobState=NODE_FAIL)",
		"SUSPENDED":  "allocation 7 ended before the step finished: it is SUSPENDED (JobState=SUSPENDED)",
		"":           "allocation 7 ended before the step finished: Slurm no longer knows the job",
	} {
		err := shard.EndedEarly("7", state)
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("%q: got %v, want %q", state, err, want)
		}
	}
	if got := shard.ParseJobState("JobId=22 JobName=no-shell UserId=root(0) JobState=TIMEOUT Reason=TimeLimit Dependency=(null)"); got != "TIMEOUT" {
		t.Errorf("ParseJobState: %q", got)
	}
}

// Finding 6: two executions of one shard with the same run id shared the allocation token,
// so interrupting one — still waiting for the node the other holds — cancelled the other's
// running job, which then "succeeded" with rows missing. Tokens are now per execution.
func TestSameShardTwiceDoesNotCancelTheOther(t *testing.T) {
	c := slurmCluster(t)
	m, id := c.plan("slow", 1)
	outA, outB := filepath.Join(c.dir, "out-twice-a"), filepath.Join(c.dir, "out-twice-b")
	a, b := c.execute(m, id, outA), c.execute(m, id, outB)
	var ra, rb outcome
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { ra = run(a); close(doneA) }()
	waitFor(t, "A's benchmark", 60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(outA, "benchmark.log"))
		return err == nil
	})
	go func() { rb = run(b); close(doneB) }()
	// the node is A's (--exclusive): B waits for its allocation
	waitFor(t, "B's pending allocation", 30*time.Second, func() bool {
		return len(shard.AllocationIDs(t.Context(), outB)) == 1
	})
	b.Process.Signal(syscall.SIGINT)
	<-doneB
	<-doneA
	if rb.code != 130 {
		t.Errorf("interrupted execute exit %d: %s", rb.code, rb.stderr)
	}
	if ra.code != 0 {
		t.Fatalf("the other execution of the same shard failed (exit %d): %s", ra.code, ra.stderr)
	}
	if got := rows(t, outA); got["ok"] != 3 {
		t.Errorf("the running execution's rows: %v (want 3 ok)", got)
	}
	c.assertClean(outA)
}

// Finding 9: after SIGINT, `opx run --max-parallel 2` still started the next shard (salloc
// and all) once a running one had cleaned up. Now no shard starts after a signal.
func TestRunStartsNoShardAfterSignal(t *testing.T) {
	c := slurmCluster(t)
	dir := filepath.Join(t.TempDir(), "sweep")
	// chunk size 1: one shard per case, three shards; the node is exclusive, so the second
	// waits for the first and the third waits for a slot
	cmd := exec.Command(opxBin, "run", "--out", dir, "--runner", "cluster:opxtest-loopback", "--testlists", "slow",
		"--world-sizes", "1", "--chunk-size", "1", "--platform-config", c.cfg, "--testlist-dir", c.tl, "--max-parallel", "2",
		"--time-minutes", "10", "--cleanup-seconds", "30", "--run-id", "77", "--attempt", "1")
	cmd.Env = c.env()
	var res outcome
	done := make(chan struct{})
	go func() { res = run(cmd); close(done) }()
	waitFor(t, "two shards started", 60*time.Second, func() bool {
		ents, _ := os.ReadDir(filepath.Join(dir, "shards"))
		return len(ents) == 2
	})
	cmd.Process.Signal(syscall.SIGINT)
	<-done
	if res.code != 130 {
		t.Errorf("opx run exit %d after SIGINT: %s", res.code, res.stderr)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "shards"))
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("shards started: %v; none may start after the signal", names)
	}
	if q := c.squeue(); q != "" {
		t.Errorf("jobs left in squeue: %q", q)
	}
	// issue 20: the first Ctrl-C says what happens next, and what finished is summarized
	if !strings.Contains(res.stderr, "opx run: interrupted by SIGINT (Ctrl-C): no new shard starts; cleaning up ") {
		t.Errorf("no word about the cleanup on stderr: %q", res.stderr)
	}
	for _, f := range []string{"summary.json", "report.html", "run.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("an interrupted run wrote no %s", f)
		}
	}
	// issue 32: the end says how to resume (a second Ctrl-C's answer: TestSignalContextIsArmedAtOnce)
	if !strings.Contains(res.stderr, "case(s) still missing or in error: opx run --resume "+dir+"\n") {
		t.Errorf("no resume command: %q", res.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "run.json")); !strings.Contains(string(b), `"interrupted": "interrupted by SIGINT (Ctrl-C)"`) {
		t.Errorf("run.json: %s", b)
	}
}

// A failed plan leaves no run directory behind (opx run created it, planned nothing).
func TestRunFailedPlanLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	r := run(exec.Command(opxBin, "run", "--out", dir, "--testlists", "nosuch"))
	if r.code == 0 || !strings.Contains(r.stderr, "nosuch") {
		t.Fatalf("exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("a failed plan left %s behind", dir)
	}
}

// stageProcs lists the processes whose environment names stage (the ranks of a local shard
// and their harness).
func stageProcs(stage string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains("\x00"+string(b), "\x00OPX_STAGE="+stage+"\x00") {
			found = append(found, filepath.Base(filepath.Dir(p)))
		}
	}
	return found
}

// Finding 8: SIGKILL of a local `opx run`/execute left `opx rank` running; finalize then
// removed the stage under the live rank, which recreated it and wrote rows that never
// reached the output; recover refused the local runner. Now the ranks die with their
// parent, finalize stops and outwaits any rank of the stage before removing it, and
// recover takes local executions.
func TestLocalRanksDieWithTheirParent(t *testing.T) {
	dir := t.TempDir()
	tl := filepath.Join(dir, "testlists")
	os.MkdirAll(tl, 0o755)
	os.WriteFile(filepath.Join(tl, "slow.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 2048, "n": 2048, "k": 2048, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 2048, "n": 2048, "k": 2048, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []}]`), 0o644)
	m := filepath.Join(dir, "m.json")
	r := run(exec.Command(opxBin, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "slow", "--world-sizes", "1",
		"--run-id", "78", "--attempt", "1", "--source-sha", "abc", "--testlist-dir", tl, "--out", m))
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(r.stdout)[1]
	for _, how := range []string{"finalize", "recover"} {
		out := filepath.Join(dir, "artifacts-"+how, "out")
		os.MkdirAll(filepath.Dir(out), 0o755)
		cmd := exec.Command(opxBin, "execute", "--shard", id, "--run-id", "78", "--attempt", "1", "--source-sha", "abc",
			"--runner-name", "t", "--time-minutes", "10", "--cleanup-seconds", "30", "--manifest", m, "--output", out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var stage string
		waitFor(t, "a checkpointed row in the stage", 60*time.Second, func() bool {
			ex, err := manifest.ReadExecution(t.Context(), filepath.Join(out, "execution.json"))
			if err != nil {
				return false
			}
			stage = ex.Stage
			files, _ := filepath.Glob(filepath.Join(stage, "results", "cpu", "*", "*.json"))
			return len(files) > 0 && len(stageProcs(stage)) > 0
		})
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if how == "finalize" {
			r = run(exec.Command(opxBin, "finalize", "--output", out, "--cleanup-seconds", "30"))
		} else {
			r = run(exec.Command(opxBin, "recover", "--artifacts", filepath.Dir(out), "--run-id", "78", "--runner", "local", "--cleanup-seconds", "30"))
		}
		if r.code != 0 {
			t.Fatalf("%s exit %d: %s", how, r.code, r.stderr)
		}
		if p := stageProcs(stage); len(p) > 0 {
			t.Errorf("%s: ranks still running after it returned: %v", how, p)
		}
		// a rank still alive would recreate the stage and write rows there
		time.Sleep(500 * time.Millisecond)
		if _, err := os.Lstat(stage); err == nil {
			t.Errorf("%s: stage %s exists after cleanup", how, stage)
		}
		if got := rows(t, out); got["ok"] < 1 {
			t.Errorf("%s: checkpointed rows lost: %v", how, got)
		}
	}
}

// Issue 17, item 7: scripts/local-slurm.sh must fail when its slurmctld cannot bind its
// port (another Slurm holds it), and neither its start nor its stop may touch the other
// instance: its jobs survive.
func TestLocalSlurmScriptCannotCollide(t *testing.T) {
	c := slurmCluster(t)
	conf, _ := os.ReadFile(c.conf)
	port := regexp.MustCompile(`(?m)^SlurmctldPort=(\d+)$`).FindSubmatch(conf)
	if port == nil {
		t.Fatalf("no SlurmctldPort in %s", c.conf)
	}
	hold := exec.Command("salloc", "--no-shell", "--time=5", "--job-name=other-instance")
	hold.Env = c.env()
	b, err := hold.CombinedOutput()
	if err != nil {
		t.Fatalf("salloc: %v %s", err, b)
	}
	job := string(regexp.MustCompile(`allocation (\d+)`).FindSubmatch(b)[1])
	script, _ := filepath.Abs("../../scripts/local-slurm.sh")
	dir := t.TempDir()
	start := exec.Command(script, "start", dir)
	start.Env = append(os.Environ(), "OPX_SLURMCTLD_PORT="+string(port[1]), "OPX_SLURMD_PORT=1")
	r := run(start)
	if r.code != 1 || !strings.Contains(r.stderr, "slurmctld exited (port "+string(port[1])+" taken by another Slurm?") {
		t.Errorf("start on a taken port: exit %d %q", r.code, r.stderr)
	}
	if r := run(exec.Command(script, "stop", dir)); r.code != 0 {
		t.Errorf("stop: exit %d %q", r.code, r.stderr)
	}
	if !c.jobListed(job) {
		t.Errorf("the other instance's job %s was cancelled", job)
	}
}

// The README's dry run of a cluster shard works as written, on a machine with no cluster
// and no network (issue 20): a transcript test of the lines under "# every command one
// shard would run".
func TestReadmeDryRunOfAClusterShard(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "# every command one shard would run")
	if i < 0 {
		t.Fatal("the README has no dry-run section")
	}
	block := text[i:]
	block = block[:strings.Index(block, "\n\n")]
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(opxBin)+":"+os.Getenv("PATH"))
	r := run(cmd)
	if r.code != 0 || !strings.Contains(r.stdout, "opx execute --dry-run: shard h200-dgxc-") || !strings.Contains(r.stdout, "salloc --no-shell --partition=main") {
		t.Errorf("the README's dry run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// Two `opx run`s started in the same second get directories of their own (issue 20): the
// default .opx-run/<time>-<pid>.
func TestTwoRunsAtOnceDoNotCollide(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	res := make([]outcome, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.Command(opxBin, "run")
			c.Dir = dir
			res[i] = run(c)
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 {
			t.Errorf("run %d: exit %d %s", i, r.code, r.stderr)
		}
	}
	// two run directories, and .opx-run/latest a link to one of them
	runs, _ := filepath.Glob(filepath.Join(dir, ".opx-run", "*-*", "report.html"))
	latest, err := os.Readlink(filepath.Join(dir, ".opx-run", "latest"))
	if len(runs) != 2 || err != nil || (filepath.Dir(runs[0]) != filepath.Join(dir, ".opx-run", latest) && filepath.Dir(runs[1]) != filepath.Join(dir, ".opx-run", latest)) {
		t.Errorf("two runs, reports %v, latest %q %v", runs, latest, err)
	}
}

// Issue 32: with the controller down or SLURM_CONF wrong, a sweep ended after minutes of
// salloc's and squeue's retries (199 s here), blamed "cleanup", and could leave its stage.
// Now the controller is asked first: the shard fails within seconds in phase allocation,
// in the controller's or the file system's words, pointing at opx doctor; nothing is
// allocated or left behind, and the summary, ledger and report are written. A setup
// failure before any output exists (a stage root that is not there) is summarized too.
func TestRunFailsFastWhenSlurmCannotAllocate(t *testing.T) {
	c := slurmCluster(t)
	dead, _ := c.deadConf()
	missing := filepath.Join(t.TempDir(), "no", "slurm.conf")
	badRoot := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(badRoot, []byte(`{"platforms": {"cluster:opxtest-loopback": {"cluster": "opxtest_8x", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": {"container": "none", "partition": "debug", "stage_dir": "/nonexistent/stage-root"}}}}`), 0o644)
	for _, tc := range []struct {
		name, conf, cfg, want string
	}{
		{"controller down", dead, c.cfg, "the Slurm controller does not answer (scontrol ping: Slurmctld(primary) at"},
		{"SLURM_CONF missing", missing, c.cfg, "SLURM_CONF=" + missing + " cannot be read"},
		{"no stage root", c.conf, badRoot, "no writable shared storage root configured for this runner (/nonexistent/stage-root does not exist) (nothing ran; check this host: opx doctor --runner cluster:opxtest-loopback --platform-config " + badRoot + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sweep")
			cmd := exec.Command(opxBin, "run", "--out", dir, "--runner", "cluster:opxtest-loopback", "--testlists", "cpu_smoke",
				"--platform-config", tc.cfg, "--cleanup-seconds", "30")
			cmd.Env = append(os.Environ(), "SLURM_CONF="+tc.conf)
			t0 := time.Now()
			r := run(cmd)
			if took := time.Since(t0); r.code != 1 || took > 30*time.Second || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d after %s: %q", r.code, took, r.stderr)
			}
			for _, f := range []string{"summary.json", "cases.json", "report.html"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("no %s", f)
				}
			}
			if strings.Contains(r.stderr, "artifacts directory") {
				t.Errorf("an internal error reached the user: %q", r.stderr)
			}
			if tc.conf != c.conf {
				st, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "status.json"))
				b, _ := os.ReadFile(st[0])
				if !strings.Contains(string(b), `"phase": "allocation"`) || !strings.Contains(string(b), "opx doctor --runner cluster:opxtest-loopback") {
					t.Errorf("status.json: %s", b)
				}
				if left, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "*")); len(left) != 0 {
					t.Errorf("stages left: %v", left)
				}
			}
			if q := c.squeue(); q != "" {
				t.Errorf("jobs in squeue: %q", q)
			}
		})
	}
}

// Issue 32: SIGTERM always ends opx. The first signal stops the benchmark and starts the
// cleanup, which must confirm the allocation gone; with the controller gone at that
// moment it waits (up to --cleanup-seconds, saying so), and a second signal was answered
// but did not end that wait. Now the second signal ends opx at once (128+n), saying it is
// stopping now; the output directory and the stage are kept as evidence, and finalize,
// once the controller answers, releases the job and collects the rows.
func TestSecondSignalEndsTheCleanupWait(t *testing.T) {
	c := slurmCluster(t)
	conf, kill, revive := c.swappableConf()
	m, id := c.plan("slow", 1)
	out := filepath.Join(c.dir, "out-second-signal")
	cmd := c.execute(m, id, out)
	for i, a := range cmd.Args {
		if a == "--cleanup-seconds" {
			cmd.Args[i+1] = "300"
		}
	}
	cmd.Env = append(c.env(), "SLURM_CONF="+conf)
	var se testenv.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, "a checkpointed row", 60*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*", "results", "cpu", "*", "*.json"))
		return len(found) > 0 && len(shard.AllocationIDs(t.Context(), out)) == 1
	})
	job := shard.AllocationIDs(t.Context(), out)[0]
	kill()
	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "cleanup's refused scancel", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
		return strings.Contains(string(b), "scancel job="+job+" rc=")
	})
	select {
	case err := <-exited:
		t.Fatalf("execute ended before the second signal (%v): %s", err, se.String())
	case <-time.After(time.Second):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	t0 := time.Now()
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("a second SIGTERM did not end the cleanup's wait: %s", se.String())
	}
	code := testenv.ExitCode(t, err)
	if code != 143 || !strings.Contains(se.String(), "opx: stopping now") || !strings.Contains(se.String(), "before allocation "+job+" was confirmed gone; retaining staged evidence") {
		t.Fatalf("exit %d %s after the second signal: %s", code, time.Since(t0), se.String())
	}
	ex, err := manifest.ReadExecution(t.Context(), filepath.Join(out, "execution.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ex.Stage); err != nil {
		t.Fatalf("the stage of an allocation not confirmed gone was removed: %v", err)
	}
	// the controller answers again: finalize releases the job and collects the rows
	revive()
	if r := run(c.opx("finalize", "--output", out, "--cleanup-seconds", "60")); r.code != 0 {
		t.Fatalf("finalize: %d %s", r.code, r.stderr)
	}
	if c.jobListed(job) {
		t.Errorf("job %s survived finalize", job)
	}
	if got := rows(t, out); got["ok"] < 1 {
		t.Errorf("the checkpointed rows were lost: %v", got)
	}
	if _, err := os.Stat(ex.Stage); err == nil {
		t.Errorf("stage %s left after finalize", ex.Stage)
	}
}

// Issue 32: a stage whose execution provably never had a job was kept while the controller
// was down (finalize could not list the user's jobs, so it kept everything). Now, when the
// controller cannot be asked, allocation.log decides: none (execute creates it before
// salloc starts) or salloc's own refusal and no job named means nothing was granted, and
// the stage is collected and removed; a log naming a job, or empty, still keeps it.
func TestFinalizeRemovesAStageNothingWasGrantedFor(t *testing.T) {
	c := slurmCluster(t)
	dead, _ := c.deadConf()
	// salloc's own words when the controller does not answer, from the real salloc
	sa := exec.Command("salloc", "--no-shell", "--time=1", "--job-name=refused")
	sa.Env = append(os.Environ(), "SLURM_CONF="+dead)
	refused, err := sa.CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "salloc: error: Job submit/allocate failed:") {
		t.Fatalf("salloc against no controller: %v %q", err, refused)
	}
	for i, tc := range []struct {
		name string
		log  []byte // nil: no allocation.log
		kept bool
	}{
		{"salloc never started", nil, false},
		{"salloc refused", refused, false},
		{"a job named", append([]byte("salloc: Pending job allocation 999999\n"), refused...), true},
		{"an empty log", []byte{}, true},
		{"a FIFO for a log", []byte("fifo"), true}, // read as a regular file only: never a hang
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stage := c.staged(fmt.Sprintf("out-nothing-granted-%d", i), "opx-"+strings.Repeat("ab", 12)+"-0000cafe", true)
			switch {
			case string(tc.log) == "fifo":
				syscall.Mkfifo(filepath.Join(out, "allocation.log"), 0o644)
			case tc.log != nil:
				os.WriteFile(filepath.Join(out, "allocation.log"), tc.log, 0o644)
			}
			cmd := exec.Command(opxBin, "finalize", "--output", out, "--cleanup-seconds", "2")
			cmd.Env = append(os.Environ(), "SLURM_CONF="+dead)
			r := run(cmd)
			_, serr := os.Stat(stage)
			if tc.kept {
				if r.code != 1 || serr != nil || !strings.Contains(r.stderr, "retaining staged evidence") {
					t.Fatalf("exit %d, stage %v: %q", r.code, serr, r.stderr)
				}
				return
			}
			if r.code != 0 || serr == nil {
				t.Fatalf("exit %d, stage %v (want removed): %q", r.code, serr, r.stderr)
			}
			if got := rows(t, out); got["ok"] != 1 {
				t.Errorf("the stage's row was not collected: %v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(out, "cleanup.log")); !strings.Contains(string(b), "no job to cancel: ") {
				t.Errorf("cleanup.log does not say why: %q", b)
			}
		})
	}
}

// Ctrl-C on the local runner speaks of what it stops — rank processes, not allocations —
// and the interrupted run, like every finished one, leaves no run lock behind.
func TestLocalCtrlCSpeaksOfProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	cmd := exec.Command(opxBin, "run", "--out", dir)
	cmd.Env = append(os.Environ(), "OPERATORX_CPU_REPEAT=200", "TMPDIR="+t.TempDir())
	var res outcome
	done := make(chan struct{})
	go func() { res = run(cmd); close(done) }()
	waitFor(t, "the shard measuring", 60*time.Second, func() bool {
		b, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "fingerprint-before.json"))
		return len(b) == 1
	})
	cmd.Process.Signal(syscall.SIGINT)
	<-done
	if res.code != 130 || !strings.Contains(res.stderr, "no new shard starts; cleaning up 1 running shard(s) (rank processes stopped, rows collected)") ||
		strings.Contains(res.stderr, "allocation") {
		t.Errorf("Ctrl-C on the local runner: exit %d\n%s", res.code, res.stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".opx-run.lock")); !os.IsNotExist(err) {
		t.Errorf("the interrupted run left its lock: %v", err)
	}
	if o := run(exec.Command(opxBin, "run", "--resume", dir)); o.code != 0 {
		t.Fatalf("resume: exit %d %s", o.code, o.stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".opx-run.lock")); !os.IsNotExist(err) {
		t.Errorf("the finished run left its lock: %v", err)
	}
}

// A run that cannot allocate (the Slurm controller does not answer) ends, as a run that
// could not stage does, by checking the host with opx doctor before the resume command.
func TestUnallocatableRunAdvisesDoctor(t *testing.T) {
	c := slurmCluster(t)
	b, err := os.ReadFile(c.conf)
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(t.TempDir(), "slurm.conf")
	os.WriteFile(dead, regexp.MustCompile(`(?m)^SlurmctldPort=\d+`).ReplaceAll(b, []byte("SlurmctldPort=1")), 0o644)
	dir := filepath.Join(t.TempDir(), "sweep")
	cmd := exec.Command(opxBin, "run", "--out", dir, "--runner", "cluster:opxtest-loopback", "--testlists", "quick", "--world-sizes", "1",
		"--platform-config", c.cfg, "--testlist-dir", c.tl)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+dead)
	res := run(cmd)
	want := "1 shard(s) could not start on this host: check it first, opx doctor --runner cluster:opxtest-loopback --platform-config " + c.cfg +
		"; then, to run only the 2 case(s) still missing or in error: opx run --resume " + dir
	if res.code != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("a run whose controller does not answer: exit %d\n%s", res.code, res.stderr)
	}
	// its resume from the same host checks the host before it lists a case or makes an attempt
	cmd = exec.Command(opxBin, "run", "--resume", dir)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+dead)
	res = run(cmd)
	if res.code != 1 || !strings.Contains(res.stderr, "this host cannot ask Slurm for an allocation: the Slurm controller does not answer") ||
		!strings.Contains(res.stderr, "check it first: opx doctor --runner cluster:opxtest-loopback") || strings.Contains(res.stderr, "rerun ") {
		t.Errorf("resume on a host that cannot allocate: exit %d\n%s", res.code, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "operatorx-manifest.attempt-2.json")); err == nil {
		t.Errorf("the refused resume made an attempt")
	}
}
