package shard_test

// Fault injection on the real local Slurm: opx execute ended at a random moment — while
// its allocation is pending behind a holder, just after salloc started, during the
// benchmark, or while it cleans up — by SIGINT, SIGTERM, SIGHUP or SIGKILL; after SIGKILL
// finalize or recover runs, as the workflow's always-step would. After each run: no job
// of ours in squeue, the stage removed (or kept with the reason logged), and every row
// checkpointed before the signal present in the shard output. The import phase needs
// pyxis and is not reachable here (the import itself is faulted in internal/image).
//
// OPX_FAULT_RUNS sets the number of runs (scripts/fault-inject.sh runs 40), OPX_FAULT_SEED
// the random seed, OPX_FAULT_TABLE a file that gets the table of outcomes.

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// stageRows counts the rows rank 0 has checkpointed into the running shard's stage.
func (c *cluster) stageRows() int {
	found, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*", "results", "cpu", "*", "*.json"))
	n := 0
	for _, p := range found {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n += bytes.Count(b, []byte(`"status": `))
	}
	return n
}

func ourJobs(q string) []string {
	var out []string
	for _, l := range strings.Split(q, "\n") {
		if strings.Contains(l, "opx-") {
			out = append(out, l)
		}
	}
	return out
}

type faultOutcome struct {
	run                   int
	phase, signal, after  string
	code                  int
	landed                string // where the signal found execute
	rowsBefore, rowsAfter int
	leaked                int
	stage                 string
}

func TestFaultInjection(t *testing.T) {
	c := slurmCluster(t)
	runs := 8
	if s := os.Getenv("OPX_FAULT_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("OPX_FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("fault injection: %d runs, seed %d (OPX_FAULT_SEED to replay)", runs, seed)
	rng := rand.New(rand.NewSource(seed))
	slowM, slowID := c.plan("slow", 1)
	quickM, quickID := c.plan("quick", 1)
	// cleanup: the moment the benchmark's last row is in, execute cancels and polls;
	// finalize: execute was SIGKILLed in the benchmark and the finalize run is signalled.
	phases := []string{"pending", "allocation", "benchmark", "cleanup", "finalize"}
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGKILL}
	var table []faultOutcome
	for i := 0; i < runs; i++ {
		// every phase and signal comes up; the order and the delays are random
		phase, sig := phases[i%len(phases)], sigs[(i/len(phases)+i)%len(sigs)]
		if i >= len(phases)*len(sigs) {
			phase, sig = phases[rng.Intn(len(phases))], sigs[rng.Intn(len(sigs))]
		}
		o := faultOutcome{run: i + 1, phase: phase, signal: sig.String(), after: "—"}
		out := filepath.Join(c.dir, "faults", fmt.Sprintf("run-%02d", i+1))
		os.MkdirAll(filepath.Dir(out), 0o755)
		holder := ""
		if phase == "pending" {
			hold := exec.Command("salloc", "--no-shell", "--exclusive", "--gres=gpu:8", "--nodes=1", "--time=5", "--job-name=holder")
			hold.Env = c.env()
			b, err := hold.CombinedOutput()
			m := regexp.MustCompile(`Granted job allocation (\d+)`).FindSubmatch(b)
			if err != nil || m == nil {
				t.Fatalf("holder: %v %s", err, b)
			}
			holder = string(m[1])
		}
		m, id := slowM, slowID
		if phase == "cleanup" {
			m, id = quickM, quickID
		}
		cmd := c.execute(m, id, out)
		so, se := &syncBuf{}, &syncBuf{}
		cmd.Stdout, cmd.Stderr = so, se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		ready := func() bool {
			switch phase {
			case "pending":
				b, _ := os.ReadFile(filepath.Join(out, "allocation.log"))
				return bytes.Contains(b, []byte("Pending job allocation"))
			case "allocation":
				return strings.Contains(so.String(), "phase=allocation")
			case "benchmark", "finalize":
				return c.stageRows() >= 1
			default:
				return c.stageRows() >= 2 // quick has two cases
			}
		}
		deadline := time.Now().Add(90 * time.Second)
	wait:
		for !ready() {
			select {
			case <-exited:
				break wait
			case <-time.After(2 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("run %d: %s never came: %s", i+1, phase, se.String())
			}
		}
		// a random moment inside the phase (cleanup lasts tens of milliseconds)
		time.Sleep(time.Duration(rng.Intn(map[string]int{"pending": 300, "allocation": 40, "benchmark": 500, "cleanup": 30, "finalize": 100}[phase]+1)) * time.Millisecond)
		o.rowsBefore = c.stageRows()
		o.landed = phase
		execSig := sig
		if phase == "finalize" {
			execSig = syscall.SIGKILL
		}
		select {
		case <-exited:
			o.landed = "ended first"
		default:
			_ = cmd.Process.Signal(execSig)
		}
		select {
		case <-exited:
		case <-time.After(120 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("run %d: execute did not end after %s", i+1, sig)
		}
		o.code = 0
		if ee, ok := waitErr.(*exec.ExitError); ok {
			o.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				o.code = 128 + int(ws.Signal())
			}
		}
		if phase == "finalize" && o.landed != "ended first" {
			// the always-step's finalize is itself interrupted, then runs again
			fin := c.opx("finalize", "--output", out, "--cleanup-seconds", "30")
			fin.Stderr = se
			if err := fin.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
			_ = fin.Process.Signal(sig)
			ferr := fin.Wait()
			o.landed = "finalize"
			if fin.ProcessState.ExitCode() == 0 && ferr == nil {
				o.landed = "finalize (ended first)"
			}
			o.after = "finalize again"
			if r := run(c.opx("finalize", "--output", out, "--cleanup-seconds", "30")); r.code != 0 {
				t.Errorf("run %d: finalize after an interrupted finalize: exit %d: %s", i+1, r.code, r.stderr)
			}
		} else if sig == syscall.SIGKILL && o.landed != "ended first" {
			// the workflow's always-step: finalize, or recover on the next attempt
			var r outcome
			if rng.Intn(2) == 0 {
				o.after = "finalize"
				r = run(c.opx("finalize", "--output", out, "--cleanup-seconds", "30"))
			} else {
				o.after = "recover"
				r = run(c.opx("recover", "--artifacts", filepath.Dir(out), "--run-id", "77", "--runner", "cluster:opxtest-loopback",
					"--platform-config", c.cfg, "--cleanup-seconds", "30"))
			}
			if r.code != 0 {
				t.Errorf("run %d: %s exit %d: %s", i+1, o.after, r.code, r.stderr)
			}
		}
		jobs := ourJobs(c.squeue())
		o.leaked = len(jobs)
		if holder != "" {
			exec.Command("scancel", holder).Run()
		}
		if o.leaked > 0 {
			t.Errorf("run %d (%s, %s): allocation leaked: %q", i+1, phase, sig, jobs)
			c.scancelAll()
		}
		waitFor(t, "an empty queue", 30*time.Second, func() bool { return c.squeue() == "" })
		got := rows(t, out)
		o.rowsAfter = got["ok"] + got["unsupported"] + got["error"]
		if o.rowsAfter < o.rowsBefore {
			t.Errorf("run %d (%s, %s): %d rows checkpointed before the signal, %d in the output", i+1, phase, sig, o.rowsBefore, o.rowsAfter)
		}
		stages, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*"))
		o.stage = "removed"
		if len(stages) > 0 {
			logs, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
			if bytes.Contains(logs, []byte("kept")) || strings.Contains(se.String(), "kept") {
				o.stage = "kept (reason logged)"
			} else {
				o.stage = "LEFT"
				t.Errorf("run %d (%s, %s): stage %v left without a reason", i+1, phase, sig, stages)
			}
			for _, s := range stages {
				os.RemoveAll(s)
			}
		}
		os.RemoveAll(out) // recover walks the whole faults tree
		table = append(table, o)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| Run | Phase | Signal | Landed | Exit | Then | Rows before | Rows after | Leaked | Stage |\n| ---: | --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |\n")
	leaked, lost := 0, 0
	for _, o := range table {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %d | %s | %d | %d | %d | %s |\n", o.run, o.phase, o.signal, o.landed, o.code, o.after, o.rowsBefore, o.rowsAfter, o.leaked, o.stage)
		leaked += o.leaked
		if o.rowsAfter < o.rowsBefore {
			lost += o.rowsBefore - o.rowsAfter
		}
	}
	fmt.Fprintf(&b, "\n%d runs (seed %d): %d allocations leaked, %d rows lost\n", len(table), seed, leaked, lost)
	t.Log("\n" + b.String())
	if p := os.Getenv("OPX_FAULT_TABLE"); p != "" {
		os.WriteFile(p, []byte(b.String()), 0o644)
	}
}
