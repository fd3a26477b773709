package summary

import (
	"testing"
	"unicode/utf8"

	"github.com/semianalysis/opx/internal/pyjson"
)

// FuzzSkimManifest: wherever the full parser (Python's json rules) reads a manifest, the
// one-pass skimmer summarize uses reads the same run id, source SHA, cell ids and case
// counts.
func FuzzSkimManifest(f *testing.F) {
	f.Add([]byte(`{"version": 1, "include": [{"id": "a", "cases": [{"testlist": "t"}, {}]}, {"id": "b", "cases": []}], "source_sha": "s", "run_id": "1"}`))
	f.Add([]byte(`{"include": [1, {"id": 2, "cases": {}}], "run_id": null}`))
	f.Add([]byte(`{"run_id": "a", "run_id": "b", "include": [], "include": [{"id": "x", "id": "y", "cases": [1]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		v, perr := pyjson.Parse(b)
		m, err := skimManifest(b)
		if perr != nil {
			return // the skimmer may reject it too; summarize then reports the full parser's error
		}
		o, ok := v.(*pyjson.Object)
		if !ok {
			return // not a manifest; the skimmer says "expected an object"
		}
		if err != nil {
			t.Fatalf("skimmer rejected a document the parser reads: %v", err)
		}
		run, hasRun := o.String("run_id")
		sha, hasSHA := o.String("source_sha")
		if hasRun != m.hasRun || run != m.runID && hasRun || hasSHA != m.hasSHA || sha != m.sha && hasSHA {
			t.Fatalf("run/sha: parser %q %v %q %v, skimmer %q %v %q %v", run, hasRun, sha, hasSHA, m.runID, m.hasRun, m.sha, m.hasSHA)
		}
		inc, isList := o.Array("include")
		if isList != m.list {
			t.Fatalf("include list: parser %v, skimmer %v", isList, m.list)
		}
		if !isList {
			return
		}
		if len(inc) != len(m.cells) {
			t.Fatalf("cells: parser %d, skimmer %d", len(inc), len(m.cells))
		}
		for i, c := range inc {
			co, _ := c.(*pyjson.Object)
			id, hasID := co.String("id")
			cases, hasCases := co.Array("cases")
			got := m.cells[i]
			if hasID != got.hasID || hasID && id != got.id || hasCases != got.hasCase || hasCases && len(cases) != got.cases {
				t.Fatalf("cell %d: parser %q %v %d %v, skimmer %+v", i, id, hasID, len(cases), hasCases, got)
			}
		}
	})
}
