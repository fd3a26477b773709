package manifest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
)

// An index is Load's reading without the cases: the same cells and facts, the same
// errors for the same bytes, and each cell's cases read back from the file, alone, are
// the cases Load has.
func TestLoadIndexIsLoad(t *testing.T) {
	docs := []string{
		doc,
		// repeated keys: the last value is the one, for the document's members and a cell's
		`{"run_id": "1", "source_sha": "s", "include": [{"id": "gone", "cases": []}], "include": [
		  {"id": "a", "cases": [1], "runner": "local", "cases": [{"testlist": "t", "shape": {"args": {"m": 1}}}, {"testlist": "u"}]}],
		  "run_id": "2"}`,
		"{\"run_id\":\"1\",\"source_sha\":\"s\",\"include\":[{\"id\":\"a\",\"cases\":[ {\"testlist\": \"t\",\n \"shape\": {\"args\": {\"s\": \"\\u00e9\"}}} ] } ]}\n",
		"{\"run_id\":\"1\",\"source_sha\":\"s\",\"include\":[{\"id\":\"a\",\"cases\":[\r\n\t{\"testlist\": \"t\"} ,\n\t\"x\"\t,[1, 2]\r\n,3\n]}]}",
		// what is not a manifest, said as Load says it, and a syntax error wherever it lies
		`[]`,
		`{"run_id": "1", "source_sha": "s", "include": {}}`,
		`{"run_id": 1, "source_sha": "s", "include": []}`,
		`{"run_id": "1", "source_sha": "s", "include": [{"id": "a", "cases": []}, 7, {"id": 3, "cases": []}]}`,
		`{"run_id": "1", "source_sha": "s", "include": [{"id": "a", "cases": {}}]}`,
		`{"run_id": "1", "source_sha": "s", "include": [{"id": "a", "cases": []}, 7], "x": [1,]}`,
		`{"run_id": "1", "source_sha": "s", "include": [{"id": "a", "cases": [{"testlist": "t"}}]}`,
		`{"run_id": "1", `,
		"\xef\xbb\xbf{}",
		`{"run_id": "1", "source_sha": "s", "include": []} x`,
	}
	for _, text := range docs {
		p := write(t, text)
		whole, werr := Load(context.Background(), p)
		idx, ierr := LoadIndex(context.Background(), p)
		if idx != nil {
			defer idx.Close()
		}
		if (werr == nil) != (ierr == nil) || werr != nil && werr.Error() != ierr.Error() {
			t.Errorf("%s:\nLoad: %v\nLoadIndex: %v", text, werr, ierr)
			continue
		}
		if werr != nil {
			continue
		}
		if idx.RunID != whole.RunID || idx.SourceSHA != whole.SourceSHA || len(idx.Cells) != len(whole.Cells) {
			t.Fatalf("%s: index %+v, want %+v", text, idx, whole)
		}
		for i, wc := range whole.Cells {
			ic := idx.Cells[i]
			if ic.ID != wc.ID || ic.Runner != wc.Runner || ic.Mode != wc.Mode || ic.WorldSize != wc.WorldSize ||
				strings.Join(ic.Backends, ",") != strings.Join(wc.Backends, ",") || ic.NumCases != len(wc.Cases) || ic.Cases != nil {
				t.Errorf("cell %d: %+v, want %+v", i, ic, wc)
			}
			cases, _, err := ic.ReadCases(context.Background(), nil)
			if err != nil || len(cases) != len(wc.Cases) {
				t.Fatalf("cell %d: %d cases, %v; want %d", i, len(cases), err, len(wc.Cases))
			}
			for j, c := range cases {
				if strings.TrimSpace(string(c.Text)) != string(c.Text) {
					t.Errorf("cell %d case %d: %q has the whitespace around it", i, j, c.Text)
				}
				v, err := pyjson.Parse(c.Text)
				want, _ := wc.Raw.Array("cases")
				if err != nil || string(pyjson.MustMarshal(v, pyjson.Default)) != string(pyjson.MustMarshal(want[j], pyjson.Default)) {
					t.Errorf("cell %d case %d: %s (%v)", i, j, c.Text, err)
				}
			}
		}
	}
}

// A manifest rewritten in place between its index and the reading of a cell's cases is
// said to have changed, never read as other cases; one replaced by another file (planned
// again into its path) is still the one indexed.
func TestReadCasesRefusesAChangedFile(t *testing.T) {
	p := write(t, doc)
	m, err := LoadIndex(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	other := p + ".new"
	if err := os.WriteFile(other, []byte(strings.Replace(doc, `"m": 1`, `"m": 9`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, p); err != nil {
		t.Fatal(err)
	}
	if cases, _, err := m.Cells[0].ReadCases(context.Background(), nil); err != nil || !strings.Contains(string(cases[0].Text), `"m": 1`) {
		t.Fatalf("after a rename over it: %v %v", cases, err)
	}
	m.Close()
	if m, err = LoadIndex(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, text := range []string{strings.Replace(doc, `"m": 1`, `"m": 7`, 1), doc[:len(doc)/2]} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.Cells[0].ReadCases(context.Background(), nil); err == nil || !strings.Contains(err.Error(), p+": changed while it was read") {
			t.Errorf("after a rewrite: %v", err)
		}
	}
}
