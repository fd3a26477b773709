package summary

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference is what encoding/json says the statuses are (string statuses only).
func reference(b []byte) (statuses []string, hasRows, ok bool) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		return nil, false, false
	}
	raw, present := doc["rows"]
	if !present {
		return nil, false, true
	}
	var rows []map[string]json.RawMessage
	if json.Unmarshal(raw, &rows) != nil {
		return nil, false, false
	}
	for _, r := range rows {
		var s string
		if json.Unmarshal(r["status"], &s) != nil {
			return nil, false, false
		}
		statuses = append(statuses, s)
	}
	return statuses, true, true
}

func skim(b []byte) ([]string, bool, error) {
	var got []string
	has, err := skimStatuses(b, func(s string) error { got = append(got, s); return nil })
	return got, has, err
}

func TestSkimStatuses(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string
		rows bool
		bad  bool
	}{
		{`{"schema_version": "1", "run": {"env": {"A": "}]"}}, "rows": [{"op": {"args": [1, 2.5e3, -1]}, "status": "ok"}, {"status": "error", "message": "x \"quoted\" ]"}]}`, []string{"ok", "error"}, true, false},
		{`{"rows": []}`, nil, true, false},
		{`{"schema_version": "1"}`, nil, false, false},
		{`{"rows": [{"status": "ok"}`, nil, false, true},
		{`{"rows": [{"status": "ok"}]} trailing`, nil, false, true},
		{`{"rows": [{"metrics": {}}]}`, nil, false, true},
		{`[1, 2]`, nil, false, true},
	} {
		got, has, err := skim([]byte(tc.doc))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: no error", tc.doc)
			}
			continue
		}
		if err != nil || has != tc.rows || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q %v %v", tc.doc, got, has, err)
		}
	}
}

// FuzzSkimStatuses: wherever encoding/json reads a results document, the skimmer reads
// the same statuses.
func FuzzSkimStatuses(f *testing.F) {
	f.Add([]byte(`{"rows": [{"status": "ok"}, {"status": "unsupported", "metrics": {}}]}`))
	f.Add([]byte(`{"run": {"id": "x"}, "rows": [{"op": {"type": "gemm", "args": {"m": [1, {"a": null}]}}, "status": "error", "message": "\\u00e9"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return // the seed cannot read it either (read_text decodes UTF-8)
		}
		want, wantRows, ok := reference(b)
		got, has, err := skim(b)
		if !ok {
			return // not a document encoding/json reads; the skimmer may reject or read it
		}
		if err != nil {
			t.Fatalf("skimmer rejected a valid document: %v", err)
		}
		if has != wantRows || !slices.Equal(got, want) {
			t.Fatalf("skimmer %q %v, encoding/json %q %v", got, has, want, wantRows)
		}
	})
}

// A repeated "rows" key counts with its last value (Python's json and encoding/json agree).
func TestSkimRepeatedRows(t *testing.T) {
	for doc, want := range map[string]string{
		`{"rows": [{"status": "ok"}], "rows": [{"status": "error"}, {"status": "ok"}]}`: "error,ok",
		`{"rows": [{"status": "ok"}], "rows": 5}`:                                       "no rows",
		`{"rows": 5, "rows": [{"status": "unsupported"}]}`:                              "unsupported",
	} {
		var got []string
		has, err := skimStatuses([]byte(doc), func(s string) error { got = append(got, s); return nil })
		res := strings.Join(got, ",")
		if !has {
			res = "no rows"
		}
		if err != nil || res != want {
			t.Errorf("%s: %q %v, want %q", doc, res, err, want)
		}
	}
}
