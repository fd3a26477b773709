// Package plan owns the planner: it turns a selection (runner, backends, testlists, world
// sizes, chunk size, mode) into the manifest's shards with the seed's exact semantics
// (seed-spec §5), and computes the ids, image keys, enroot URIs and queue tokens that
// everything downstream keys on.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/recipes"
)

// MaxShards is the seed's cap on one plan.
const MaxShards = 256

// Modes are the seed's MODES.
var Modes = []string{"timing", "counters"}

// CPU is opx's built-in backend: always registered, and imageless on runners that run
// without a container (issue: opx run).
const CPU = "cpu"

// Testlist is one selected testlist.
type Testlist struct {
	Name   string
	Shapes []pyjson.Value
}

// Selection is what the planner is asked for.
type Selection struct {
	Runner     string
	Backends   []string // in the given order
	Testlists  []Testlist
	WorldSizes []int64
	ChunkSize  int64
	Mode       string
}

// Inputs are the catalog the planner reads.
type Inputs struct {
	Registry *platform.Registry
	Images   map[string]catalog.Image // the runner vendor's containers.toml table
	Recipes  *recipes.Book            // nil: no recipes
	Config   string                   // platform config name, for messages
}

// ValueError is one of the seed's planner errors (a Python ValueError): the message is
// the contract.
type ValueError struct{ Msg string }

func (e *ValueError) Error() string { return e.Msg }

func valueErr(format string, args ...any) error { return &ValueError{fmt.Sprintf(format, args...)} }

var amdTypes = map[string]bool{"gemm": true, "moe": true, "mla": true, "mla_dsa": true, "dsv4_attn": true, "gqa": true, "qsa": true, "gdn": true, "kda": true}

// ImageFor returns the image a backend runs in on this runner: the recipe book's default
// image, else containers.toml's; the cpu backend has none on container-less runners.
func ImageFor(in Inputs, runner platform.Runner, entry *pyjson.Object, backend string) (string, bool) {
	if img := in.Recipes.DefaultImage(backend, runner.Family); img != "" {
		return img, true
	}
	if img, ok := in.Images[backend]; ok {
		return img.Image, true
	}
	if backend == CPU && platform.ContainerMode(runner.Label, entry) == "none" {
		return "", true
	}
	return "", false
}

func registered(in Inputs, runner platform.Runner, entry *pyjson.Object, backend string) bool {
	if _, ok := in.Images[backend]; ok {
		return true
	}
	_, ok := ImageFor(in, runner, entry, backend)
	return backend == CPU && ok
}

// Plan is the seed's plan() (seed-spec §5.2–§5.4): it returns
// {"version": 1, "excluded_shapes": N, "include": [cells]}.
func Plan(sel Selection, in Inputs) (*pyjson.Object, error) {
	runner, ok := in.Registry.Runner(sel.Runner)
	if !ok {
		return nil, valueErr("unsupported runner: %s (runners: %s; see opx list runners)", sel.Runner, strings.Join(in.Registry.Labels(), ", "))
	}
	if !contains(Modes, sel.Mode) {
		return nil, valueErr("mode must be one of timing, counters")
	}
	entry, ok := in.Registry.Entry(sel.Runner)
	if !ok {
		return nil, fmt.Errorf("%s: no platform entry for runner %s", in.Config, sel.Runner)
	}
	gpusV, ok := entry.Get("gpus_per_node")
	if !ok {
		return nil, fmt.Errorf("%s: platforms.%q has no \"gpus_per_node\"", in.Config, sel.Runner)
	}
	ipV, ok := entry.Get("image_platform")
	if !ok {
		return nil, fmt.Errorf("%s: platforms.%q has no \"image_platform\"", in.Config, sel.Runner)
	}
	gpusInt, isInt := gpusV.(pyjson.Int)
	gpus, fits := gpusInt.Int64()
	if sel.Runner == platform.Local {
		if !isInt || !fits || gpus < 1 || gpus > 8 {
			return nil, valueErr("runner must supply one to eight devices on this machine")
		}
	} else if !isInt || !fits || (gpus != 4 && gpus != 8) {
		return nil, valueErr("runner must supply four or eight GPUs per physical node")
	}
	imagePlatform, _ := ipV.(string)
	if imagePlatform != "linux/amd64" && imagePlatform != "linux/arm64" {
		return nil, valueErr("unsupported image platform")
	}
	if len(sel.Backends) == 0 {
		return nil, valueErr("select at least one registered backend for this GPU platform")
	}
	for _, b := range sel.Backends {
		if !registered(in, runner, entry, b) {
			return nil, valueErr("select at least one registered backend for this GPU platform")
		}
	}
	// beyond the seed: a combination that can only fail after allocation is refused here
	if sel.Mode == "counters" && contains(sel.Backends, CPU) {
		return nil, valueErr("counters mode profiles GPU kernels with ncu or rocprofv3; the cpu backend has none (use --mode timing)")
	}
	if runner.AMD() {
		bad := false
		for _, b := range sel.Backends {
			if b != "torch" && b != "vllm" && b != CPU {
				bad = true
			}
		}
		for _, tl := range sel.Testlists {
			for _, s := range tl.Shapes {
				typ, _ := s.(*pyjson.Object).String("type")
				if !amdTypes[typ] {
					bad = true
				}
			}
		}
		if bad {
			return nil, valueErr("AMD CI supports the torch/vllm GEMM, MoE and attention ops")
		}
	}
	if len(sel.WorldSizes) == 0 {
		return nil, valueErr("world sizes must be selected from 1,2,4,8 (single node)")
	}
	for _, ws := range sel.WorldSizes {
		if ws != 1 && ws != 2 && ws != 4 && ws != 8 {
			return nil, valueErr("world sizes must be selected from 1,2,4,8 (single node)")
		}
	}
	for _, ws := range sel.WorldSizes {
		if ws > gpus {
			return nil, valueErr("world size exceeds the runner's %d-GPU physical node", gpus)
		}
	}
	if contains(sel.Backends, "torch") && !(len(sel.WorldSizes) == 1 && sel.WorldSizes[0] == 1) {
		return nil, valueErr("the torch backend runs single-device GEMM only")
	}
	if sel.ChunkSize < 1 || sel.ChunkSize > 500 {
		return nil, valueErr("chunk size must be between 1 and 500")
	}

	type groupKey struct{ split, recipe, state string }
	// the kept shapes in testlist order; the {"testlist", "shape"} cases of each cell are
	// built by the worker that hashes the cell's id
	type keptShape struct {
		list  int32 // indexes listNames
		shape *pyjson.Object
	}
	var listNames []pyjson.Value // boxed once
	total := 0
	for _, tl := range sel.Testlists {
		total += len(tl.Shapes)
	}
	kept := make([]keptShape, 0, total)
	groupIDs := map[groupKey]int{}
	var byGroup [][]int32 // each group's kept shapes (indices into kept), in testlist order
	recipesSeen := map[string]*recipes.Match{}
	excluded := int64(0)
	lists := append([]Testlist(nil), sel.Testlists...)
	sort.SliceStable(lists, func(i, j int) bool { return lists[i].Name < lists[j].Name })
	// most shapes have no args.parallel: their split and its key are computed once
	noSplit := recipes.Normalize(nil)
	noSplitKey := string(pyjson.MustMarshal(noSplit, pyjson.Identity))
	noSplitWS, _ := WorldSize(noSplit)
	noSplitIn := inWorldSizes(noSplitWS, sel.WorldSizes)
	lastKey, lastGroup := groupKey{}, -1 // consecutive shapes mostly share a group
	for _, tl := range dedupe(lists) {
		listNames = append(listNames, tl.Name)
		list := int32(len(listNames) - 1)
		for i, s := range tl.Shapes {
			shape := s.(*pyjson.Object)
			args, _ := shape.Object("args")
			par, _ := args.Get("parallel")
			var p *pyjson.Object
			switch x := par.(type) {
			case nil:
			case *pyjson.Object:
				p = x
			default:
				return nil, fmt.Errorf("testlist %s: shape [%d]: args.parallel is %s, not an object", tl.Name, i, pyjson.TypeName(par))
			}
			split, splitKey, wanted := noSplit, noSplitKey, noSplitIn
			if p != nil {
				split = recipes.Normalize(p)
				splitKey = string(pyjson.MustMarshal(split, pyjson.Identity))
				ws, err := WorldSize(split)
				if err != nil {
					return nil, fmt.Errorf("testlist %s: shape [%d]: args.parallel: %v", tl.Name, i, err)
				}
				wanted = inWorldSizes(ws, sel.WorldSizes)
			}
			if !wanted {
				excluded++
				continue
			}
			typ, _ := shape.String("type")
			var recipe *recipes.Match
			if in.Recipes != nil {
				for _, b := range sel.Backends {
					if !recipes.IsFramework(b) {
						continue
					}
					ck, err := checkpoints(shape)
					if err != nil {
						return nil, fmt.Errorf("testlist %s: shape [%d]: %v", tl.Name, i, err)
					}
					if r := in.Recipes.Find(b, runner.Family, ck, split, SplitAxes(typ)); r != nil {
						recipe = r
						break
					}
				}
			}
			key := groupKey{split: splitKey, state: "engine"}
			if recipe != nil {
				recipesSeen[recipe.Recipe] = recipe
				key.recipe = recipe.Recipe
			}
			// attention builds its own engine; never in a process with gemm/moe
			if typ == "gemm" || typ == "moe" {
				key.state = "layer"
			}
			g := lastGroup
			if key != lastKey || g < 0 {
				var ok bool
				if g, ok = groupIDs[key]; !ok {
					g = len(groupIDs)
					groupIDs[key] = g
					byGroup = append(byGroup, nil)
				}
				lastKey, lastGroup = key, g
			}
			byGroup[g] = append(byGroup[g], int32(len(kept)))
			kept = append(kept, keptShape{list, shape})
		}
	}
	// image groups: sorted unique backends, each under its image
	imageGroups := map[string][]string{}
	for _, b := range sortedUnique(sel.Backends) {
		img, _ := ImageFor(in, runner, entry, b)
		imageGroups[img] = append(imageGroups[img], b)
	}
	keys := make([]groupKey, 0, len(groupIDs))
	for k := range groupIDs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.split != b.split {
			return a.split < b.split
		}
		if a.recipe != b.recipe {
			return a.recipe < b.recipe
		}
		return a.state < b.state
	})
	type shard struct {
		image    string
		backends []string
		ws       pyjson.Value
		cases    []int32 // into kept
		extra    *pyjson.Object
	}
	var shards []shard
	for _, k := range keys {
		cases := byGroup[groupIDs[k]]          // built per cell, on every core, just before its id
		sv, _ := pyjson.Parse([]byte(k.split)) // back from JSON: keys dcp, dp, ep, tp
		split := sv.(*pyjson.Object)
		ws, _ := WorldSize(split)
		rest := imageGroups
		if k.recipe != "" {
			r := recipesSeen[k.recipe]
			var framework string
			for _, b := range sel.Backends {
				if recipes.IsFramework(b) {
					framework = b
					break
				}
			}
			shards = append(shards, shard{r.Image, []string{framework}, ws, cases, pyjson.Obj(
				"parallel", split, "recipe", k.recipe, "recipe_match", r.Match,
				"checkpoint", r.Checkpoint, "env", r.Env, "engine_args", r.EngineArgs)})
			rest = map[string][]string{}
			for img, bs := range imageGroups {
				var kept []string
				for _, b := range bs {
					if b != framework {
						kept = append(kept, b)
					}
				}
				rest[img] = kept
			}
		}
		images := make([]string, 0, len(rest))
		for img := range rest {
			images = append(images, img)
		}
		sort.Strings(images)
		for _, img := range images {
			if len(rest[img]) > 0 {
				shards = append(shards, shard{img, rest[img], ws, cases, pyjson.Obj("parallel", split)})
			}
		}
	}
	var cells []*pyjson.Object
	var cellCases [][]int32
	for _, s := range shards {
		for off := int64(0); off < int64(len(s.cases)); off += sel.ChunkSize {
			end := min(off+sel.ChunkSize, int64(len(s.cases)))
			cell := pyjson.Obj(
				"runner", sel.Runner,
				"cluster", runner.Cluster,
				"nodes", 1,
				"gpus_per_node", gpusV,
				"image_platform", imagePlatform,
				"world_size", s.ws,
				"image", s.image,
				"mode", sel.Mode,
				"backends", s.backends,
				"offset", off,
				"cases", nil, // built with the id, below
			)
			for _, m := range s.extra.Members() {
				cell.Set(m.Key, m.Value)
			}
			cells = append(cells, cell)
			cellCases = append(cellCases, s.cases[off:end])
		}
		if len(cells) > MaxShards { // stop early; the message is the same
			break
		}
	}
	if len(cells) == 0 {
		return nil, valueErr("selection contains no runnable shapes")
	}
	if len(cells) > MaxShards {
		return nil, valueErr("selection exceeds 256 shards; narrow the testlists/backends/world sizes")
	}
	include := make([]pyjson.Value, len(cells))
	for i, cell := range cells {
		cases := make([]pyjson.Value, len(cellCases[i]))
		for c, k := range cellCases[i] {
			cases[c] = pyjson.Obj("testlist", listNames[kept[k].list], "shape", kept[k].shape)
		}
		cell.Set("cases", cases)
		include[i] = WithID(cell)
	}
	return pyjson.Obj("version", 1, "excluded_shapes", excluded, "include", include), nil
}

// WithID returns {"id": <label>-<16 hex of sha256(json.dumps(cell, sort_keys=True))>, ...cell}
// (seed-spec §5.4).
func WithID(cell *pyjson.Object) *pyjson.Object {
	b, err := pyjson.Marshal(cell, pyjson.Identity)
	if err != nil {
		panic(err) // cells are built from parsed values only
	}
	sum := sha256.Sum256(b)
	runner, _ := cell.String("runner")
	out := pyjson.Obj("id", platform.ShortLabel(runner)+"-"+hex.EncodeToString(sum[:])[:16])
	for _, m := range cell.Members() {
		out.Set(m.Key, m.Value)
	}
	return out
}

// dedupe keeps the first testlist of each name (the seed's dict collapses duplicates).
func dedupe(lists []Testlist) []Testlist {
	seen := map[string]bool{}
	var out []Testlist
	for _, l := range lists {
		if !seen[l.Name] {
			seen[l.Name] = true
			out = append(out, l)
		}
	}
	return out
}

// SplitAxes is the seed's _split_axes (seed-spec §3.11, §16.2).
func SplitAxes(opType string) []string {
	switch opType {
	case "gemm":
		return []string{"tp"}
	case "moe":
		return []string{"tp", "dp", "ep"}
	case "mla", "mla_dsa", "dsv4_attn", "gqa", "qsa", "gdn", "kda":
		return []string{"tp", "dp", "dcp"}
	}
	return recipes.Axes
}

// checkpoints is recipes.checkpoints: "<org>/<model>/<role>" -> "<org>/<model>", de-duplicated.
func checkpoints(shape *pyjson.Object) ([]string, error) {
	v, _ := shape.Get("sources")
	if v == nil {
		return nil, nil
	}
	arr, ok := v.([]pyjson.Value)
	if !ok {
		return nil, fmt.Errorf("\"sources\" is %s, not a list", pyjson.TypeName(v))
	}
	var out []string
	for _, s := range arr {
		str, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("\"sources\" holds %s, not a string", pyjson.TypeName(s))
		}
		c := str
		if i := strings.LastIndex(str, "/"); i >= 0 {
			c = str[:i]
		}
		if !contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// WorldSize is parallel.world_size: tp*dp with Python's numeric rules (int*int stays int,
// a float makes a float, booleans count as 0/1). Other types are an error (the seed would
// crash or silently exclude the shape).
func WorldSize(split *pyjson.Object) (pyjson.Value, error) {
	tp, _ := split.Get("tp")
	dp, _ := split.Get("dp")
	return mul(tp, dp)
}

var errNotNumber = errors.New("tp and dp must be numbers")

func mul(a, b pyjson.Value) (pyjson.Value, error) {
	num := func(v pyjson.Value) (pyjson.Int, float64, bool, bool) {
		switch x := v.(type) {
		case pyjson.Int:
			return x, 0, false, true
		case bool:
			if x {
				return "1", 0, false, true
			}
			return "0", 0, false, true
		case float64:
			return "", x, true, true
		}
		return "", 0, false, false
	}
	ai, af, aflt, ok1 := num(a)
	bi, bf, bflt, ok2 := num(b)
	if !ok1 || !ok2 {
		return nil, errNotNumber
	}
	if !aflt && !bflt {
		if x, ok := ai.Int64(); ok && x >= -1<<31 && x < 1<<31 {
			if y, ok := bi.Int64(); ok && y >= -1<<31 && y < 1<<31 {
				return pyjson.NewInt(x * y), nil
			}
		}
		return pyjson.Int(new(bigInt).Mul(ai.Big(), bi.Big()).String()), nil
	}
	if !aflt {
		af, _ = new(bigFloat).SetInt(ai.Big()).Float64()
	}
	if !bflt {
		bf, _ = new(bigFloat).SetInt(bi.Big()).Float64()
	}
	return af * bf, nil
}

func inWorldSizes(ws pyjson.Value, sizes []int64) bool {
	for _, s := range sizes {
		switch x := ws.(type) {
		case pyjson.Int:
			if n, ok := x.Int64(); ok && n == s {
				return true
			}
		case float64:
			if x == float64(s) {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedUnique(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
