// Command serve-bench measures opx serve as a team uses it: it writes a history store of
// generated nightly runs (history.Store.Generate) unless the store already holds runs,
// starts the opx binary given as `opx serve` over it on a free port, loads / once (the
// check of the newest run, worked out once per new run), then has -clients clients load
// / and /series?key=... for -seconds, and prints each page's p50, p95 and p99 latency and
// the server's peak RSS (VmHWM). With -add it then adds one more nightly run as opx history
// add does (the run written, then its check kept: history.Store.KeepCheck; -keep=false
// leaves it out, as an older opx's add does) and says how long after the add ended the
// dashboard showed the new run, fresh.
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
	flag.BoolVar(&addOne, "add", false, "then add one more run and time how soon the dashboard shows it")
	flag.BoolVar(&keep, "keep", true, "with -add: keep the new run's check, as opx history add does")
	flag.Parse()
	if err := run(*opx, *db, *runs, *cases, *clusters, *clients, time.Duration(*seconds*float64(time.Second))); err != nil {
		fmt.Fprintln(os.Stderr, "serve-bench:", err)
		os.Exit(1)
	}
}

var addOne, keep bool

func run(opx, db string, runs, cases, clusters, clients int, d time.Duration) error {
	ctx := context.Background()
	names := []string{"h200_dgxc_8x", "mi355x_amds_8x", "b200_nscale_8x", "h100_dsxe_8x", "gb200_nv_4x"}[:min(clusters, 5)]
	s, err := history.Open(ctx, db, true, 0)
	if err != nil {
		return err
	}
	state, err := s.State(ctx)
	if err != nil {
		return err
	}
	if strings.HasPrefix(state, "0/") {
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
	if addOne {
		return addAndWait(ctx, db, base, names, cases)
	}
	return nil
}

// addAndWait adds one more nightly run (a day after the store's newest) as opx history add
// does, and says how soon after the add ended /api/changes showed it, fresh.
func addAndWait(ctx context.Context, db, base string, names []string, cases int) error {
	s, err := history.Open(ctx, db, true, 0)
	if err != nil {
		return err
	}
	defer s.Close()
	at, err := s.NewestAdded(ctx)
	if err != nil {
		return err
	}
	list, err := s.RunList(ctx)
	if err != nil {
		return fmt.Errorf("the store's runs: %w", err)
	}
	if len(list) == 0 {
		return fmt.Errorf("the store holds no run to add a night after")
	}
	from := list[0].At
	for _, r := range list {
		if r.At.After(from) {
			from = r.At
		}
	}
	from = from.AddDate(0, 0, 1)
	t0 := time.Now()
	if err := s.Generate(ctx, history.Generated{Runs: 1, Cases: cases, Clusters: names, Seed: 7, From: from}); err != nil {
		return err
	}
	written := time.Since(t0)
	var kept time.Duration
	if keep {
		t1 := time.Now()
		if _, err := s.KeepCheck(ctx); err != nil {
			return err
		}
		kept = time.Since(t1)
	}
	end := time.Now()
	want := from.UTC().Format("2006-01-02T15:04Z")
	for {
		resp, err := http.Get(base + "/api/changes")
		if err != nil {
			return err
		}
		var doc struct {
			Stale  bool   `json:"stale"`
			Newest string `json:"newest_run"`
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if !doc.Stale && strings.HasSuffix(doc.Newest, want) {
			break
		}
		if time.Since(end) > 10*time.Minute {
			return fmt.Errorf("the dashboard never showed the run of %s (last added %v)", want, at)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("an add of one run (%d cases): written in %.1f s, its check kept in %.1f s (keep %t); the dashboard showed it, fresh, %.2f s after the add ended\n",
		cases*len(names), written.Seconds(), kept.Seconds(), keep, time.Since(end).Seconds())
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
