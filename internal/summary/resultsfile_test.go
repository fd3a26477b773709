package summary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A results file is read as the seed reads it (json.load, then its checks): the
// document's own syntax error comes before what makes it no results file, a repeated key
// keeps its last value, and a status that is no string is shown as Python's str() shows it.
func TestReadResultsAsOperatorXCIDoes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ doc, want string }{
		{`[1]`, "r.json: not a results file: a results file is a JSON object"},
		{`{"rows": 3}`, `r.json: results file has no "rows" list`},
		{`{"run": {}}`, `r.json: results file has no "rows" list`},
		{`{"rows": [1, {"status": "ok"}]}`, "r.json: not a results file: rows[0] is integer, not an object"},
		{`{"rows": [{"op": {}}]}`, `r.json: not a results file: rows[0] has no "status"`},
		// the first row is no object, but the document is not JSON: that is what is said
		{`{"rows": [1, {"status": "ok"}], "run": {"id": }}`, "r.json: not a results file: invalid JSON at line 1 column 47: expecting value"},
		// the last "rows" is the one read: the first one's fault is gone
		{`{"rows": [1], "rows": [{"status": "ok"}]}`, "ok"},
		{`{"rows": [{"status": "ok"}], "rows": 1}`, `r.json: results file has no "rows" list`},
		{`{"rows": [{"status": true}, {"status": null}, {"status": 1.0}, {"status": ["x"]}]}`, `True None 1.0 ["x"]`},
		{`{"rows": [{"status": "ok", "status": "error"}]}`, "error"},
	} {
		path := filepath.Join(dir, "r.json")
		if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Statuses(t.Context(), path)
		say := strings.Join(got, " ")
		if err != nil {
			say = strings.TrimPrefix(err.Error(), dir+"/")
		}
		if say != c.want {
			t.Errorf("%s: %s, want %s", c.doc, say, c.want)
		}
	}
	// and a row whole: op and metrics built, the run's provenance taken, last values kept
	path := filepath.Join(dir, "r.json")
	doc := `{"run": {"id": "a", "hostname": "n1", "operatorx_version": "0.3", "software": {"torch": "2.9"}},
	  "rows": [{"op": {"type": "gemm", "args": {"n": 2}, "args": {"m": 1}, "backend": "torch", "type": "moe"}, "testlist": "t",
	  "metrics": {"latency_us": 2.5}, "status": "ok", "message": 5}]}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadResults(t.Context(), path, WholeRows)
	if err != nil {
		t.Fatal(err)
	}
	r := f.Rows[0]
	if f.Run.ID != "a" || !f.Run.HasID || f.Run.Hostname != "n1" || f.Run.Version != "0.3" || len(f.Run.Software) != 1 ||
		r.OpType != "moe" || r.Backend != "torch" || r.Testlist != "t" || r.Message != "" || r.Status != "ok" ||
		r.Args.Label() != "m=1" || r.Args.Text() != `{"m": 1}` || r.ArgsKey != `{"m": 1}` || len(r.Metrics) != 1 || r.Metrics[0].Name != "latency_us" {
		t.Errorf("read %+v, row %+v", f.Run, r)
	}
}
