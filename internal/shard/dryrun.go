package shard

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/pyjson"
)

// dryJob stands for the job id salloc will grant.
const dryJob = "$JOB"

// dryRun prints what execute would do, step by step, with each command line (shell-quoted)
// and each environment change against execute's own environment. It runs nothing and
// writes nothing.
func (r *runner_) dryRun() error {
	w := r.o.Stdout
	id, _ := r.cell.String("id")
	fmt.Fprintf(w, "opx execute --dry-run: shard %s on %s (container mode %s); nothing is run or written\n", id, r.runner.Label, r.mode)
	fmt.Fprintf(w, "\n1. output %s (created 0700; must not exist)\n", r.root)
	fmt.Fprintf(w, "   write %s\n", filepath.Join(r.root, "execution.json"))
	fmt.Fprintf(w, "\n2. stage %s (a new 0700 directory under %s)\n", r.stage, r.base)
	fmt.Fprintf(w, "   copy %s -> %s\n", r.o.Binary, filepath.Join(r.stage, "bin", "opx"))
	if r.o.HarnessDir != "" {
		fmt.Fprintf(w, "   copy %s -> %s\n", r.o.HarnessDir, filepath.Join(r.stage, "source"))
	}
	if ckpt, _ := r.cell.String("checkpoint"); ckpt != "" {
		fmt.Fprintf(w, "   fetch %s -> %s (a note, not a failure, if it cannot)\n", r.modelConfigURL(ckpt), filepath.Join(r.stage, "models", ckpt, "config.json"))
	}
	lists, err := testlistsOf(r.cell)
	if err != nil {
		return err
	}
	var names []string
	for n := range lists {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "   write %s (%d shapes)\n", filepath.Join(r.stage, "testlists", n+".json"), len(lists[n]))
	}
	fmt.Fprintf(w, "   mkdir %s\n", filepath.Join(r.stage, "results"))
	if r.runner.Label == "local" {
		fmt.Fprintf(w, "\n3. benchmark (log %s): %d process(es) of this machine, no Slurm, no container\n", filepath.Join(r.root, "benchmark.log"), r.ws)
		fmt.Fprintf(w, "   %s rank   (with SLURM_PROCID, SLURM_LOCALID, RANK and LOCAL_RANK set to 0..%d, SLURM_JOB_ID=%s)\n", filepath.Join(r.stage, "bin", "opx"), r.ws-1, localJob)
		env, _ := r.benchEnv(localJob)
		printEnvDiff(w, r.o.Environ, env)
		fmt.Fprintf(w, "\n4. cleanup, always\n   copy %s -> %s\n   remove %s\n   write %s\n", filepath.Join(r.stage, "results"),
			filepath.Join(r.root, "results"), r.stage, filepath.Join(r.root, "status.json"))
		return nil
	}
	alloc, err := r.allocArgv()
	if err != nil {
		return err
	}
	step := 3
	fmt.Fprintf(w, "\n%d. allocation (log %s); %s is the job id it grants\n   %s\n", step, filepath.Join(r.root, "allocation.log"), dryJob, shellJoin(alloc))
	if argv, env := r.importStep(dryJob); argv != nil {
		step++
		fmt.Fprintf(w, "\n%d. import (log %s), skipped when %s is already valid in the cache\n   %s\n", step, filepath.Join(r.root, "import.log"),
			filepath.Join(r.cache(), plan.ImageKey(str(r.cell, "image"), str(r.cell, "digest"), r.imagePlatform)+".sqsh"), shellJoin(argv))
		printEnvDiff(w, r.o.Environ, env)
	}
	mounts := r.stage + ":/opx"
	if r.searchesNCU() {
		step++
		fmt.Fprintf(w, "\n%d. find Nsight Compute on the node (log %s)\n   %s\n", step, filepath.Join(r.root, "ncu.log"), shellJoin(r.ncuSearchArgv(dryJob)))
		fmt.Fprintf(w, "   the install it picks is added to --container-mounts and set as OPERATORX_NCU\n")
	}
	step++
	env, keep := r.benchEnv(dryJob)
	if r.searchesNCU() {
		keep = append(keep, "OPERATORX_NCU")
	}
	fmt.Fprintf(w, "\n%d. benchmark (log %s)\n   %s\n", step, filepath.Join(r.root, "benchmark.log"), shellJoin(r.benchArgv(dryJob, mounts, keep)))
	printEnvDiff(w, r.o.Environ, env)
	step++
	fmt.Fprintf(w, "\n%d. cleanup, always (log %s)\n", step, filepath.Join(r.root, "cleanup.log"))
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
	if s == "" {
		return "''"
	}
	if rest := strings.ReplaceAll(s, dryJob, ""); rest != s && (rest == "" || shellQuote(rest) == rest) {
		return `"` + s + `"` // the placeholder expands once JOB is set
	}
	plain := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_@%+=:,./-", c)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func str(o *pyjson.Object, k string) string { v, _ := o.String(k); return v }
