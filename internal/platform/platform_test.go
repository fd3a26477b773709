package platform

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
)

func TestEmbeddedRegistry(t *testing.T) {
	g, err := Load(catalog.Embedded("platforms.json"), LocalDefaults{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	labels := g.Labels()
	if len(labels) != 10 || labels[0] != "cluster:h100-dsxe" || labels[9] != Local {
		t.Fatalf("labels %v", labels)
	}
	// decisions §2: the AMD overlay keyed by runner label reaches the merged operator
	e, _ := g.Entry("cluster:mi325x-amds")
	op := Operator(e)
	if v, _ := op.Get("cpus_per_node"); v == nil {
		t.Fatal("mi325x cpus_per_node lost")
	}
	if p, _ := op.String("squash_dir"); p != "/raid/squash" {
		t.Fatalf("base operator keys not kept: %q", p)
	}
	r, _ := g.Runner("cluster:gb200-nv")
	if r.Cluster != "gb200_nvl72_4x" || r.Family != "gb200" || r.AMD() {
		t.Fatalf("%+v", r)
	}
	if r, _ := g.Runner("cluster:mi355x-amds"); !r.AMD() || r.Vendor() != "amd" {
		t.Fatal("mi355x not AMD")
	}
}

func TestCustomRunner(t *testing.T) {
	fs := fstest.MapFS{"p.json": {Data: []byte(`{"platforms": {"cluster:test-local": {"cluster": "test_8x", "gpus_per_node": 8,
		"image_platform": "linux/amd64", "operator": {"container": "none", "partition": "debug"}}}}`)}}
	g, err := Load(catalog.Source{FS: fs, Path: "p.json", Name: "p.json"}, LocalDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := g.Runner("cluster:test-local")
	if !ok || r.Cluster != "test_8x" || r.Family != "test" || r.Builtin {
		t.Fatalf("%+v", r)
	}
	e, _ := g.Entry("cluster:test-local")
	if ContainerMode(r.Label, e) != "none" {
		t.Fatal("container mode")
	}
}

// The local runner's device count is probed only when its entry is read, once, and not at
// all when the overlay sets it: planning for a cluster never execs nvidia-smi.
func TestLocalDevicesCountedLazily(t *testing.T) {
	calls := 0
	count := func() int { calls++; return 4 }
	g, err := Load(catalog.Embedded("platforms.json"), LocalDefaults{CountGPUs: count})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Entry("cluster:h200-dgxc"); !ok || calls != 0 {
		t.Fatalf("cluster entry read: %d probes", calls)
	}
	for range 2 {
		e, ok := g.Entry(Local)
		if v, _ := e.Get("gpus_per_node"); !ok || fmt.Sprint(v) != "4" {
			t.Fatalf("local gpus_per_node %v", v)
		}
	}
	if calls != 1 {
		t.Fatalf("%d probes, want 1", calls)
	}
	fs := fstest.MapFS{"p.json": {Data: []byte(`{"platforms": {"local": {"gpus_per_node": 2}}}`)}}
	g, err = Load(catalog.Source{FS: fs, Path: "p.json", Name: "p.json"}, LocalDefaults{CountGPUs: count})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := g.Entry(Local)
	if v, _ := e.Get("gpus_per_node"); fmt.Sprint(v) != "2" || calls != 1 {
		t.Fatalf("overlay gpus_per_node %v, %d probes", v, calls)
	}
}

// A "base" path or a runner key holding a newline is named with it escaped (safe.Text), on
// one line, and the base is looked up in the overlay's own file system.
func TestPlatformConfigControlCharacters(t *testing.T) {
	fs := fstest.MapFS{
		"p.json": {Data: []byte(`{"base": "b.js\n", "platforms": {}}`)},
		"q.json": {Data: []byte(`{"platforms": {"a\u001b[2Jb": 1}}`)},
		"r.json": {Data: []byte(`{"base": "b.json", "platforms": {}}`)},
		"b.json": {Data: []byte(`{"platforms": {"h100-dgxc": {"operator": {"a": 1}}}}`)},
	}
	_, err := Load(catalog.Source{FS: fs, Path: "p.json", Name: "p.json"}, LocalDefaults{})
	if err == nil || err.Error() != `p.json: base: b.js\x0a: file does not exist` {
		t.Fatalf("base with a newline: %v", err)
	}
	_, err = Load(catalog.Source{FS: fs, Path: "q.json", Name: "q.json"}, LocalDefaults{})
	if err == nil || err.Error() != `q.json: platforms.a\x1b[2Jb is integer, not an object` {
		t.Fatalf("key with an escape: %v", err)
	}
	if _, err := Load(catalog.Source{FS: fs, Path: "r.json", Name: "r.json"}, LocalDefaults{}); err != nil {
		t.Fatalf("base in the same file system: %v", err)
	}
}

// FuzzPlatformConfig: any document loads or fails with one line, never a panic.
func FuzzPlatformConfig(f *testing.F) {
	f.Add([]byte(`{"platforms": {"cluster:h100-dsxe": {"gpus_per_node": 8, "operator": {"partition": "x"}}}}`))
	f.Add([]byte(`{"base": "b.json", "platforms": {"x": {"cluster": "c"}}}`))
	f.Add([]byte(`{"platforms": []}`))
	f.Add([]byte(`{"base": "b.js\n", "platforms": {}}`)) // found by CI's fuzz pass: a base path with a newline
	f.Add([]byte(`{"platforms": {"a\nb": 1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := fstest.MapFS{"p.json": {Data: data}, "b.json": {Data: []byte(`{"platforms": {"h100-dgxc": {"operator": {"a": 1}}}}`)}}
		_, err := Load(catalog.Source{FS: fs, Path: "p.json", Name: "p.json"}, LocalDefaults{})
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error: %q", err)
		}
	})
}

// A custom runner's family decides its vendor: "mi" and a digit is AMD; cluster:mini-lab
// (family "mini", no "family" given) is not (the seed's prefix test made it AMD).
func TestCustomRunnerVendor(t *testing.T) {
	for fam, amd := range map[string]bool{"mini": false, "mi250": true, "mi300x": true, "mi": false, "h100": false, "milan": false} {
		if got := (Runner{Family: fam}).AMD(); got != amd {
			t.Errorf("family %q: AMD() = %v, want %v", fam, got, amd)
		}
	}
}

// An overlay may sit on opx's embedded overlay ("base": "opx:embedded", issue 20): it only
// says what differs, and everything else — the embedded overlay's AMD cpus_per_node, the
// registry's GPUs and partitions — is kept.
func TestOverlayOnTheEmbeddedBase(t *testing.T) {
	p := filepath.Join(t.TempDir(), "site.json")
	os.WriteFile(p, []byte(`{"base": "opx:embedded", "platforms": {"cluster:h200-dgxc": {"operator": {"partition": "mine"}},
	  "cluster:lab-x": {"cluster": "lab_8x", "gpus_per_node": 8, "image_platform": "linux/amd64", "operator": {"container": "none", "partition": "p"}}}}`), 0o644)
	g, err := Load(catalog.Disk(p), LocalDefaults{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := g.Entry("cluster:h200-dgxc")
	part, _ := Operator(e).String("partition")
	gpus, _ := e.Get("gpus_per_node")
	if part != "mine" || fmt.Sprint(gpus) != "8" {
		t.Errorf("h200 entry: partition %q, gpus %v", part, gpus)
	}
	mi, _ := g.Entry("cluster:mi300x-amd")
	if cpus, _ := Operator(mi).Get("cpus_per_node"); fmt.Sprint(cpus) != "128" {
		t.Errorf("the embedded overlay's cpus_per_node was lost: %v", cpus)
	}
	if _, ok := g.Runner("cluster:lab-x"); !ok {
		t.Error("the site's custom runner is missing")
	}
}

// The storage fields are typed where the config is read: a path that is not text is an
// error naming the field (it was a root of "" or silently skipped), null and "" are unset,
// and storage_roots absent is nil while an empty list is empty (SharedBase tells them
// apart, as the seed does).
func TestStorageOf(t *testing.T) {
	entry := func(op string) *pyjson.Object {
		v, err := pyjson.Parse([]byte(`{"operator": ` + op + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return v.(*pyjson.Object)
	}
	st, err := StorageOf("cluster:x", entry(`{"stage_dir": "/s", "squash_dir": null, "storage_roots": ["/a", "/b"]}`))
	if err != nil || st.StageDir != "/s" || st.SquashDir != "" || len(st.Roots) != 2 || st.Roots[1] != "/b" {
		t.Errorf("%+v %v", st, err)
	}
	if st, err := StorageOf("cluster:x", entry(`{"stage_dir": ""}`)); err != nil || st.StageDir != "" || st.Roots != nil {
		t.Errorf("unset: %+v %v", st, err)
	}
	if st, err := StorageOf("cluster:x", entry(`{"storage_roots": []}`)); err != nil || st.Roots == nil || len(st.Roots) != 0 {
		t.Errorf("an empty list: %+v %v", st, err)
	}
	for op, want := range map[string]string{
		`{"stage_dir": 5}`:               "platform entry for cluster:x: operator.stage_dir is integer, not a path",
		`{"squash_dir": ["/a"]}`:         "operator.squash_dir is array, not a path",
		`{"storage_roots": "/a"}`:        "operator.storage_roots is string, not a list of paths",
		`{"storage_roots": ["/a", 1.5]}`: "operator.storage_roots[1] is number, not a path",
	} {
		if _, err := StorageOf("cluster:x", entry(op)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", op, err, want)
		}
	}
}

// plan and doctor refuse a storage path that is not text in the same words (Missing).
func TestMissingNamesAStoragePathThatIsNotText(t *testing.T) {
	v, _ := pyjson.Parse([]byte(`{"gpus_per_node": 8, "image_platform": "linux/amd64", "operator": {"partition": "p", "storage_roots": ["/a", 2]}}`))
	got := Missing(Runner{Label: "cluster:x"}, v.(*pyjson.Object))
	if len(got) != 1 || got[0] != "operator.storage_roots[1] is integer, not a path" {
		t.Errorf("missing %q", got)
	}
}

// Facts reads an entry leniently for doctor and list: a complete entry's fields as they
// are, and one that lacks what execute reads says so in Missing, with nothing invented.
func TestFactsOfACompleteAndABrokenEntry(t *testing.T) {
	fs := fstest.MapFS{"p.json": {Data: []byte(`{"platforms": {
		"cluster:good-x": {"cluster": "good_8x", "gpus_per_node": 8, "image_platform": "linux/arm64",
			"operator": {"container": "none", "partition": "batch", "stage_dir": "/shared/stage"}},
		"cluster:bad-x": {"cluster": "bad_8x", "gpus_per_node": "8", "operator": {"stage_dir": 7}}}}`)}}
	g, err := Load(catalog.Source{FS: fs, Path: "p.json", Name: "p.json"}, LocalDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	good, ok := g.Facts("cluster:good-x")
	if !ok || !good.GPUsKnown || good.GPUsPerNode != 8 || good.ImagePlatform != "linux/arm64" || good.Container != "none" ||
		good.Partition != "batch" || good.StorageErr != nil || good.Storage.StageDir != "/shared/stage" || len(good.Missing) != 0 {
		t.Fatalf("complete entry: %+v", good)
	}
	bad, ok := g.Facts("cluster:bad-x")
	if !ok || bad.GPUsKnown || bad.Container != "pyxis" || bad.StorageErr == nil {
		t.Fatalf("broken entry: %+v", bad)
	}
	want := []string{"gpus_per_node (an integer)", "image_platform (linux/amd64 or linux/arm64)", "operator.partition"}
	if got := strings.Join(bad.Missing, "; "); !strings.HasPrefix(got, strings.Join(want, "; ")) || !strings.Contains(got, "stage_dir") {
		t.Fatalf("missing: %q", got)
	}
	if _, ok := g.Facts("cluster:nosuch"); ok {
		t.Fatal("facts of a runner the registry does not have")
	}
}

// operator.peaks: positive numbers of the four known names and a text source are read;
// anything else is refused with the member named, as execute says before allocating.
func TestSitePeaks(t *testing.T) {
	s, err := SitePeaks(pyjson.Obj("bf16_tflops", 700.0, "hbm_tbps", pyjson.NewInt(3), "source", "measured at 500 W"))
	if err != nil || s.TFLOPS["bf16"] != 700 || len(s.TFLOPS) != 1 || s.HBM != 3 || s.Source != "measured at 500 W" {
		t.Fatalf("peaks: %+v %v", s, err)
	}
	if s, err := SitePeaks(nil); s != nil || err != nil {
		t.Fatalf("no peaks: %+v %v", s, err)
	}
	for bad, want := range map[*pyjson.Object]string{
		pyjson.Obj("bf16_tflops", "fast"): "operator.peaks.bf16_tflops is string, not a number",
		pyjson.Obj("bf16_tflops", -1.0):   "operator.peaks.bf16_tflops must be a positive number",
		pyjson.Obj("fp16", 1.0):           "operator.peaks.fp16 is not one of bf16_tflops, fp8_tflops, fp4_tflops, hbm_tbps, source",
		pyjson.Obj("source", 3):           "operator.peaks.source is integer, not a string",
	} {
		if _, err := SitePeaks(bad); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", pyjson.MustMarshal(bad, pyjson.Default), err, want)
		}
	}
}

// A config's harness paths (beyond the seed) are read in order, a directory kept with its
// slash; each bad one is one line naming it, and the embedded config has none.
func TestHarnessPaths(t *testing.T) {
	dir := t.TempDir()
	load := func(affected string) (*Registry, error) {
		p := filepath.Join(dir, "p.json")
		os.WriteFile(p, []byte(`{"base": "opx:embedded", "platforms": {}, "affected": `+affected+`}`), 0o644)
		return Load(catalog.Disk(p), LocalDefaults{GPUs: 1})
	}
	g, err := load(`{"harness": [{"path": "operatorx/backends/vllm/", "backends": ["vllm"], "testlists": ["smoke_parallel"]}, {"path": "./operatorx/common.py", "backends": ["vllm", "torch"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	h := g.Harness()
	if len(h) != 2 || h[0].Path != "operatorx/backends/vllm/" || !h[0].Holds("operatorx/backends/vllm/gemm.py") || h[0].Holds("operatorx/backends/vllmx.py") ||
		h[1].Path != "operatorx/common.py" || !h[1].Holds("operatorx/common.py") || len(h[1].Backends) != 2 {
		t.Errorf("harness %+v", h)
	}
	for affected, want := range map[string]string{
		`[]`:              `"affected" is array, not an object`,
		`{"paths": []}`:   "affected.paths: unknown key",
		`{"harness": {}}`: "affected.harness is object, not a list",
		`{"harness": [{"path": "../x", "backends": ["vllm"]}]}`:           "affected.harness[0].path ../x: a path inside the repository",
		`{"harness": [{"path": "/x", "backends": ["vllm"]}]}`:             "affected.harness[0].path /x: a path inside the repository",
		`{"harness": [{"path": "x/"}]}`:                                   "affected.harness[0]: give a path and at least one backend",
		`{"harness": [{"path": "x/", "backends": [1]}]}`:                  "affected.harness[0].backends: 1 is not a name",
		`{"harness": [{"path": "x/", "backends": ["v"], "owner": "me"}]}`: `unknown key owner`,
	} {
		if _, err := load(affected); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", affected, err, want)
		}
	}
	if g, _, err := LoadConfig(""); err != nil || len(g.Harness()) != 0 {
		t.Errorf("embedded: %v %v", g.Harness(), err)
	}
}
