package synth

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The real history committed under internal/history/testdata/real reads whole: every
// results file, in the order they were measured, each point positive.
func TestReadRealHistory(t *testing.T) {
	files, err := ReadReal("../testdata/real/django-asv.tsv.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3239 {
		t.Fatalf("%d results files, want 3239", len(files))
	}
	points, spread := 0, 0
	for i, f := range files {
		if i > 0 && f.At.Before(files[i-1].At) {
			t.Fatalf("file %d (%s) measured before the one before it", i, f.Commit)
		}
		for _, p := range f.Points {
			points++
			if p.Spread {
				spread++
				if !(p.Lo <= p.V && p.V <= p.Hi) {
					t.Errorf("%s %s %s: %g outside its interval [%g, %g]", f.Commit, f.Env, p.Benchmark, p.V, p.Lo, p.Hi)
				}
			}
		}
	}
	obs, at := RealSeries(files)
	if got := len(obs[RealKey{"py3.12", "query_benchmarks.query_all.benchmark.QueryAll.time_query_all"}]); got < 800 {
		t.Errorf("py3.12 query_all: %d points", got)
	}
	for k, s := range obs {
		if len(at[k]) != len(s) {
			t.Fatalf("%v: %d points, %d file indexes", k, len(s), len(at[k]))
		}
	}
	if points < 170_000 || spread < points/2 {
		t.Errorf("%d points, %d with an interval", points, spread)
	}
}

// A file that is not the format is one line naming the file, the line and what is wrong.
func TestReadRealBadInput(t *testing.T) {
	head := "benchmarks\t\t\ta.x\tb.y\n"
	for body, want := range map[string]string{
		"1661323199070\tabc\tpy3.10\t0.5\n":                  "t.gz:2: 4 columns, the header names 2 benchmarks",
		"16613x\tabc\tpy3.10\t0.5\t\n":                       `t.gz:2: the time "16613x" is not milliseconds`,
		"1661323199070\tabc\tpy3.10\t0.5,0.9\t\n":            `t.gz:2: a.x: "0.5,0.9" is neither a value nor a value and its interval`,
		"1661323199070\tabc\tpy3.10\t-1\t\n":                 `t.gz:2: a.x: "-1" is not positive numbers`,
		"1661323199070\tabc\tpy3.10\t\tNaN,0.9,1.1\n":        `t.gz:2: b.y: "NaN,0.9,1.1" is not positive numbers`,
		"1661323199070\tabc\tpy3.10\t0.5\t0.2,0.9,1\n" + "x": "t.gz:3: 1 columns, the header names 2 benchmarks",
	} {
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		z.Write([]byte(head + body))
		z.Close()
		path := filepath.Join(t.TempDir(), "t.gz")
		os.WriteFile(path, buf.Bytes(), 0o644)
		_, err := ReadReal(path)
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
	path := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(path, []byte(head), 0o644)
	if _, err := ReadReal(path); err == nil || !strings.Contains(err.Error(), "plain: gzip: invalid header") {
		t.Errorf("not gzip: %v", err)
	}
}
