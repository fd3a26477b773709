// Command serve-bench measures opx serve as a team uses it: it writes a history store of
// generated nightly runs (history.Store.Generate) unless the store already holds runs,
// starts the opx binary given as `opx serve` over it on a free port, loads / once (the
// check of the newest run, worked out once per new run), then has -clients clients load
// / and /series?key=... for -seconds, and prints each page's p50, p95 and p99 latency and
// the server's peak RSS (VmHWM).
//
//	go run ./scripts/serve-bench -opx ./opx -db /tmp/serve.db -runs 10 -cases 2000
//	scripts/bench-serve.sh   (builds opx, then the sizes docs/serve.md publishes)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/history"
)

func main() {
	opx := flag.String("opx", "./opx", "the opx binary")
	db := flag.String("db", "", "the store (SQLite path or postgres:// URL): generated when it holds no run")
	runs := flag.Int("runs", 10, "nightly runs to generate")
	cases := flag.Int("cases", 2000, "cases a cluster to generate")
	clusters := flag.Int("clusters", 2, "clusters to generate (each has every case)")
	clients := flag.Int("clients", 20, "concurrent clients")
	seconds := flag.Float64("seconds", 10, "how long the clients load pages")
	flag.Parse()
	if err := run(*opx, *db, *runs, *cases, *clusters, *clients, time.Duration(*seconds*float64(time.Second))); err != nil {
		fmt.Fprintln(os.Stderr, "serve-bench:", err)
		os.Exit(1)
	}
}

func run(opx, db string, runs, cases, clusters, clients int, d time.Duration) error {
	ctx := context.Background()
	s, err := history.Open(ctx, db, true, 0)
	if err != nil {
		return err
	}
	state, err := s.State(ctx)
	if err != nil {
		return err
	}
	if strings.HasPrefix(state, "0/") {
		names := []string{"h200_dgxc_8x", "mi355x_amds_8x", "b200_nscale_8x", "h100_dsxe_8x", "gb200_nv_4x"}[:min(clusters, 5)]
		t0 := time.Now()
		if err := s.Generate(ctx, history.Generated{Runs: runs, Cases: cases, Clusters: names, StepAt: runs - 1, Seed: 1}); err != nil {
			return err
		}
		fmt.Printf("generated %d runs of %d cases on %d clusters (%d points) in %.1f s\n", runs, cases, len(names), runs*cases*len(names), time.Since(t0).Seconds())
	}
	s.Close()
	cmd, base, err := startServe(opx, db)
	if err != nil {
		return err
	}
	defer cmd.Process.Kill()
	t0 := time.Now()
	resp, err := http.Get(base + "/api/changes")
	if err != nil {
		return err
	}
	var doc struct {
		Changes []struct{ Key string } `json:"changes"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	first := time.Since(t0)
	if len(doc.Changes) == 0 {
		return fmt.Errorf("the store shows no change to open a series of")
	}
	fmt.Printf("first load of the changes (the check of the newest run): %.2f s, %d changes\n", first.Seconds(), len(doc.Changes))
	pages := []string{"/", "/series?key=" + url.QueryEscape(doc.Changes[0].Key)}
	lat, failed := load(base, pages, clients, d)
	for i, p := range pages {
		name := p
		if i == 1 {
			name = "/series"
		}
		l := lat[i]
		slices.Sort(l)
		q := func(f float64) float64 { return l[min(len(l)-1, int(f*float64(len(l))))].Seconds() * 1000 }
		fmt.Printf("%-8s %6d loads, %d clients: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms\n", name, len(l), clients, q(0.5), q(0.95), q(0.99))
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Printf("opx serve peak RSS: %s\n", strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d loads failed", failed)
	}
	return nil
}

// startServe starts opx serve over db on a free port, and reads the address it says.
func startServe(opx, db string) (*exec.Cmd, string, error) {
	cmd := exec.Command(opx, "serve", "--db", db, "--listen", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := regexp.MustCompile(`http://[0-9.:]+`).FindString(sc.Text()); m != "" {
			go io.Copy(io.Discard, stderr)
			return cmd, m, nil
		}
	}
	cmd.Process.Kill()
	return nil, "", fmt.Errorf("opx serve said no address")
}

// load has clients clients load pages in turn for d: each page's latencies, and how many
// loads failed.
func load(base string, pages []string, clients int, d time.Duration) ([][]time.Duration, int) {
	lat := make([][]time.Duration, len(pages))
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	failed := 0
	for c := range clients {
		wg.Go(func() {
			for i := c; time.Now().Before(end); i++ {
				p := i % len(pages)
				t := time.Now()
				resp, err := http.Get(base + pages[p])
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				took := time.Since(t)
				mu.Lock()
				if err != nil || resp.StatusCode != 200 {
					failed++
				} else {
					lat[p] = append(lat[p], took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, failed
}
