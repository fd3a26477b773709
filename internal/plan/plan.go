// Package plan owns the planner: a selection (runner, backends, testlists, world sizes) made into
// the manifest's shards, as OperatorX CI (ci.py) plans them.
//
// It owns the planner: it turns a selection (runner, backends, testlists, world
// sizes, chunk size, mode) into the manifest's shards with the seed's exact semantics
// (docs/compat-spec.md §5), and computes the ids, image keys, enroot URIs and queue tokens that
// everything downstream keys on.
package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/semianalysis/opx/internal/suggest"
	"maps"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
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

// SelectionError is a selection the planner refuses (ci.py raises these as ValueErrors): the message is
// the contract.
type SelectionError struct{ Msg string }

func (e *SelectionError) Error() string { return e.Msg }

// SuggestRunner is the runner label a mistyped one most likely meant: within two edits
// of a label, its "cluster:" prefix left out or written with "_" for "-" (h200-dgxc,
// h200_dgxc: cluster:h200-dgxc); "" when none is near.
func SuggestRunner(name string, labels []string) string {
	bare := strings.ReplaceAll(strings.TrimPrefix(name, "cluster:"), "_", "-")
	var bares []string
	for _, l := range labels {
		bares = append(bares, strings.TrimPrefix(l, "cluster:"))
	}
	if best := suggest.Closest(bare, bares); best != "" {
		for _, l := range labels {
			if strings.TrimPrefix(l, "cluster:") == best {
				return l
			}
		}
	}
	return ""
}

// didYouMean is "; did you mean X?" for a suggestion, "" for none.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return "; did you mean " + s + "?"
}

func selectionErr(format string, args ...any) error {
	return &SelectionError{fmt.Sprintf(format, args...)}
}

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

// Plan is ci.py's plan() (docs/compat-spec.md §5.2–§5.4): it returns
// {"version": 1, "excluded_shapes": N, "include": [cells]}, and, beyond ci.py, a line for
// each selected world size no shape of the testlists runs at (a plan drops them).
func Plan(sel Selection, in Inputs) (*pyjson.Object, []string, error) {
	p, err := check(sel, in)
	if err != nil {
		return nil, nil, err
	}
	if err := p.group(); err != nil {
		return nil, nil, err
	}
	cells := p.cells(p.shards())
	if len(cells) == 0 {
		return nil, nil, selectionErr("selection contains no runnable shapes (%s)", p.sizesWhy())
	}
	if len(cells) > MaxShards {
		return nil, nil, selectionErr("selection exceeds 256 shards; narrow the testlists/backends/world sizes")
	}
	include := make([]pyjson.Value, len(cells))
	for i, c := range cells {
		cases := make([]pyjson.Value, len(c.cases))
		for j, k := range c.cases {
			cases[j] = pyjson.Obj("testlist", p.kept[k].list, "shape", p.kept[k].shape)
		}
		c.cell.Set("cases", cases)
		include[i] = WithID(c.cell)
	}
	return pyjson.Obj("version", 1, "excluded_shapes", p.excluded, "include", include), p.dropped(), nil
}

// dropped is a line naming the selected world sizes no shape runs at, and why; none when
// every selected size has shapes.
func (p *planner) dropped() []string {
	var none []string
	for _, ws := range p.sel.WorldSizes {
		if p.sizes[ws] == 0 && !slices.Contains(none, strconv.FormatInt(ws, 10)) {
			none = append(none, strconv.FormatInt(ws, 10))
		}
	}
	if len(none) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("world size %s dropped: %s", strings.Join(none, ", "), p.sizesWhy())}
}

// sizesWhy says at which world sizes the selected testlists' shapes run.
func (p *planner) sizesWhy() string {
	var names []string
	for _, tl := range dedupe(p.sel.Testlists) {
		names = append(names, tl.Name)
	}
	have := slices.Sorted(maps.Keys(p.sizes))
	var at []string
	for _, ws := range have {
		at = append(at, strconv.FormatInt(ws, 10))
	}
	var sel []string
	for _, ws := range p.sel.WorldSizes {
		sel = append(sel, strconv.FormatInt(ws, 10))
	}
	if len(at) == 0 {
		return fmt.Sprintf("the shapes of %s name no world size opx runs", strings.Join(names, ", "))
	}
	return fmt.Sprintf("the shapes of %s run at world size %s; selected %s", strings.Join(names, ", "), strings.Join(at, ", "), strings.Join(sel, ", "))
}

// planner is one Plan: the checked selection and the shapes it keeps, grouped.
type planner struct {
	sel           Selection
	in            Inputs
	runner        platform.Runner
	entry         *pyjson.Object
	gpusV         pyjson.Value // the entry's gpus_per_node, as the cell repeats it
	imagePlatform string
	kept          []keptShape // in testlist order
	groups        map[groupKey][]int
	recipes       map[string]*recipes.Match
	excluded      int64
	sizes         map[int64]int // the shapes at each world size, selected or not
}

// groupKey is what puts shapes into one shard: their split, recipe and process state.
type groupKey struct{ split, recipe, state string }

type keptShape struct {
	list  string
	shape *pyjson.Object
}

// check validates the selection against the runner (the seed's messages and order).
func check(sel Selection, in Inputs) (*planner, error) {
	runner, ok := in.Registry.Runner(sel.Runner)
	if !ok {
		return nil, selectionErr("unsupported runner: %s (runners: %s; see opx list runners%s)", sel.Runner, strings.Join(in.Registry.Labels(), ", "),
			didYouMean(SuggestRunner(sel.Runner, in.Registry.Labels())))
	}
	if !slices.Contains(Modes, sel.Mode) {
		return nil, selectionErr("mode must be one of timing, counters")
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
			return nil, selectionErr("runner must supply one to eight devices on this machine")
		}
	} else if !isInt || !fits || (gpus != 4 && gpus != 8) {
		return nil, selectionErr("runner must supply four or eight GPUs per physical node")
	}
	imagePlatform, _ := ipV.(string)
	if imagePlatform != "linux/amd64" && imagePlatform != "linux/arm64" {
		return nil, selectionErr("unsupported image platform")
	}
	if err := checkBackends(sel, in, runner, entry); err != nil {
		return nil, err
	}
	if err := checkSizes(sel, gpus); err != nil {
		return nil, err
	}
	return &planner{sel: sel, in: in, runner: runner, entry: entry, gpusV: gpusV, imagePlatform: imagePlatform,
		groups: map[groupKey][]int{}, recipes: map[string]*recipes.Match{}, sizes: map[int64]int{}}, nil
}

// checkBackends: registered for the platform, not cpu in counters mode, and on AMD only
// the ops and backends it supports.
func checkBackends(sel Selection, in Inputs, runner platform.Runner, entry *pyjson.Object) error {
	if len(sel.Backends) == 0 {
		return selectionErr("select at least one registered backend for this GPU platform")
	}
	for _, b := range sel.Backends {
		if !registered(in, runner, entry, b) {
			return selectionErr("select at least one registered backend for this GPU platform")
		}
	}
	// beyond the seed: a combination that can only fail after allocation is refused here
	if sel.Mode == "counters" && slices.Contains(sel.Backends, CPU) {
		return selectionErr("counters mode profiles GPU kernels with ncu or rocprofv3; the cpu backend has none (use --mode timing)")
	}
	if !runner.AMD() {
		return nil
	}
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
		return selectionErr("AMD CI supports the torch/vllm GEMM, MoE and attention ops")
	}
	return nil
}

// checkSizes: world sizes from 1,2,4,8 within the node, torch at 1 only, a chunk size of
// 1 to 500.
func checkSizes(sel Selection, gpus int64) error {
	var offered []string // the sizes this runner offers
	for _, w := range []int64{1, 2, 4, 8} {
		if w <= gpus {
			offered = append(offered, strconv.FormatInt(w, 10))
		}
	}
	// ci.py's words, then, on the local runner, the sizes this machine offers (never the
	// clusters' 1,2,4,8)
	pick := "world sizes must be selected from 1,2,4,8 (single node)"
	if sel.Runner == platform.Local {
		pick += fmt.Sprintf(" (the local runner offers world sizes %s on this machine: %d device(s))", strings.Join(offered, ", "), gpus)
	}
	if len(sel.WorldSizes) == 0 {
		return selectionErr("%s", pick)
	}
	for _, ws := range sel.WorldSizes {
		if ws != 1 && ws != 2 && ws != 4 && ws != 8 {
			return selectionErr("%s", pick)
		}
	}
	for _, ws := range sel.WorldSizes {
		if ws > gpus {
			if sel.Runner == platform.Local {
				return selectionErr("world size %d exceeds the local runner's %d device(s) on this machine (it offers world sizes %s)", ws, gpus, strings.Join(offered, ", "))
			}
			return selectionErr("world size exceeds the runner's %d-GPU physical node (it offers world sizes %s)", gpus, strings.Join(offered, ", "))
		}
	}
	if slices.Contains(sel.Backends, "torch") && !(len(sel.WorldSizes) == 1 && sel.WorldSizes[0] == 1) {
		return selectionErr("the torch backend runs single-device GEMM only")
	}
	if sel.ChunkSize < 1 || sel.ChunkSize > 500 {
		return selectionErr("chunk size must be between 1 and 500")
	}
	return nil
}

// group keeps the shapes whose split's world size was selected, in testlist order (the
// testlists sorted by name, repeats dropped), and groups them by split, recipe and state.
func (p *planner) group() error {
	lists := append([]Testlist(nil), p.sel.Testlists...)
	sort.SliceStable(lists, func(i, j int) bool { return lists[i].Name < lists[j].Name })
	for _, tl := range dedupe(lists) {
		for i, s := range tl.Shapes {
			shape := s.(*pyjson.Object)
			key, wanted, err := p.keyOf(shape)
			if err != nil {
				return fmt.Errorf("testlist %s: shape [%d]: %w", tl.Name, i, err)
			}
			if !wanted {
				p.excluded++
				continue
			}
			p.groups[key] = append(p.groups[key], len(p.kept))
			p.kept = append(p.kept, keptShape{tl.Name, shape})
		}
	}
	return nil
}

// keyOf is a shape's group, and whether its split's world size was selected.
func (p *planner) keyOf(shape *pyjson.Object) (groupKey, bool, error) {
	args, _ := shape.Object("args")
	par, _ := args.Get("parallel")
	var split *pyjson.Object
	switch x := par.(type) {
	case nil:
		split = recipes.Normalize(nil)
	case *pyjson.Object:
		split = recipes.Normalize(x)
	default:
		return groupKey{}, false, fmt.Errorf("args.parallel is %s, not an object", pyjson.TypeName(par))
	}
	ws, err := WorldSize(split)
	if err != nil {
		return groupKey{}, false, fmt.Errorf("args.parallel: %w", err)
	}
	if n, ok := worldSizeInt(ws); ok {
		p.sizes[n]++
	}
	if !inWorldSizes(ws, p.sel.WorldSizes) {
		return groupKey{}, false, nil
	}
	key := groupKey{split: string(pyjson.MustMarshal(split, pyjson.Identity)), state: "engine"}
	typ, _ := shape.String("type")
	recipe, err := p.recipeFor(shape, split, typ)
	if err != nil {
		return groupKey{}, false, err
	}
	if recipe != nil {
		p.recipes[recipe.Recipe] = recipe
		key.recipe = recipe.Recipe
	}
	// attention builds its own engine; never in a process with gemm/moe
	if typ == "gemm" || typ == "moe" {
		key.state = "layer"
	}
	return key, true, nil
}

// recipeFor is the first recipe of a selected framework backend that serves the shape.
func (p *planner) recipeFor(shape, split *pyjson.Object, typ string) (*recipes.Match, error) {
	if p.in.Recipes == nil {
		return nil, nil
	}
	for _, b := range p.sel.Backends {
		if !recipes.IsFramework(b) {
			continue
		}
		ck, err := checkpoints(shape)
		if err != nil {
			return nil, err
		}
		if r := p.in.Recipes.Find(b, p.runner.Family, ck, split, SplitAxes(typ)); r != nil {
			return r, nil
		}
	}
	return nil, nil
}

// shard is one group's cases under one image, before chunking.
type shard struct {
	image    string
	backends []string
	ws       pyjson.Value
	cases    []int // into kept
	extra    *pyjson.Object
}

// shards splits each group (in split, recipe, state order) by image: a recipe's framework
// backend runs in the recipe's image, the other backends each under their own.
func (p *planner) shards() []shard {
	imageGroups := map[string][]string{} // sorted unique backends, each under its image
	for _, b := range sortedUnique(p.sel.Backends) {
		img, _ := ImageFor(p.in, p.runner, p.entry, b)
		imageGroups[img] = append(imageGroups[img], b)
	}
	keys := slices.SortedFunc(maps.Keys(p.groups), func(a, b groupKey) int {
		return cmp.Or(strings.Compare(a.split, b.split), strings.Compare(a.recipe, b.recipe), strings.Compare(a.state, b.state))
	})
	var out []shard
	for _, k := range keys {
		cases := p.groups[k]
		sv, _ := pyjson.Parse([]byte(k.split)) // back from JSON: keys dcp, dp, ep, tp
		split := sv.(*pyjson.Object)
		ws, _ := WorldSize(split)
		rest := imageGroups
		if k.recipe != "" {
			r := p.recipes[k.recipe]
			framework := ""
			for _, b := range p.sel.Backends {
				if recipes.IsFramework(b) {
					framework = b
					break
				}
			}
			out = append(out, shard{r.Image, []string{framework}, ws, cases, pyjson.Obj(
				"parallel", split, "recipe", k.recipe, "recipe_match", r.Match,
				"checkpoint", r.Checkpoint, "env", r.Env, "engine_args", r.EngineArgs)})
			rest = map[string][]string{}
			for img, bs := range imageGroups {
				rest[img] = slices.DeleteFunc(slices.Clone(bs), func(b string) bool { return b == framework })
			}
		}
		for _, img := range slices.Sorted(maps.Keys(rest)) {
			if len(rest[img]) > 0 {
				out = append(out, shard{img, rest[img], ws, cases, pyjson.Obj("parallel", split)})
			}
		}
	}
	return out
}

// plannedCell is a cell without its cases and id yet.
type plannedCell struct {
	cell  *pyjson.Object
	cases []int
}

// cells chunks each shard into cells of at most ChunkSize cases (stopping once there are
// more than MaxShards: the message is the same).
func (p *planner) cells(shards []shard) []plannedCell {
	var cells []plannedCell
	for _, s := range shards {
		for off := 0; off < len(s.cases); off += int(p.sel.ChunkSize) {
			end := min(off+int(p.sel.ChunkSize), len(s.cases))
			cell := pyjson.Obj(
				"runner", p.sel.Runner,
				"cluster", p.runner.Cluster,
				"nodes", 1,
				"gpus_per_node", p.gpusV,
				"image_platform", p.imagePlatform,
				"world_size", s.ws,
				"image", s.image,
				"mode", p.sel.Mode,
				"backends", s.backends,
				"offset", off,
				"cases", nil, // set with the id
			)
			for _, m := range s.extra.Members() {
				cell.Set(m.Key, m.Value)
			}
			cells = append(cells, plannedCell{cell, s.cases[off:end]})
		}
		if len(cells) > MaxShards {
			break
		}
	}
	return cells
}

// WithID returns {"id": <label>-<16 hex of sha256(json.dumps(cell, sort_keys=True))>, ...cell}
// (docs/compat-spec.md §5.4).
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

// SplitAxes is the seed's _split_axes (docs/compat-spec.md §3.11, §16.2).
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
		if !slices.Contains(out, c) {
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
		return pyjson.Int(new(big.Int).Mul(ai.Big(), bi.Big()).String()), nil
	}
	if !aflt {
		af, _ = new(big.Float).SetInt(ai.Big()).Float64()
	}
	if !bflt {
		bf, _ = new(big.Float).SetInt(bi.Big()).Float64()
	}
	return af * bf, nil
}

// worldSizeInt is a world size as an integer, when it is a whole number.
func worldSizeInt(ws pyjson.Value) (int64, bool) {
	switch x := ws.(type) {
	case pyjson.Int:
		return x.Int64()
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
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
