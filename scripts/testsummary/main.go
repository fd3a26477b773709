// Command testsummary reads `go test -json` on stdin and prints what a person running the
// suite wants to see: each package as it finishes with its counts, every failing test's
// output, and at the end the passed, failed and skipped tests, with each skip's reason.
// It exits 1 when a test or a package failed.
//
//	go test -json ./... | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action, Package, Test, Output string
	Elapsed                       float64
}

type counts struct{ pass, fail, skip int }

func main() {
	out := map[string][]string{} // package/test -> its output, while it runs
	per := map[string]*counts{}
	var total counts
	var skips, failed []string
	pkgFailed := false
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Println(in.Text()) // not an event: a build error, say
			continue
		}
		key := e.Package + " " + e.Test
		c := per[e.Package]
		if c == nil {
			c = &counts{}
			per[e.Package] = c
		}
		switch e.Action {
		case "build-output": // a package that does not compile: its compiler's words
			fmt.Print(e.Output)
		case "output":
			out[key] = append(out[key], e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" { // the package is done
				status := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "--  "}[e.Action]
				if e.Action == "fail" {
					pkgFailed = true
					if c.fail == 0 { // failed outside any test: its output says why
						fmt.Print(strings.Join(out[key], ""))
					}
				}
				fmt.Printf("%s %-55s %6.1fs  %d passed, %d failed, %d skipped\n", status, e.Package, e.Elapsed, c.pass, c.fail, c.skip)
				continue
			}
			if strings.Contains(e.Test, "/") { // subtests count with their test
				if e.Action == "fail" {
					fmt.Print(strings.Join(out[key], ""))
				}
				continue
			}
			switch e.Action {
			case "pass":
				c.pass++
				total.pass++
			case "fail":
				c.fail++
				total.fail++
				failed = append(failed, e.Package+" "+e.Test)
				fmt.Print(strings.Join(out[key], ""))
			case "skip":
				c.skip++
				total.skip++
				skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason(out[key])))
			}
			delete(out, key)
		}
	}
	sort.Strings(skips)
	fmt.Printf("\ntests: %d passed, %d failed, %d skipped\n", total.pass, total.fail, total.skip)
	for _, s := range skips {
		fmt.Println("  skipped: " + s)
	}
	for _, f := range failed {
		fmt.Println("  FAILED: " + f)
	}
	if total.fail > 0 || pkgFailed {
		os.Exit(1)
	}
}

// reason is a skipped test's t.Skip message: its output's lines but the run/skip markers.
func reason(lines []string) string {
	var r []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if i := strings.Index(t, ": "); i > 0 && strings.Contains(t[:i], ".go:") {
			t = t[i+2:]
		}
		r = append(r, t)
	}
	return strings.Join(r, " ")
}
