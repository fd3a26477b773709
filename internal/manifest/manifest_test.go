package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
)

// FuzzReadExecution: execution.json comes back in artifacts from compute hosts; any bytes
// give an execution or a one-line error naming the file, never a panic.
func FuzzReadExecution(f *testing.F) {
	f.Add([]byte(`{"cell": {"id": "a", "runner": "local"}, "source_sha": "s", "run_id": "1", "attempt": "1", "stage": "/tmp/x"}`))
	f.Add([]byte(`{"cell": [], "run_id": 1}`))
	f.Add([]byte(`[`))
	p := filepath.Join(f.TempDir(), "execution.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		os.WriteFile(p, data, 0o644)
		ex, err := ReadExecution(t.Context(), p)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q: want one line naming the file", err)
			}
			return
		}
		if ex.Cell == nil || ex.ShardID() == "" && ex.Cell.Raw == nil {
			t.Fatal("an execution without a cell")
		}
	})
}

const doc = `{"version": 1, "excluded_shapes": 0, "include": [
 {"id": "h100-dsxe-0123456789abcdef", "runner": "cluster:h100-dsxe", "cluster": "h100_dgxc_8x",
  "backends": ["vllm", "sglang"], "world_size": 2, "gpus_per_node": 8, "nodes": 1,
  "image": "vllm/vllm-openai:v1", "digest": "sha256:aa", "image_platform": "linux/amd64",
  "env": {"A": "1", "B": "x y"}, "parallel": {"tp": 2}, "mode": "counters",
  "cases": [{"testlist": "gemm_perf", "shape": {"type": "gemm", "args": {"m": 1}}},
            {"testlist": "attention_perf", "shape": {"type": "attention", "args": {"b": 2}}},
            {"testlist": "gemm_perf", "shape": {"type": "gemm", "args": {"m": 2}}}]},
 {"id": "local-0000000000000000", "runner": "local", "cases": []}],
 "source_sha": "abc", "run_id": "7", "attempt": "1"}`

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "operatorx-manifest.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A manifest's cells come back typed, their cases in order and grouped by testlist; an
// outline has the same cells with the shapes left as their JSON text.
func TestLoad(t *testing.T) {
	p := write(t, doc)
	m, err := Load(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := m.Cell("h100-dsxe-0123456789abcdef")
	if !ok || m.RunID != "7" || m.SourceSHA != "abc" || len(m.Cells) != 2 {
		t.Fatalf("manifest %+v", m)
	}
	if c.Runner != "cluster:h100-dsxe" || c.WorldSize != 2 || !c.HasWorldSize || c.GPUsPerNode != 8 || c.Mode != "counters" ||
		strings.Join(c.Backends, ",") != "vllm,sglang" || len(c.Env) != 2 || c.Env[1].Value != "x y" {
		t.Fatalf("cell %+v", c)
	}
	names, shapes, err := c.Testlists()
	if err != nil || strings.Join(names, ",") != "attention_perf,gemm_perf" || len(shapes["gemm_perf"]) != 2 {
		t.Fatalf("testlists %v %v %v", names, shapes, err)
	}
	if got := string(pyjson.MustMarshal(shapes["gemm_perf"][1], pyjson.Default)); got != `{"type": "gemm", "args": {"m": 2}}` {
		t.Fatalf("shape %s", got)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if l := m.Cells[1]; l.Mode != "timing" || l.HasWorldSize || len(l.Cases) != 0 {
		t.Fatalf("local cell %+v", l)
	}
	o, err := LoadOutline(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	oc := o.Cells[0]
	// each case its text, compact (pyjson.Detach): the same value in less room
	if len(oc.Cases) != 3 || string(oc.Cases[1].Text) != `{"testlist":"attention_perf","shape":{"type":"attention","args":{"b":2}}}` ||
		oc.Cases[1].Testlist != "" || oc.Cases[1].Shape != nil {
		t.Fatalf("outline cases %+v", oc.Cases)
	}
}

// What is not a manifest, or a cell that could not run, is one line saying what is wrong.
func TestBadManifests(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`[]`, "a manifest needs string run_id and source_sha and an include list"},
		{`{"run_id": "1", "source_sha": "s", "include": [{"id": 3, "cases": []}]}`, "include[0] needs a string id and a cases list"},
		{`{"run_id": "1", "source_sha": "s", "include": [{"id": "x"}]}`, "include[0] needs a string id and a cases list"},
		{`{"run_id": "1", `, "invalid JSON"},
	} {
		_, err := Load(context.Background(), write(t, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", c.text, err, c.want)
		}
	}
	for _, c := range []struct{ cell, want string }{
		{`{"cluster": "../x", "backends": ["a"]}`, "has cluster '../x'"},
		{`{"cluster": "c", "backends": []}`, "needs a non-empty backends list"},
		{`{"cluster": "c", "backends": ["a,b"]}`, "has backend 'a,b'"},
		{`{"cluster": "c", "backends": ["a"], "mode": "fast"}`, "has mode 'fast'"},
		{`{"cluster": "c", "backends": ["a"], "env": {"A=B": "1"}}`, "env member 'A=B'"},
		{`{"cluster": "c", "backends": ["a"], "image": "a b"}`, "has image 'a b'"},
		{`{"cluster": "c", "backends": ["a"], "import_uri": "file:///x"}`, "it must be docker://"},
		{`{"cluster": "c", "backends": ["a"], "exclude_nodes": ["gpu-1,gpu-2"]}`, "has exclude_nodes entry 'gpu-1,gpu-2'"},
		{`{"cluster": "c", "backends": ["a"], "exclude_nodes": "gpu-1"}`, "exclude_nodes must be a list of node names"},
	} {
		v, _ := pyjson.Parse([]byte(c.cell))
		err := DecodeCell(v.(*pyjson.Object)).Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.cell, err, c.want)
		}
	}
	v, _ := pyjson.Parse([]byte(`{"cases": [{"testlist": "../etc", "shape": {}}]}`))
	if _, _, err := DecodeCell(v.(*pyjson.Object)).Testlists(); err == nil || !strings.Contains(err.Error(), "invalid testlist '../etc'") {
		t.Errorf("testlist ../etc: %v", err)
	}
}

// The identifiers derived from a cell are the seed's formulas (docs/compat-spec.md §3.2, §5.7, §6);
// the values were computed with Python's hashlib.
func TestIdentifiers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ImageKey("a", "sha256:b", "linux/amd64"), "2ba82760f662b72f342be2d56d3a10ac2799f5c66f24b0d56fdd10ee05038866"},
		{ImageKey("a", "sha256:b", "linux/arm64"), "25411da7c390cae4a3c6624fc0d3495fb21a166ef913befec9170e0a41af6790"},
		{QueueToken("1", "1", "x"), "09148fb73030ec57f3aae26cc72495b8"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	if p := MasterPort("123", "x"); p != 30152 {
		t.Errorf("MasterPort = %d, want 30152", p)
	}
	if !ValidDigest("sha256:"+strings.Repeat("a", 64)) || ValidDigest("sha256:"+strings.Repeat("A", 64)) || ValidDigest("sha256:ab") {
		t.Error("ValidDigest")
	}
}

// An execution's head keeps its facts and how many cases it lists, and none of the file's
// text: the buffer it was read into is reused by the next reading, which must not change
// it (the run reader holds every head of a run at once).
func TestReadExecutionHeadHoldsNoneOfItsText(t *testing.T) {
	dir := t.TempDir()
	write := func(name, id string, cases int) string {
		var cs []string
		for i := range cases {
			cs = append(cs, fmt.Sprintf(`{"testlist": "t", "shape": {"type": "gemm", "args": {"m": %d}}}`, i))
		}
		p := filepath.Join(dir, name)
		text := fmt.Sprintf(`{"cell": {"id": %q, "runner": "cluster:x", "cluster": "x_8x", "backends": ["vllm"], "world_size": 1,
		  "gpus_per_node": 8, "env": {"A": {"deep": [%q]}}, "engine_args": {"k": {"v": %q}}, "cases": [%s]},
		  "source_sha": "abc", "run_id": %q, "attempt": "1", "stage": "/s", "peaks": {"bf16": {"tflops": {"v": %q}}}}`,
			id, id, id, strings.Join(cs, ", "), id, id)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first, err := ReadExecutionHead(context.Background(), write("a.json", "aaaa", 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadExecutionHead(context.Background(), write("b.json", "bbbb", 40)); err != nil {
		t.Fatal(err)
	}
	c := first.Cell
	got := fmt.Sprintf("%s %s %d %v %s %s %s", c.ID, first.RunID, c.NumCases, c.Cases == nil, written(t, c.Raw), written(t, c.EngineArgs), written(t, first.Peaks))
	want := `aaaa aaaa 3 true {"backends": ["vllm"], "cluster": "x_8x", "engine_args": {"k": {"v": "aaaa"}}, "env": {"A": {"deep": ["aaaa"]}}, "gpus_per_node": 8, "id": "aaaa", "runner": "cluster:x", "world_size": 1} {"k": {"v": "aaaa"}} {"bf16": {"tflops": {"v": "aaaa"}}}`
	if got != want {
		t.Fatalf("the first head after a second was read:\n%s\nwant\n%s", got, want)
	}
}

// written is v as compact JSON, the text an outline left unread (pyjson.Raw) parsed.
func written(t *testing.T, v pyjson.Value) string {
	t.Helper()
	return string(pyjson.MustMarshal(pyjson.Resolve(v), pyjson.Identity))
}

// An execution's head is ReadExecution's reading without the cases: the same facts and
// count, the same cell members but "cases", and the same error, wherever it lies.
func TestReadExecutionHeadIsReadExecution(t *testing.T) {
	cell := `{"id": "c", "runner": "local", "backends": ["torch", "cpu"], "world_size": 1, "cases": [{"testlist": "t"}, 7, [1]], "mode": "timing"}`
	docs := []string{
		`{"cell": ` + cell + `, "source_sha": "s", "run_id": "r", "attempt": "2", "stage": "/x"}`,
		// repeated keys: the last is the one, for the document's, the cell's and its cases
		`{"cell": {"id": "gone", "runner": "local", "cases": [1, 2, 3, 4]}, "cell": {"id": "c", "cases": [1], "runner": "local", "cases": {}}, "source_sha": "s", "run_id": "r", "attempt": "1"}`,
		`{"cell": {"id": "a", "runner": "local", "cases": [1, 2]}, "cell": {"id": "c", "runner": "local"}, "source_sha": "s", "run_id": "r", "attempt": "1"}`,
		`{"cell": {"id": "a", "runner": "local", "cases": [1, 2]}, "cell": 3, "source_sha": "s", "run_id": "r", "attempt": "1"}`,
		"\n {\"cell\": {\"cases\" : [ ] , \"id\": \"c\", \"runner\": \"l\"}, \"source_sha\": \"s\", \"run_id\": \"r\", \"attempt\": \"1\", \"peaks\": {\"bf16_tflops\": 1}} \n",
		// what is no execution, and a syntax error wherever it lies
		`[1]`, `"x"`, `{"cell": 1}`, `{"cell": {"id": 1, "runner": "local", "cases": []}, "source_sha": "s", "run_id": "r", "attempt": "1"}`,
		`{"cell": ` + cell + `, "source_sha": "s", "run_id": "r"}`,
		`{"cell": {"id": "c", "cases": [1, }, "source_sha": "s"}`, `{"cell": {"id": "c", "cases": [1]}, "x": }`, `{"cell": {"id": "c"`,
		"\xef\xbb\xbf{}", `{"cell": {"id": "c", "runner": "l", "cases": ["\xff"]}, "source_sha": "s", "run_id": "r", "attempt": "1"}`,
		`{"source_sha": "s"} x`,
	}
	dir := t.TempDir()
	for i, doc := range docs {
		p := filepath.Join(dir, fmt.Sprintf("e%d.json", i))
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		whole, werr := ReadExecution(context.Background(), p)
		head, herr := ReadExecutionHead(context.Background(), p)
		if (werr == nil) != (herr == nil) || werr != nil && werr.Error() != herr.Error() {
			t.Errorf("%s:\nReadExecution: %v\nReadExecutionHead: %v", doc, werr, herr)
			continue
		}
		if werr != nil {
			continue
		}
		w, h := whole.Cell, head.Cell
		w.Raw.Delete("cases")
		if h.NumCases != w.NumCases || h.Cases != nil || h.ID != w.ID || h.Runner != w.Runner || h.Mode != w.Mode ||
			strings.Join(h.Backends, ",") != strings.Join(w.Backends, ",") || written(t, h.Raw) != written(t, w.Raw) ||
			head.RunID != whole.RunID || head.SourceSHA != whole.SourceSHA || head.Attempt != whole.Attempt || head.Stage != whole.Stage ||
			(head.Peaks == nil) != (whole.Peaks == nil) {
			t.Errorf("%s:\nhead %+v %+v\nwant %+v %+v", doc, head, h, whole, w)
		}
	}
}

// Narrow cuts a cell to some of its cases: every other member kept in its order, the cases
// those asked for in the order asked, the cell itself untouched.
func TestNarrow(t *testing.T) {
	raw, err := pyjson.Parse([]byte(`{"id": "c1", "cases": [{"m": 1}, {"m": 2}, {"m": 3}], "queue-token": "t", "backends": ["vllm"]}`))
	if err != nil {
		t.Fatal(err)
	}
	o := raw.(*pyjson.Object)
	before, _ := pyjson.Marshal(o, pyjson.Default)
	got, _ := pyjson.Marshal(Narrow(o, []int{2, 0}), pyjson.Default)
	if want := `{"id": "c1", "cases": [{"m": 3}, {"m": 1}], "queue-token": "t", "backends": ["vllm"]}`; string(got) != want {
		t.Errorf("narrowed:\n%s\nwant\n%s", got, want)
	}
	if after, _ := pyjson.Marshal(o, pyjson.Default); string(after) != string(before) {
		t.Errorf("the cell changed: %s", after)
	}
}
