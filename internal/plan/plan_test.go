package plan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/manifest"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/recipes"
)

// registryFor writes a platform config with the given entries and loads it.
func registryFor(t *testing.T, doc string) *platform.Registry {
	t.Helper()
	p := filepath.Join(t.TempDir(), "platforms.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := platform.Load(catalog.Disk(p), platform.LocalDefaults{GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const h100 = `{"platforms": {"cluster:h100-dsxe": {"gpus_per_node": 8, "image_platform": "linux/amd64"},
  "cluster:gb200-nv": {"gpus_per_node": 4, "image_platform": "linux/arm64"},
  "cluster:h200-dgxc": {"gpus_per_node": 8, "image_platform": "linux/amd64"},
  "cluster:mi355x-amds": {"gpus_per_node": 8, "image_platform": "linux/amd64"}}}`

func shapes(t *testing.T, js string) []pyjson.Value {
	t.Helper()
	v, err := pyjson.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return v.([]pyjson.Value)
}

func ids(result *pyjson.Object) []string {
	inc, _ := result.Array("include")
	var out []string
	for _, c := range inc {
		id, _ := c.(*pyjson.Object).String("id")
		out = append(out, id)
	}
	return out
}

func TestGoldenExample1(t *testing.T) {
	g := registryFor(t, h100)
	res, _, err := Plan(Selection{Runner: "cluster:h100-dsxe", Backends: []string{"torch"},
		Testlists:  []Testlist{{"tiny", shapes(t, `[{"type":"gemm","args":{"m":2}}]`)}},
		WorldSizes: []int64{1}, ChunkSize: 1, Mode: "timing"},
		Inputs{Registry: g, Images: map[string]catalog.Image{"torch": {Image: "image:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	cell := func() *pyjson.Object { inc, _ := res.Array("include"); return inc[0].(*pyjson.Object) }()
	hashed := cell.Clone()
	hashed.Delete("id")
	want := `{"backends": ["torch"], "cases": [{"shape": {"args": {"m": 2}, "type": "gemm"}, "testlist": "tiny"}], "cluster": "h100_dgxc_8x", "gpus_per_node": 8, "image": "image:1", "image_platform": "linux/amd64", "mode": "timing", "nodes": 1, "offset": 0, "parallel": {"dcp": 1, "dp": 1, "ep": 1, "tp": 1}, "runner": "cluster:h100-dsxe", "world_size": 1}`
	if got := string(pyjson.MustMarshal(hashed, pyjson.Identity)); got != want {
		t.Fatalf("hashed JSON\n got %s\nwant %s", got, want)
	}
	if got := ids(res); len(got) != 1 || got[0] != "h100-dsxe-b69a80e232af6935" {
		t.Fatalf("ids %v", got)
	}
	if ex, _ := res.Get("excluded_shapes"); ex != pyjson.Int("0") {
		t.Fatalf("excluded %v", ex)
	}
	if got := manifest.QueueToken("12", "1", "h100-dsxe-b69a80e232af6935"); got != "87ac7c7dd71370045621324494d635c2" {
		t.Fatalf("queue token %s", got)
	}
	if got := manifest.MasterPort("12345", "h100-dsxe-b69a80e232af6935"); got != 30435 {
		t.Fatalf("master port %d", got)
	}
}

func TestGoldenExample2(t *testing.T) {
	g := registryFor(t, h100)
	res, _, err := Plan(Selection{Runner: "cluster:h100-dsxe", Backends: []string{"a", "b"},
		Testlists: []Testlist{{"small", shapes(t, `[{"type":"gemm","args":{"m":2}},{"type":"gemm","args":{"m":2}},
			{"type":"gemm","args":{"m":2,"parallel":{"tp":4}}},{"type":"gemm","args":{"m":2,"parallel":{"tp":16}}}]`)}},
		WorldSizes: []int64{1, 4}, ChunkSize: 1, Mode: "timing"},
		Inputs{Registry: g, Images: map[string]catalog.Image{"a": {Image: "same:1"}, "b": {Image: "same:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "h100-dsxe-f2eaf536ad42d85b h100-dsxe-6abfdb5ca67380fe h100-dsxe-767ba53b86459a81"
	if got := strings.Join(ids(res), " "); got != want {
		t.Fatalf("ids %s, want %s", got, want)
	}
	if ex, _ := res.Get("excluded_shapes"); ex != pyjson.Int("1") {
		t.Fatalf("excluded %v", ex)
	}
}

func TestGoldenExample3Arm64(t *testing.T) {
	g := registryFor(t, h100)
	res, _, err := Plan(Selection{Runner: "cluster:gb200-nv", Backends: []string{"torch"},
		Testlists:  []Testlist{{"tiny", shapes(t, `[{"type":"gemm","args":{"m":2}},{"type":"allreduce","args":{"parallel":{"tp":8}}}]`)}},
		WorldSizes: []int64{1}, ChunkSize: 50, Mode: "timing"},
		Inputs{Registry: g, Images: map[string]catalog.Image{"torch": {Image: "image:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(res), " "); got != "gb200-nv-84234d3a3f813904" {
		t.Fatalf("ids %s", got)
	}
	if ex, _ := res.Get("excluded_shapes"); ex != pyjson.Int("1") {
		t.Fatalf("excluded %v", ex)
	}
}

func TestGoldenExample4CountersOrdering(t *testing.T) {
	g := registryFor(t, h100)
	res, _, err := Plan(Selection{Runner: "cluster:h200-dgxc", Backends: []string{"vllm", "torch"},
		Testlists:  []Testlist{{"b", shapes(t, `[{"type":"gqa","args":{"m":2}}]`)}, {"a", shapes(t, `[{"type":"gemm","args":{"m":2}}]`)}},
		WorldSizes: []int64{1}, ChunkSize: 500, Mode: "counters"},
		Inputs{Registry: g, Images: map[string]catalog.Image{"vllm": {Image: "v:1"}, "torch": {Image: "t:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	// §5.8 example 4 does not give the shapes' args; these ids are the seed's plan() for
	// args {"m": 2} (computed with ../shared/seed/seedtree). The order is the point:
	// engine before layer, then image string.
	want := "h200-dgxc-7668a423931b14b6 h200-dgxc-010c09210b487602 h200-dgxc-9ce1017278cdd027 h200-dgxc-1e9d429d0347cbac"
	var order []string
	inc, _ := res.Array("include")
	for _, c := range inc {
		img, _ := c.(*pyjson.Object).String("image")
		cs, _ := c.(*pyjson.Object).Array("cases")
		typ, _ := cs[0].(*pyjson.Object).Get("shape")
		tt, _ := typ.(*pyjson.Object).String("type")
		order = append(order, tt+"@"+img)
	}
	if got := strings.Join(order, " "); got != "gqa@t:1 gqa@v:1 gemm@t:1 gemm@v:1" {
		t.Fatalf("order %s", got)
	}
	if got := strings.Join(ids(res), " "); got != want {
		t.Fatalf("ids\n got %s\nwant %s", got, want)
	}
}

func TestImageKeyGolden(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	if got := manifest.ImageKey("image:1", d, "linux/amd64"); got != "73a5e67fbf66881a829820a2800f4b76417ba33c39739c3b706121b7390d4661" {
		t.Fatal(got)
	}
	if got := manifest.ImageKey("image:1", d, "linux/arm64"); got != "3db3d6c05db1ebcb30f89b854ea9861ceaa26122fff808483adfd4f17bd3d45b" {
		t.Fatal(got)
	}
}

func TestEnrootURIAndReference(t *testing.T) {
	h := strings.Repeat("b", 64)
	for in, want := range map[string]string{
		"image:1":                                      "docker://image:1",
		"vllm/vllm-openai:nightly-abc":                 "docker://vllm/vllm-openai:nightly-abc",
		"nvcr.io/nvidia/pytorch:26.03-py3":             "docker://nvcr.io#nvidia/pytorch:26.03-py3",
		"nvcr.io/nvidia/pytorch:26.03-py3@sha256:" + h: "docker://nvcr.io#nvidia/pytorch:sha256:" + h,
		"ubuntu@sha256:" + h:                           "docker://registry-1.docker.io#library/ubuntu:sha256:" + h,
		"localhost:5000/x/y:t":                         "docker://localhost:5000#x/y:t",
		"docker.io/library/ubuntu:22.04":               "docker://docker.io#library/ubuntu:22.04",
	} {
		if got := EnrootURI(in); got != want {
			t.Errorf("EnrootURI(%s) = %s, want %s", in, got, want)
		}
	}
	if manifest.PinnedDigest("a:b@sha256:"+h) != "sha256:"+h || manifest.PinnedDigest("a:b") != "" {
		t.Fatal("PinnedDigest")
	}
}

// TestValidationErrors covers every §5.2 check, in the seed's order, with its exact message.
func TestValidationErrors(t *testing.T) {
	g := registryFor(t, `{"platforms": {"cluster:h100-dsxe": {"gpus_per_node": 8, "image_platform": "linux/amd64"},
	  "cluster:h200-dgxc": {"gpus_per_node": 8.0, "image_platform": "linux/amd64"},
	  "cluster:b200-nscale": {"gpus_per_node": true, "image_platform": "linux/amd64"},
	  "cluster:b300-dsxe": {"gpus_per_node": 8, "image_platform": "linux/s390x"},
	  "cluster:gb200-nv": {"gpus_per_node": 4, "image_platform": "linux/arm64"},
	  "cluster:mi300x-amd": {"gpus_per_node": 8, "image_platform": "linux/amd64"},
	  "cluster:gb300-nv": {"image_platform": "linux/arm64"}}}`)
	gemm := []Testlist{{"t", shapes(t, `[{"type":"gemm","args":{}}]`)}}
	attn := []Testlist{{"t", shapes(t, `[{"type":"attention_mha","args":{}}]`)}}
	img := map[string]catalog.Image{"torch": {Image: "t:1"}, "vllm": {Image: "v:1"}, "sglang": {Image: "s:1"}}
	sel := func(runner string, backends []string, tl []Testlist, ws []int64, chunk int64, mode string) Selection {
		return Selection{runner, backends, tl, ws, chunk, mode}
	}
	v := []string{"vllm"}
	for _, c := range []struct {
		s    Selection
		want string
	}{
		{sel("cluster:h100-dgxc", v, gemm, []int64{1}, 1, "timing"), "unsupported runner: cluster:h100-dgxc"},
		{sel("cluster:h100-dsxe", v, gemm, []int64{1}, 1, "profile"), "mode must be one of timing, counters"},
		{sel("cluster:h200-dgxc", v, gemm, []int64{1}, 1, "timing"), "runner must supply four or eight GPUs per physical node"},
		{sel("cluster:b200-nscale", v, gemm, []int64{1}, 1, "timing"), "runner must supply four or eight GPUs per physical node"},
		{sel("cluster:gb300-nv", v, gemm, []int64{1}, 1, "timing"), `platforms."cluster:gb300-nv" has no "gpus_per_node"`},
		{sel("cluster:b300-dsxe", v, gemm, []int64{1}, 1, "timing"), "unsupported image platform"},
		{sel("cluster:h100-dsxe", nil, gemm, []int64{1}, 1, "timing"), "select at least one registered backend for this GPU platform"},
		{sel("cluster:h100-dsxe", []string{"vllm", "nope"}, gemm, []int64{1}, 1, "timing"), "select at least one registered backend for this GPU platform"},
		{sel("cluster:mi300x-amd", []string{"sglang"}, gemm, []int64{1}, 1, "timing"), "AMD CI supports the torch/vllm GEMM, MoE and attention ops"},
		{sel("cluster:mi300x-amd", v, attn, []int64{1}, 1, "timing"), "AMD CI supports the torch/vllm GEMM, MoE and attention ops"},
		{sel("cluster:h100-dsxe", v, gemm, nil, 1, "timing"), "world sizes must be selected from 1,2,4,8 (single node)"},
		{sel("cluster:h100-dsxe", v, gemm, []int64{3}, 1, "timing"), "world sizes must be selected from 1,2,4,8 (single node)"},
		{sel("cluster:gb200-nv", v, gemm, []int64{8}, 1, "timing"), "world size exceeds the runner's 4-GPU physical node (it offers world sizes 1, 2, 4)"},
		{sel("cluster:h100-dsxe", []string{"torch"}, gemm, []int64{1, 1}, 1, "timing"), "the torch backend runs single-device GEMM only"},
		{sel("cluster:h100-dsxe", v, gemm, []int64{1}, 0, "timing"), "chunk size must be between 1 and 500"},
		{sel("cluster:h100-dsxe", v, gemm, []int64{1}, 501, "timing"), "chunk size must be between 1 and 500"},
		{sel("cluster:h100-dsxe", v, gemm, []int64{2}, 1, "timing"), "selection contains no runnable shapes"},
	} {
		_, _, err := Plan(c.s, Inputs{Registry: g, Images: img, Config: "cfg.json"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want %q", c.s.Runner, c.s.Backends, err, c.want)
		}
	}
}

func TestShardCap(t *testing.T) {
	g := registryFor(t, h100)
	var b strings.Builder
	b.WriteString("[")
	for i := range 257 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"type":"gemm","args":{"m":` + string(rune('0'+i%10)) + `}}`)
	}
	b.WriteString("]")
	_, _, err := Plan(Selection{"cluster:h100-dsxe", []string{"vllm"}, []Testlist{{"big", shapes(t, b.String())}}, []int64{1}, 1, "timing"},
		Inputs{Registry: g, Images: map[string]catalog.Image{"vllm": {Image: "v:1"}}})
	if err == nil || err.Error() != "selection exceeds 256 shards; narrow the testlists/backends/world sizes" {
		t.Fatal(err)
	}
}

func TestRecipeShards(t *testing.T) {
	g := registryFor(t, h100)
	p := filepath.Join(t.TempDir(), "recipes.json")
	os.WriteFile(p, []byte(`{"recipes": [
	  {"framework": "vllm", "hardware": "h200", "checkpoint": "org/m", "recipe": "m/vllm/h200-a.yaml:tp2", "image": "r:2", "engine_args": {"tensor-parallel-size": 2}},
	  {"framework": "vllm", "hardware": "h200", "checkpoint": "org/m", "recipe": "m/vllm/h200-a.yaml:tp1", "image": "r:1", "env": {"B": "1", "A": "2"}, "engine_args": {"tensor-parallel-size": 1}}]}`), 0o644)
	book, err := recipes.Load(catalog.Disk(p))
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := Plan(Selection{"cluster:h200-dgxc", []string{"torch", "vllm"}, []Testlist{{"t", shapes(t,
		`[{"type":"gemm","args":{"m":1},"sources":["org/m/q_proj","org/m/k_proj"]},{"type":"gemm","args":{"m":2},"sources":[]}]`)}},
		[]int64{1}, 500, "timing"},
		Inputs{Registry: g, Images: map[string]catalog.Image{"vllm": {Image: "v:1"}, "torch": {Image: "t:1"}}, Recipes: book})
	if err != nil {
		t.Fatal(err)
	}
	inc, _ := res.Array("include")
	// group "" (the m=2 shape) first: torch and vllm shards; then the recipe group: recipe
	// shard (vllm) and a torch shard for the same cases
	var summary []string
	for _, c := range inc {
		cell := c.(*pyjson.Object)
		img, _ := cell.String("image")
		r, _ := cell.String("recipe")
		m, _ := cell.String("recipe_match")
		summary = append(summary, img+"|"+r+"|"+m)
		if r != "" {
			keys := strings.Join(cell.Keys(), ",")
			if !strings.HasSuffix(keys, "cases,parallel,recipe,recipe_match,checkpoint,env,engine_args") {
				t.Fatalf("recipe cell keys %s", keys)
			}
			env, _ := cell.Object("env")
			if strings.Join(env.Keys(), ",") != "B,A" {
				t.Fatal("env order lost")
			}
		}
	}
	want := "t:1||,v:1||,r:1|m/vllm/h200-a.yaml:tp1|split,t:1||"
	if got := strings.Join(summary, ","); got != want {
		t.Fatalf("shards\n got %s\nwant %s", got, want)
	}
}

// fakeResolver answers from a table, recording what it was asked.
type fakeResolver struct {
	table map[string]manifest.Resolution
	asked []string
}

func (f *fakeResolver) Resolve(_ context.Context, images []string, _ string) map[string]manifest.Resolution {
	out := map[string]manifest.Resolution{}
	for _, i := range images {
		f.asked = append(f.asked, i)
		out[i] = f.table[i]
	}
	return out
}

func TestFinishFallbacks(t *testing.T) {
	d1, d2 := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	cell := func(image, backend string) *pyjson.Object {
		return WithID(pyjson.Obj("runner", "cluster:h100-dsxe", "image", image, "backends", []string{backend}, "cases", []pyjson.Value{}))
	}
	// a default image whose tag is gone falls back to the backend's image (id unchanged)
	c1 := cell("gone:1", "vllm")
	id1, _ := c1.String("id")
	c2 := cell("nightly:x", "torch") // unresolvable, but containers.toml has its digest
	res := pyjson.Obj("version", 1, "include", []pyjson.Value{c1, c2})
	r := &fakeResolver{table: map[string]manifest.Resolution{"v:1": {Digest: d1}}}
	images := map[string]catalog.Image{"vllm": {Image: "v:1"}, "torch": {Image: "nightly:x", Digest: d2}}
	if _, err := Finish(context.Background(), res, images, r, "linux/amd64", Provenance{"sha", "12", "1"}); err != nil {
		t.Fatal(err)
	}
	if id, _ := c1.String("id"); id != id1 {
		t.Fatal("id recomputed")
	}
	if got := strings.Join(c1.Keys(), ","); got != "id,runner,image,backends,cases,image_unavailable,digest,import_uri,queue-token" {
		t.Fatalf("keys %s", got)
	}
	if img, _ := c1.String("image"); img != "v:1" {
		t.Fatal(img)
	}
	if d, _ := c2.String("digest"); d != d2 {
		t.Fatal("containers.toml digest not used")
	}
	if u, _ := c2.String("import_uri"); u != "docker://registry-1.docker.io#library/nightly:"+d2 {
		t.Fatalf("import by digest: %s", u)
	}
	if got := strings.Join(res.Keys(), ","); got != "version,include,source_sha,run_id,attempt" {
		t.Fatal(got)
	}
	// nothing resolves: the seed's error
	res = pyjson.Obj("include", []pyjson.Value{cell("x:1", "vllm")})
	_, err := Finish(context.Background(), res, map[string]catalog.Image{"vllm": {Image: "x:1"}}, &fakeResolver{}, "linux/amd64", Provenance{})
	if err == nil || err.Error() != "cannot resolve image digest: x:1" {
		t.Fatal(err)
	}
	// an image with no manifest for the platform is refused
	res = pyjson.Obj("include", []pyjson.Value{cell("x86only:1", "vllm")})
	_, err = Finish(context.Background(), res, map[string]catalog.Image{"vllm": {Image: "x86only:1"}},
		&fakeResolver{table: map[string]manifest.Resolution{"x86only:1": {Digest: d1, NoPlatform: true}}}, "linux/arm64", Provenance{})
	if err == nil || !strings.Contains(err.Error(), "x86only:1 has no manifest for linux/arm64") {
		t.Fatal(err)
	}
	// a pinned image is not asked about
	r = &fakeResolver{}
	res = pyjson.Obj("include", []pyjson.Value{cell("p:1@"+d1, "vllm")})
	if _, err := Finish(context.Background(), res, map[string]catalog.Image{"vllm": {Image: "p:1@" + d1}}, r, "linux/amd64", Provenance{}); err != nil || len(r.asked) != 0 {
		t.Fatal(err, r.asked)
	}
}

// BenchmarkPlanEmbeddedCatalog plans every embedded testlist on an NVIDIA runner.
// catalogSelection is the whole embedded catalog on cluster:h200-dgxc, vllm, world sizes
// 1, 2, 4 and 8, in chunks of chunk.
func catalogSelection(b *testing.B, chunk int64) (Selection, Inputs) {
	b.Helper()
	g, err := platform.Load(catalog.Embedded("platforms.json"), platform.LocalDefaults{})
	if err != nil {
		b.Fatal(err)
	}
	tls := catalog.NewTestlists("")
	var lists []Testlist
	for _, n := range tls.Names() {
		s, err := tls.Load(n)
		if err != nil {
			b.Fatal(err)
		}
		lists = append(lists, Testlist{n, s})
	}
	in := Inputs{Registry: g, Images: map[string]catalog.Image{"vllm": {Image: "v:1"}}}
	return Selection{"cluster:h200-dgxc", []string{"vllm"}, lists, []int64{1, 2, 4, 8}, chunk, "timing"}, in
}

func BenchmarkPlanEmbeddedCatalog(b *testing.B) {
	sel, in := catalogSelection(b, 500)
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := Plan(sel, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeManifest encodes the whole embedded catalog's plan as write_json does.
func BenchmarkEncodeManifest(b *testing.B) {
	res, _, err := Plan(catalogSelection(b, 100))
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.ResetTimer()
	for b.Loop() {
		buf, err = pyjson.AppendMarshal(buf[:0], res, pyjson.File)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkParseTestlists parses every embedded testlist.
func BenchmarkParseTestlists(b *testing.B) {
	tls := catalog.NewTestlists("")
	for b.Loop() {
		for _, n := range tls.Names() {
			if _, err := tls.Load(n); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// A world size selected but run by no shape is named with why, and a selection whose
// sizes no shape runs at says at which sizes its shapes run (issue 48: the README's tour
// asked 1,2,4,8 of gemm_perf and silently got 1).
func TestDroppedWorldSizesAreNamed(t *testing.T) {
	g := registryFor(t, h100)
	tl := []Testlist{{"mixed", shapes(t, `[{"type":"gemm","args":{"m":2}},
	  {"type":"gemm","args":{"m":4,"parallel":{"tp":2}}}]`)}}
	in := Inputs{Registry: g, Images: map[string]catalog.Image{"vllm": {Image: "v:1"}}}
	_, dropped, err := Plan(Selection{"cluster:h200-dgxc", []string{"vllm"}, tl, []int64{1, 2, 4, 8}, 500, "timing"}, in)
	if err != nil {
		t.Fatal(err)
	}
	if want := "world size 4, 8 dropped: the shapes of mixed run at world size 1, 2; selected 1, 2, 4, 8"; strings.Join(dropped, "\n") != want {
		t.Errorf("dropped %q, want %q", dropped, want)
	}
	if _, dropped, err = Plan(Selection{"cluster:h200-dgxc", []string{"vllm"}, tl, []int64{1, 2}, 500, "timing"}, in); err != nil || len(dropped) != 0 {
		t.Errorf("every size has shapes: dropped %q, err %v", dropped, err)
	}
	_, _, err = Plan(Selection{"cluster:h200-dgxc", []string{"vllm"}, tl, []int64{8}, 500, "timing"}, in)
	if want := "selection contains no runnable shapes (the shapes of mixed run at world size 1, 2; selected 8)"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
}
