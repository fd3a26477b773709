package recipes

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
)

func load(t testing.TB, doc string) (*Book, error) {
	return Load(catalog.Source{FS: fstest.MapFS{"r.json": {Data: []byte(doc)}}, Path: "r.json", Name: "r.json"})
}

func TestFindPrefersSplit(t *testing.T) {
	b, err := load(t, `{"recipes": [
	  {"framework": "vllm", "hardware": "b200", "checkpoint": "o/m", "recipe": "a.yaml:tp8", "image": "i:8", "engine_args": {"tensor-parallel-size": 8}},
	  {"framework": "vllm", "hardware": "b200", "checkpoint": "o/m", "recipe": "a.yaml:dp8ep", "image": "i:8", "engine_args": {"data-parallel-size": 8, "enable-expert-parallel": true}}],
	  "default_images": [{"backend": "vllm", "hardware": "b200", "image": "d:1"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	split := Normalize(pyjson.Obj("dp", 8, "ep", 8))
	m := b.Find("vllm", "b200", []string{"x/y", "o/m"}, split, []string{"tp", "dp", "ep"})
	if m == nil || m.Recipe != "a.yaml:dp8ep" || m.Match != "split" || m.Checkpoint != "o/m" {
		t.Fatalf("%+v", m)
	}
	m = b.Find("vllm", "b200", []string{"o/m"}, Normalize(pyjson.Obj("tp", 2)), []string{"tp"})
	if m == nil || m.Recipe != "a.yaml:tp8" || m.Match != "checkpoint" {
		t.Fatalf("%+v", m)
	}
	if b.Find("sglang", "b200", []string{"o/m"}, split, Axes) != nil || b.Find("vllm", "h200", []string{"o/m"}, split, Axes) != nil {
		t.Fatal("matched the wrong framework or hardware")
	}
	if b.DefaultImage("vllm", "b200") != "d:1" || b.DefaultImage("vllm", "h100") != "" {
		t.Fatal("default image")
	}
	var none *Book
	if none.Find("vllm", "b200", []string{"o/m"}, split, Axes) != nil || none.DefaultImage("vllm", "b200") != "" {
		t.Fatal("nil book matched")
	}
}

func TestBadRecipes(t *testing.T) {
	for doc, want := range map[string]string{
		`[]`:                                   "a recipes file is a JSON object",
		`{"recipes": {}}`:                      `"recipes" must be an array`,
		`{"recipes": [{"framework": "vllm"}]}`: `recipes[0]: "hardware" must be a non-empty string`,
		`{"recipes": [{"framework": "vllm", "hardware": "h", "checkpoint": "c", "recipe": "r", "image": "i", "env": {"A": 1}}]}`: "env.A must be a string",
		`{"default_images": [{"backend": "vllm"}]}`: `default_images[0]: "hardware"`,
	} {
		_, err := load(t, doc)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}

func FuzzRecipes(f *testing.F) {
	f.Add([]byte(`{"recipes": [{"framework": "vllm", "hardware": "h", "checkpoint": "c", "recipe": "r", "image": "i"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := load(t, string(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		b.Find("vllm", "h", []string{"c"}, Normalize(nil), Axes)
	})
}
