// ab-local runs A/A pull requests for real on this machine's local runner: opx run
// --ab-base and --ab-head of the same harness (opx's cpu backend, the cpu_smoke testlist:
// four measured cases, two unsupported), each side told apart only by a variable nothing
// reads, and counts the runs whose A/B check fails — issue 59's "A/A pull requests check
// fails ≤ 0.5%", measured on the path, not simulated — and every case's verdict.
//
//	go build -o /tmp/opx ./cmd/opx
//	go run ./scripts/ab-local -opx /tmp/opx -runs 200 -max-pairs 8   (about 10 s a run here)
//
// With -head NAME=VALUE the head side sets that variable instead (OPERATORX_CPU_REPEAT=2:
// a head twice as slow, which every run must find).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/semianalysis/opx/internal/ab"
)

func main() {
	opx := flag.String("opx", "opx", "the opx binary")
	runs := flag.Int("runs", 200, "A/A pull requests to run")
	maxPairs := flag.String("max-pairs", "20", "--ab-max-pairs")
	head := flag.String("head", "OPX_AB_SIDE_NAME=head", "the head side's variable (NAME=VALUE)")
	measure := flag.String("measure-s", "0.02", "OPERATORX_MEASURE_S: how long each case is timed a round")
	flag.Parse()
	tmp, err := os.MkdirTemp("", "opx-ab-local-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	failed, errs := 0, 0
	verdicts := map[string]int{}
	t0 := time.Now()
	for i := range *runs {
		dir := filepath.Join(tmp, fmt.Sprint(i))
		cmd := exec.Command(*opx, "run", "--out", dir, "--ab-base", "env=OPX_AB_SIDE_NAME=base", "--ab-head", "env="+*head, "--ab-max-pairs", *maxPairs)
		cmd.Env = append(os.Environ(), "OPERATORX_MEASURE_S="+*measure, "OPERATORX_WARMUP_MIN_S=0.005")
		out, runErr := cmd.CombinedOutput()
		rep, err := ab.ReadReport(context.Background(), filepath.Join(dir, "ab.json"))
		if err != nil {
			errs++
			fmt.Fprintf(os.Stderr, "run %d: %v (%v)\n%s\n", i+1, err, runErr, out)
			continue
		}
		conc, why := rep.Conclusion()
		if conc != "success" {
			failed++
			fmt.Fprintf(os.Stderr, "run %d: the check fails: %s\n", i+1, why)
		}
		for _, c := range rep.Cases {
			if c.Outcome == "measured" {
				verdicts[string(c.Verdict)]++
			} else {
				verdicts["not measured on both sides"]++
			}
		}
		os.RemoveAll(dir)
		if (i+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "%d runs, %d failed, %.0f s\n", i+1, failed, time.Since(t0).Seconds())
		}
	}
	n := *runs - errs
	fmt.Printf("%d A/A pull requests on the local runner (head %s, at most %s pairs, %s s a case a round): the check failed on %d (%.2f%%); %d runs wrote no report\n",
		n, *head, *maxPairs, *measure, failed, 100*float64(failed)/float64(max(1, n)), errs)
	fmt.Printf("case verdicts: %v; %.1f s a run\n", verdicts, time.Since(t0).Seconds()/float64(max(1, *runs)))
}
