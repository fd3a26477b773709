// Package platform owns the runner table, hardware families and the platform registry (base
// profiles overlaid by a site's config).
//
// It owns the runner table (docs/compat-spec.md §2.1), hardware families, and the
// platform registry: the CollectiveX base profiles overlaid by a file keyed by runner label
// (§3.9, decisions §1–2), plus custom runners and the built-in local runner.
package platform

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/sol"
)

// Runner is one runner label and what follows from it.
type Runner struct {
	Label   string // e.g. "cluster:h100-dsxe"
	Cluster string // Slurm cluster id, OPERATORX_CLUSTER
	Profile string // CollectiveX profile in the base registry
	Family  string // hardware family, e.g. "h100"
	Builtin bool   // one of the seed's nine labels
}

// AMD reports whether the runner is an AMD one: its family is "mi" and a digit (mi300x,
// mi325x, mi355x). The seed tests only the "mi" prefix, which made a custom runner such as
// cluster:mini-lab (family "mini") AMD.
func (r Runner) AMD() bool {
	return len(r.Family) > 2 && strings.HasPrefix(r.Family, "mi") && r.Family[2] >= '0' && r.Family[2] <= '9'
}

// Vendor is "amd" or "nvidia".
func (r Runner) Vendor() string {
	if r.AMD() {
		return "amd"
	}
	return "nvidia"
}

// Local is the label of the built-in runner that runs shards on this machine.
const Local = "local"

// builtins is the seed's RUNNERS table; the order matters (load_platforms iterates it).
var builtins = []Runner{
	{Label: "cluster:h100-dsxe", Cluster: "h100_dgxc_8x", Profile: "h100-dgxc", Family: "h100", Builtin: true},
	{Label: "cluster:h200-dgxc", Cluster: "h200_dgxc_8x", Profile: "h200-dgxc", Family: "h200", Builtin: true},
	{Label: "cluster:b200-nscale", Cluster: "b200_nscale_8x", Profile: "b200-nscale", Family: "b200", Builtin: true},
	{Label: "cluster:b300-dsxe", Cluster: "b300_dsxe_8x", Profile: "b300", Family: "b300", Builtin: true},
	{Label: "cluster:gb200-nv", Cluster: "gb200_nvl72_4x", Profile: "gb200", Family: "gb200", Builtin: true},
	{Label: "cluster:gb300-nv", Cluster: "gb300_nvl72_4x", Profile: "gb300", Family: "gb300", Builtin: true},
	{Label: "cluster:mi300x-amd", Cluster: "mi300x_amds_8x", Profile: "mi300x", Family: "mi300x", Builtin: true},
	{Label: "cluster:mi325x-amds", Cluster: "mi325x_amds_8x", Profile: "mi325x", Family: "mi325x", Builtin: true},
	{Label: "cluster:mi355x-amds", Cluster: "mi355x_8x", Profile: "mi355x", Family: "mi355x", Builtin: true},
}

// BuiltinLabels returns the nine labels in order.
func BuiltinLabels() []string {
	out := make([]string, len(builtins))
	for i, r := range builtins {
		out[i] = r.Label
	}
	return out
}

// Builtin returns the built-in runner for label.
func Builtin(label string) (Runner, bool) {
	for _, r := range builtins {
		if r.Label == label {
			return r, true
		}
	}
	return Runner{}, false
}

// Family is the seed's family(): strip a leading "cluster:", keep the text before the first "-".
func Family(label string) string {
	label = strings.TrimPrefix(label, "cluster:")
	f, _, _ := strings.Cut(label, "-")
	return f
}

// ShortLabel is the label without "cluster:", the prefix of shard ids.
func ShortLabel(label string) string { return strings.TrimPrefix(label, "cluster:") }

// Registry is the merged platform table.
type Registry struct {
	entries map[string]*pyjson.Object
	runners map[string]Runner
	order   []string
	local   func() *pyjson.Object // builds the local runner's entry on first use
	harness []HarnessPath         // "affected"."harness" (harness.go)
}

// Runner returns the runner for label, built in or declared by the config.
func (g *Registry) Runner(label string) (Runner, bool) {
	r, ok := g.runners[label]
	return r, ok
}

// Entry returns the merged platform entry for label.
func (g *Registry) Entry(label string) (*pyjson.Object, bool) {
	if label == Local && g.local != nil {
		return g.local(), true
	}
	e, ok := g.entries[label]
	return e, ok
}

// Labels lists the runners of the registry: the built-ins in the seed's order, then custom
// runners sorted, then local.
func (g *Registry) Labels() []string { return append([]string(nil), g.order...) }

// Operator returns the entry's "operator" object (empty when absent).
func Operator(entry *pyjson.Object) *pyjson.Object {
	if op, ok := entry.Object("operator"); ok {
		return op
	}
	return pyjson.NewObject()
}

// ContainerMode is operator.container: "pyxis" (default) or "none"; local is always "none".
func ContainerMode(label string, entry *pyjson.Object) string {
	if label == Local {
		return "none"
	}
	if m, ok := Operator(entry).String("container"); ok && m != "" {
		return m
	}
	return "pyxis"
}

// LocalDefaults describes this machine for the local runner.
type LocalDefaults struct {
	GPUs int // devices on this machine, at least 1 (when CountGPUs is nil)
	// CountGPUs, when set, counts them (nvidia-smi -L / rocm-smi); it runs only when the
	// local runner's entry is read and the overlay does not set its gpus_per_node, so
	// planning for a cluster never execs a device tool on the submit host
	CountGPUs func() int
}

// Load reads a platform overlay (docs/compat-spec.md §3.9) and its "base", resolved relative to the
// overlay's own location, and merges them per runner label. Entries keyed by a label that
// is not built in declare custom runners and must carry "cluster" (decisions §1).
func Load(src catalog.Source, local LocalDefaults) (*Registry, error) {
	base, platforms, harness, err := readOverlay(src)
	if err != nil {
		return nil, err
	}
	g := &Registry{entries: map[string]*pyjson.Object{}, runners: map[string]Runner{}, harness: harness}
	for _, r := range builtins {
		own, _ := platforms.Object(r.Label)
		if own == nil {
			own = pyjson.NewObject()
		}
		profile, _ := base.Object(r.Profile)
		merged := merge(profile, own)
		if merged.Len() > 0 {
			g.entries[r.Label] = merged
			g.runners[r.Label] = r
			g.order = append(g.order, r.Label)
		}
	}
	if err := g.addCustom(src, base, platforms); err != nil {
		return nil, err
	}
	// the built-in local runner: this machine, no Slurm, no container (decisions §1)
	own, _ := platforms.Object(Local)
	g.local = sync.OnceValue(func() *pyjson.Object {
		gpus := local.GPUs
		if _, set := own.Get("gpus_per_node"); !set && local.CountGPUs != nil {
			gpus = local.CountGPUs()
		}
		entry := pyjson.Obj("gpus_per_node", max(gpus, 1), "image_platform", "linux/"+runtime.GOARCH,
			"operator", pyjson.Obj("container", "none"))
		if own != nil {
			entry = merge(entry, own)
		}
		return entry
	})
	g.runners[Local] = Runner{Label: Local, Cluster: "local", Profile: Local, Family: Local}
	g.order = append(g.order, Local)
	return g, nil
}

// readOverlay reads the overlay and its base registry, checking their shapes, and its
// harness mapping (harness.go: the overlay's own, not its base's).
func readOverlay(src catalog.Source) (base, platforms *pyjson.Object, harness []HarnessPath, err error) {
	v, err := src.ReadJSON()
	if err != nil {
		return nil, nil, nil, err
	}
	doc, ok := v.(*pyjson.Object)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s: a platform config is a JSON object, found %s", src.Name, pyjson.TypeName(v))
	}
	if harness, err = readHarness(src, doc); err != nil {
		return nil, nil, nil, err
	}
	base = pyjson.NewObject()
	if platforms, ok = doc.Object("platforms"); !ok {
		return nil, nil, nil, fmt.Errorf("%s: no \"platforms\" object", src.Name)
	}
	if b, ok := doc.Get("base"); ok {
		rel, ok := b.(string)
		if !ok {
			return nil, nil, nil, fmt.Errorf("%s: \"base\" is %s, not a path", src.Name, pyjson.TypeName(b))
		}
		if rel == EmbeddedBase {
			// beyond the seed: an overlay on opx's own embedded overlay (and its registry)
			eb, eplatforms, err := embeddedLayers()
			if err != nil {
				return nil, nil, nil, err
			}
			base, platforms = eb, overlay(eplatforms, platforms)
		} else if base, err = loadBase(src.Sibling(rel), src.Name); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, m := range platforms.Members() {
		o, ok := m.Value.(*pyjson.Object)
		if !ok {
			return nil, nil, nil, fmt.Errorf("%s: platforms.%s is %s, not an object", src.Name, safe.Text(m.Key), pyjson.TypeName(m.Value))
		}
		if op, ok := o.Get("operator"); ok {
			if _, ok := op.(*pyjson.Object); !ok {
				return nil, nil, nil, fmt.Errorf("%s: platforms.%s.operator is %s, not an object", src.Name, safe.Text(m.Key), pyjson.TypeName(op))
			}
		}
	}
	return base, platforms, harness, nil
}

// addCustom adds the overlay's entries that are not built-in labels: custom runners, which
// must declare their cluster (decisions §1), sorted by label.
func (g *Registry) addCustom(src catalog.Source, base, platforms *pyjson.Object) error {
	var custom []string
	for _, m := range platforms.Members() {
		if _, ok := Builtin(m.Key); ok || m.Key == Local {
			continue
		}
		custom = append(custom, m.Key)
	}
	sort.Strings(custom)
	for _, label := range custom {
		own, _ := platforms.Object(label)
		cluster, ok := own.String("cluster")
		if !ok || cluster == "" {
			return fmt.Errorf("%s: platforms.%q is not a built-in runner label and has no \"cluster\" to declare a custom runner (built-in: %s)",
				src.Name, label, strings.Join(BuiltinLabels(), ", "))
		}
		fam := Family(label)
		if f, ok := own.String("family"); ok && f != "" {
			fam = f
		}
		profile := pyjson.NewObject()
		if p, ok := own.String("profile"); ok {
			if bp, ok := base.Object(p); ok {
				profile = bp
			}
		}
		g.entries[label] = merge(profile, own)
		g.runners[label] = Runner{Label: label, Cluster: cluster, Profile: label, Family: fam}
		g.order = append(g.order, label)
	}
	return nil
}

// EmbeddedBase, as an overlay's "base", names opx's embedded platform overlay (with the
// registry under it): a site's file then only says what differs.
const EmbeddedBase = "opx:embedded"

// loadBase reads a base registry (keyed by profile) for the overlay named from.
func loadBase(bsrc catalog.Source, from string) (*pyjson.Object, error) {
	bv, err := bsrc.ReadJSON()
	if err != nil {
		return nil, fmt.Errorf("%s: base: %w", from, err)
	}
	bdoc, ok := bv.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("%s: a platform registry is a JSON object, found %s", bsrc.Name, pyjson.TypeName(bv))
	}
	bp, ok := bdoc.Object("platforms")
	if !ok {
		return nil, fmt.Errorf("%s: no \"platforms\" object", bsrc.Name)
	}
	for _, m := range bp.Members() {
		if _, ok := m.Value.(*pyjson.Object); !ok {
			return nil, fmt.Errorf("%s: platforms.%s is %s, not an object", bsrc.Name, safe.Text(m.Key), pyjson.TypeName(m.Value))
		}
	}
	return bp, nil
}

// embeddedLayers is the embedded overlay's base registry and its platforms.
func embeddedLayers() (base, platforms *pyjson.Object, err error) {
	src := catalog.Embedded("platforms.json")
	v, err := src.ReadJSON()
	if err != nil {
		return nil, nil, err
	}
	doc := v.(*pyjson.Object)
	rel, _ := doc.String("base")
	if base, err = loadBase(src.Sibling(rel), src.Name); err != nil {
		return nil, nil, err
	}
	platforms, _ = doc.Object("platforms")
	return base, platforms, nil
}

// overlay is lower's entries with upper's merged over them label by label (merge's rule).
func overlay(lower, upper *pyjson.Object) *pyjson.Object {
	out := pyjson.NewObject()
	for _, m := range lower.Members() {
		out.Set(m.Key, m.Value)
	}
	for _, m := range upper.Members() {
		own, _ := m.Value.(*pyjson.Object)
		if low, ok := out.Object(m.Key); ok && own != nil {
			out.Set(m.Key, merge(low, own))
			continue
		}
		out.Set(m.Key, m.Value)
	}
	return out
}

// merge is the seed's shallow merge with the operator object merged key by key.
func merge(base, own *pyjson.Object) *pyjson.Object {
	merged := pyjson.NewObject()
	if base != nil {
		for _, m := range base.Members() {
			merged.Set(m.Key, m.Value)
		}
	}
	for _, m := range own.Members() {
		merged.Set(m.Key, m.Value)
	}
	if op, ok := own.Object("operator"); ok {
		mo := pyjson.NewObject()
		if base != nil {
			if bo, ok := base.Object("operator"); ok {
				mo = bo.Clone()
			}
		}
		for _, m := range op.Members() {
			mo.Set(m.Key, m.Value)
		}
		merged.Set("operator", mo)
	}
	return merged
}

// Storage is where a runner's shards may be staged, from its operator profile, typed:
// the seed's shared_base reads these (docs/compat-spec.md §3.8).
type Storage struct {
	StageDir  string // operator.stage_dir ("" when unset, empty or null)
	SquashDir string // operator.squash_dir (the same)
	// Roots is operator.storage_roots: nil when it is not there, empty when it is an
	// empty list.
	Roots []string
}

// StorageOf reads the storage fields of a platform entry (as Entry returns it, merged). A
// field of the wrong type is an error naming it, where the seed would fail later on the
// node or take a number for a path.
func StorageOf(label string, entry *pyjson.Object) (Storage, error) {
	st, err := storageOf(entry)
	if err != nil {
		return st, fmt.Errorf("platform entry for %s: %w", label, err)
	}
	return st, nil
}

// storageOf is StorageOf, its error naming the field alone.
func storageOf(entry *pyjson.Object) (Storage, error) {
	op := Operator(entry)
	var st Storage
	text := func(key string) (string, error) {
		v, ok := op.Get(key)
		if !ok || v == nil {
			return "", nil
		}
		s, isText := v.(string)
		if !isText {
			return "", fmt.Errorf("operator.%s is %s, not a path", key, pyjson.TypeName(v))
		}
		return s, nil
	}
	var err error
	if st.StageDir, err = text("stage_dir"); err != nil {
		return st, err
	}
	if st.SquashDir, err = text("squash_dir"); err != nil {
		return st, err
	}
	if v, ok := op.Get("storage_roots"); ok && v != nil {
		list, isList := v.([]pyjson.Value)
		if !isList {
			return st, fmt.Errorf("operator.storage_roots is %s, not a list of paths", pyjson.TypeName(v))
		}
		st.Roots = make([]string, 0, len(list))
		for i, r := range list {
			root, isText := r.(string)
			if !isText {
				return st, fmt.Errorf("operator.storage_roots[%d] is %s, not a path", i, pyjson.TypeName(r))
			}
			st.Roots = append(st.Roots, root)
		}
	}
	return st, nil
}

// Entry is a runner's merged platform entry, typed and checked once: what execute needs
// of it to allocate and run a shard.
type Entry struct {
	Runner        Runner
	GPUsPerNode   int64
	ImagePlatform string
	Container     string  // "pyxis" or "none"
	Storage       Storage // where its shards are staged
	// Peaks is operator.peaks, the site's figures for %SOL (nil when it declares none): a
	// JSON object execution.json carries as it is; Site is the same, read and checked.
	Peaks     *pyjson.Object
	Site      *sol.Site
	Partition string // "" on the local runner
	// SallocFlags are --account, --qos and --exclude from the profile, as the seed writes them.
	SallocFlags     []string
	CPUsPerNode     int64 // operator.cpus_per_node; AMD runners need it
	EnrootCachePath string
}

// Lookup returns label's entry, typed, after checking everything a shard on it will
// need, so that a missing field is an error before anything is created or allocated.
// ok is false when the registry has no such runner or entry.
func (g *Registry) Lookup(label string) (e *Entry, ok bool, err error) {
	runner, ok1 := g.Runner(label)
	raw, ok2 := g.Entry(label)
	if !ok1 || !ok2 {
		return nil, false, nil
	}
	op := Operator(raw)
	e = &Entry{Runner: runner, Container: ContainerMode(label, raw)}
	if e.Storage, err = StorageOf(label, raw); err != nil {
		return nil, true, err
	}
	e.Peaks, _ = op.Object("peaks")
	if e.Site, err = SitePeaks(e.Peaks); err != nil {
		return nil, true, fmt.Errorf("platform entry for %s: %w", label, err)
	}
	gpus, _ := raw.Get("gpus_per_node")
	n, isInt := gpus.(pyjson.Int)
	if e.GPUsPerNode, ok = n.Int64(); !isInt || !ok {
		return nil, true, fmt.Errorf("platform entry for %s needs an integer gpus_per_node", label)
	}
	e.ImagePlatform, _ = raw.String("image_platform")
	e.EnrootCachePath, _ = op.String("enroot_cache_path")
	if label == Local {
		return e, true, nil
	}
	if e.Partition, ok = op.String("partition"); !ok {
		return nil, true, fmt.Errorf("platform entry for %s has no operator.partition", label)
	}
	for _, f := range [][2]string{{"account", "account"}, {"qos", "qos"}, {"exclude_nodes", "exclude"}} {
		if v, _ := op.Get(f[0]); pyjson.Truthy(v) {
			e.SallocFlags = append(e.SallocFlags, "--"+f[1]+"="+strings.Trim(string(pyjson.MustMarshal(v, pyjson.Default)), `"`))
		}
	}
	if runner.AMD() {
		cpus, _ := op.Get("cpus_per_node")
		n, isInt := cpus.(pyjson.Int)
		if e.CPUsPerNode, ok = n.Int64(); !isInt || !ok {
			return nil, true, fmt.Errorf("platform entry for %s needs an integer operator.cpus_per_node", label)
		}
	}
	return e, true, nil
}

// SitePeaks reads a platform entry's operator.peaks ("bf16_tflops", "fp8_tflops",
// "fp4_tflops", "hbm_tbps": positive numbers; "source": text), as execute checks it before
// allocating and summarize reads it back from execution.json; nil when o is nil.
func SitePeaks(o *pyjson.Object) (*sol.Site, error) {
	if o == nil {
		return nil, nil
	}
	s := &sol.Site{TFLOPS: map[string]float64{}}
	for _, m := range o.Members() {
		if m.Key == "source" {
			src, ok := m.Value.(string)
			if !ok {
				return nil, fmt.Errorf("operator.peaks.source is %s, not a string", pyjson.TypeName(m.Value))
			}
			s.Source = src
			continue
		}
		f, ok := o.Number(m.Key)
		if !ok {
			return nil, fmt.Errorf("operator.peaks.%s is %s, not a number", m.Key, pyjson.TypeName(m.Value))
		}
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("operator.peaks.%s must be a positive number", m.Key)
		}
		switch m.Key {
		case "bf16_tflops", "fp8_tflops", "fp4_tflops":
			s.TFLOPS[strings.TrimSuffix(m.Key, "_tflops")] = f
		case "hbm_tbps":
			s.HBM = f
		default:
			return nil, fmt.Errorf("operator.peaks.%s is not one of bf16_tflops, fp8_tflops, fp4_tflops, hbm_tbps, source", m.Key)
		}
	}
	return s, nil
}

// Facts is a runner's entry as the commands that show it (doctor, list) read it:
// leniently, each field as the entry has it ("" or unknown when absent), with Missing
// naming what execute would refuse. Lookup is the strict reading plan and execute use.
type Facts struct {
	Runner        Runner
	GPUsPerNode   int64 // valid when GPUsKnown: gpus_per_node is an integer
	GPUsKnown     bool
	ImagePlatform string
	Container     string // operator.container: "pyxis" (default) or "none"; local: "none"
	Partition     string
	Storage       Storage // valid when StorageErr is nil
	StorageErr    error
	Missing       []string // as Missing words it; empty when execute has all it reads
}

// Facts returns label's entry, read leniently (ok false when the registry has no such
// runner or entry).
func (g *Registry) Facts(label string) (f *Facts, ok bool) {
	runner, ok1 := g.Runner(label)
	raw, ok2 := g.Entry(label)
	if !ok1 || !ok2 {
		return nil, false
	}
	f = &Facts{Runner: runner, Container: ContainerMode(label, raw), Missing: Missing(runner, raw)}
	gpus, _ := raw.Get("gpus_per_node")
	n, isInt := gpus.(pyjson.Int)
	f.GPUsPerNode, f.GPUsKnown = n.Int64()
	f.GPUsKnown = f.GPUsKnown && isInt
	f.ImagePlatform, _ = raw.String("image_platform")
	f.Partition, _ = Operator(raw).String("partition")
	f.Storage, f.StorageErr = StorageOf(label, raw)
	return f, true
}

// Missing is what a runner's entry lacks that execute will read — plan refuses such a
// runner and doctor fails it, both in these words, before any node is allocated:
// gpus_per_node (an integer), image_platform, operator.partition (but for the local
// runner), operator.cpus_per_node on AMD runners (their salloc gets
// --cpus-per-task=cpus_per_node/gpus_per_node), a container mode of pyxis or none,
// storage paths (stage_dir, squash_dir, storage_roots) that are text, and operator.peaks,
// when declared, as SitePeaks reads them.
func Missing(r Runner, e *pyjson.Object) []string {
	isInt := func(v pyjson.Value) bool { _, ok := v.(pyjson.Int); return ok }
	var missing []string
	if v, ok := e.Get("gpus_per_node"); !ok {
		missing = append(missing, "gpus_per_node")
	} else if !isInt(v) {
		missing = append(missing, "gpus_per_node (an integer)")
	}
	if s, _ := e.String("image_platform"); s != "linux/amd64" && s != "linux/arm64" {
		missing = append(missing, "image_platform (linux/amd64 or linux/arm64)")
	}
	op := Operator(e)
	if r.Label != Local {
		if s, _ := op.String("partition"); s == "" {
			missing = append(missing, "operator.partition")
		}
	}
	if r.AMD() {
		if v, _ := op.Get("cpus_per_node"); !isInt(v) {
			missing = append(missing, "operator.cpus_per_node (an integer: AMD shards get --cpus-per-task=cpus_per_node/gpus_per_node)")
		}
	}
	if m := ContainerMode(r.Label, e); m != "pyxis" && m != "none" {
		missing = append(missing, fmt.Sprintf("operator.container (%q is neither pyxis nor none)", m))
	}
	if _, err := storageOf(e); err != nil {
		missing = append(missing, err.Error())
	}
	if peaks, _ := op.Object("peaks"); peaks != nil {
		if _, err := SitePeaks(peaks); err != nil {
			missing = append(missing, "valid operator.peaks ("+err.Error()+")")
		}
	}
	return missing
}
