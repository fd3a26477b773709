package shard

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/semianalysis/opx/internal/safe"
)

// dryJob stands for the job id salloc will grant; dryNCU for the Nsight Compute install
// the search step will find (<root>/<version>/ncu; its root is mounted).
const (
	dryJob = "$JOB"
	dryNCU = "$NCU_ROOT/$NCU_VERSION/ncu"
)

// dryRun prints what execute would do, step by step — the layout and the steps prepare
// planned, which perform carries out — with each command line (shell-quoted) and each
// environment change against execute's own environment. It runs nothing and writes nothing.
func (r *execution) dryRun() error {
	w := r.o.Stdout
	fmt.Fprintf(w, "opx execute --dry-run: shard %s on %s (container mode %s); nothing is run or written\n", r.cell.ID, r.runner.Label, r.entry.Container)
	fmt.Fprintf(w, "\n1. output %s (created 0700; must not exist)\n", r.root)
	fmt.Fprintf(w, "   write %s\n", filepath.Join(r.root, "execution.json"))
	fmt.Fprintf(w, "\n2. stage %s (a new 0700 directory under %s)\n", r.stage, r.base)
	for _, op := range r.layout() {
		switch op.kind {
		case "copy-binary", "copy-harness":
			fmt.Fprintf(w, "   copy %s -> %s\n", op.src, op.dst)
		case "fetch-model":
			fmt.Fprintf(w, "   fetch %s -> %s (a note, not a failure, if it cannot)\n", r.modelConfigURL(op.src), op.dst)
		case "write-testlist":
			fmt.Fprintf(w, "   write %s (%d shapes)\n", op.dst, len(op.shapes))
		case "mkdir":
			fmt.Fprintf(w, "   mkdir %s\n", op.dst)
		}
	}
	if r.runner.Label == "local" {
		fmt.Fprintf(w, "\n3. benchmark (log %s): %d process(es) of this machine, no Slurm, no container\n", filepath.Join(r.root, "benchmark.log"), r.ws)
		fmt.Fprintf(w, "   %s rank   (with SLURM_PROCID, SLURM_LOCALID, RANK and LOCAL_RANK set to 0..%d, SLURM_JOB_ID=%s)\n", filepath.Join(r.stage, "bin", "opx"), r.ws-1, localJob)
		env, _ := r.benchEnv(localJob)
		printEnvDiff(w, r.o.Environ, env)
		fmt.Fprintf(w, "\n4. cleanup, always\n   copy %s -> %s\n   remove %s\n   write %s\n", filepath.Join(r.stage, "results"),
			filepath.Join(r.root, "results"), r.stage, filepath.Join(r.root, "status.json"))
		return nil
	}
	alloc := r.allocStep()
	n := 3
	fmt.Fprintf(w, "\n%d. allocation (log %s); %s is the job id it grants\n   %s\n", n, filepath.Join(r.root, alloc.Log), dryJob, shellJoin(alloc.Argv))
	for _, s := range r.nodeSteps(dryJob, "") {
		n++
		log := filepath.Join(r.root, s.Log)
		switch s.Name {
		case "import":
			fmt.Fprintf(w, "\n%d. import (log %s), skipped when %s is already valid in the cache\n   %s\n", n, log, r.squash(), shellJoin(s.Argv))
			printEnvDiff(w, r.o.Environ, s.Env)
		case "fingerprint-before", "fingerprint-after":
			fmt.Fprintf(w, "\n%d. %s: record the node (log %s; never fails the shard), copied to %s\n   %s\n", n, s.Name, log,
				filepath.Join(r.root, s.Name+".json"), shellJoin(s.Argv))
		case "ncu":
			fmt.Fprintf(w, "\n%d. find Nsight Compute on the node (log %s)\n   %s\n", n, log, shellJoin(s.Argv))
			fmt.Fprintf(w, "   the install it picks is added to --container-mounts and set as OPERATORX_NCU\n")
		case "benchmark":
			if r.searchesNCU() { // built as execute builds it once the search found an install
				s = r.benchStep(dryJob, dryNCU)
			}
			fmt.Fprintf(w, "\n%d. benchmark (log %s)\n   %s\n", n, log, shellJoin(s.Argv))
			printEnvDiff(w, r.o.Environ, s.Env)
		}
	}
	n++
	fmt.Fprintf(w, "\n%d. cleanup, always (log %s)\n", n, filepath.Join(r.root, "cleanup.log"))
	fmt.Fprintf(w, "   scancel %s (and any job whose comment is %s)\n", dryJob, r.token)
	fmt.Fprintf(w, "   squeue -h -u %d -o %%A every 10 ms, growing by half to 1 s, until %s is gone (at most %d s)\n", r.o.Slurm.UID, dryJob, r.o.CleanupSeconds)
	fmt.Fprintf(w, "   copy %s -> %s\n", filepath.Join(r.stage, "results"), filepath.Join(r.root, "results"))
	fmt.Fprintf(w, "   remove %s\n", r.stage)
	fmt.Fprintf(w, "   write %s\n", filepath.Join(r.root, "status.json"))
	return nil
}

// printEnvDiff prints the variables env sets or changes against base, in env's order, then
// the ones it removes.
func printEnvDiff(w io.Writer, base, env []string) {
	before := map[string]string{}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		before[k] = v
	}
	after := map[string]bool{}
	var lines []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		after[k] = true
		if old, ok := before[k]; !ok || old != v {
			lines = append(lines, "+"+k+"="+shellQuote(v))
		}
	}
	var removed []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !after[k] {
			removed = append(removed, "-"+k)
		}
	}
	lines = append(lines, removed...)
	if len(lines) == 0 {
		fmt.Fprintf(w, "   environment: execute's own, unchanged\n")
		return
	}
	fmt.Fprintf(w, "   environment: execute's own, and\n")
	for _, l := range lines {
		fmt.Fprintf(w, "     %s\n", l)
	}
}

// shellJoin renders argv so it can be pasted into a POSIX shell.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if rest := strings.ReplaceAll(s, dryJob, ""); s != "" && rest != s && (rest == "" || safe.ShellWord(rest) == rest) {
		return `"` + s + `"` // the placeholder expands once JOB is set
	}
	return safe.ShellWord(s)
}
