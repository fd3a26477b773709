// Package manifest is the data a shard carries from plan to report, typed where it is read: the
// manifest, execution.json, status.json, accounting.json and the ids derived from them.
//
// It is the data a shard carries from plan to report, typed once where it is
// read: the manifest plan writes (its cells and their cases), the execution.json execute
// writes beside each shard's output, and the identifiers derived from them (image keys,
// queue tokens, master ports). A cell keeps its raw ordered object too, where bytes must
// be reproduced (shard ids hash it; execution.json records it as the manifest had it).
package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/pytext"
)

// Manifest is operatorx-manifest.json (docs/compat-spec.md §5).
type Manifest struct {
	Path             string
	RunID, SourceSHA string
	Cells            []*Cell
	Raw              *pyjson.Object
	file             *os.File // LoadIndex's: the file its cells' cases are read from
}

// Cell is one shard of the manifest: where it runs, in which image, and its cases.
// Fields a manifest lacks (or has with another type) are zero here; Check says which the
// shard needs to run.
type Cell struct {
	ID, Runner, Cluster                     string
	Image, Digest, ImportURI, ImagePlatform string
	Mode                                    string // "timing" when the cell has none
	Recipe, Checkpoint                      string
	GPUsPerNode, WorldSize, Nodes           int64
	HasGPUs, HasWorldSize                   bool // the two were integers
	Backends                                []string
	// ExcludeNodes are nodes the cell must not run on (beyond the seed: a confirmation
	// manifest of opx history names where its suspects were measured).
	ExcludeNodes         []string
	Env                  []pyjson.Member // the cell's env, in order
	EngineArgs, Parallel pyjson.Value    // as the manifest has them
	Cases                []Case
	NumCases             int // how many cases it lists (an index or a head lists none in Cases)
	Raw                  *pyjson.Object
	casesAt              *casesAt // LoadIndex's: where its cases are (ReadCases)
}

// Case is one requested shape of a cell. In a manifest read with LoadOutline (and an
// execution read with ReadExecutionHead) the case is left as its JSON text, Text, compact,
// and Testlist and Shape are unset: results.CellCases reads it.
type Case struct {
	Testlist string
	Shape    pyjson.Value
	Text     pyjson.Raw
}

// Load reads a manifest and every cell's cases.
func Load(ctx context.Context, path string) (*Manifest, error) { return load(ctx, path, math.MaxInt) }

// LoadOutline reads a manifest without building its cases (a 128,000-case sweep's manifest
// is tens of megabytes): for readers that need the cells and how many cases they have,
// each case kept as its text (Case.Text).
func LoadOutline(ctx context.Context, path string) (*Manifest, error) {
	return load(ctx, path, 4) // document, include, cell, cases: a case is depth 4
}

func load(ctx context.Context, path string, depth int) (*Manifest, error) {
	v, err := files.ReadJSONDepth(ctx, path, depth)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("manifest %s: %w", path, fs.ErrNotExist)
		}
		return nil, err
	}
	if depth < math.MaxInt {
		v = pyjson.Detach(v) // each cell's shapes own their text: a reader lets a cell go alone
	}
	o, _ := v.(*pyjson.Object)
	m := &Manifest{Path: path, Raw: o}
	include, isList := []pyjson.Value(nil), false
	hasRun, hasSHA := false, false
	if o != nil {
		m.RunID, hasRun = o.String("run_id")
		m.SourceSHA, hasSHA = o.String("source_sha")
		include, isList = o.Array("include")
	}
	if !hasRun || !hasSHA || !isList {
		return nil, fmt.Errorf("%s: a manifest needs string run_id and source_sha and an include list", path)
	}
	for i, c := range include {
		co, _ := c.(*pyjson.Object)
		_, hasID := co.String("id")
		_, hasCases := co.Array("cases")
		if !hasID || !hasCases {
			return nil, fmt.Errorf("%s: include[%d] needs a string id and a cases list", path, i)
		}
		m.Cells = append(m.Cells, DecodeCell(co))
	}
	return m, nil
}

// Cell returns the cell with the given id.
func (m *Manifest) Cell(id string) (*Cell, bool) {
	for _, c := range m.Cells {
		if c.ID == id {
			return c, true
		}
	}
	return nil, false
}

// DecodeCell is the typed view of a cell object.
func DecodeCell(o *pyjson.Object) *Cell {
	c := &Cell{Raw: o, Mode: "timing"}
	for _, f := range []struct {
		key string
		to  *string
	}{{"id", &c.ID}, {"runner", &c.Runner}, {"cluster", &c.Cluster}, {"image", &c.Image}, {"digest", &c.Digest},
		{"import_uri", &c.ImportURI}, {"image_platform", &c.ImagePlatform}, {"mode", &c.Mode},
		{"recipe", &c.Recipe}, {"checkpoint", &c.Checkpoint}} {
		if s, ok := o.String(f.key); ok {
			*f.to = s
		}
	}
	c.GPUsPerNode, c.HasGPUs = intField(o, "gpus_per_node")
	c.WorldSize, c.HasWorldSize = intField(o, "world_size")
	c.Nodes, _ = intField(o, "nodes")
	bs, _ := o.Array("backends")
	for _, b := range bs {
		s, _ := b.(string)
		c.Backends = append(c.Backends, s)
	}
	xs, _ := o.Array("exclude_nodes")
	for _, x := range xs {
		if s, ok := x.(string); ok && s != "" {
			c.ExcludeNodes = append(c.ExcludeNodes, s)
		}
	}
	if e, ok := o.Object("env"); ok {
		c.Env = e.Members()
	}
	c.EngineArgs, _ = o.Get("engine_args")
	c.Parallel, _ = o.Get("parallel")
	cases, _ := o.Array("cases")
	c.NumCases = len(cases)
	for _, cv := range cases {
		co, ok := cv.(*pyjson.Object)
		if !ok { // read as an outline: the case's text
			raw, _ := cv.(pyjson.Raw)
			c.Cases = append(c.Cases, Case{Text: raw})
			continue
		}
		name, _ := co.String("testlist")
		shape, _ := co.Get("shape")
		c.Cases = append(c.Cases, Case{Testlist: name, Shape: shape})
	}
	return c
}

func intField(o *pyjson.Object, k string) (int64, bool) {
	v, _ := o.Get(k)
	n, ok := v.(pyjson.Int)
	if !ok {
		return 0, false
	}
	return n.Int64()
}

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidEnv is whether name=value can be set for a rank: a name of letters, digits and _
// (not first a digit), a value without a NUL. Every variable opx sets for the harness
// from outside text (a cell's env, an A/B side's) is held to it.
func ValidEnv(name, value string) bool {
	return envName.MatchString(name) && !strings.ContainsRune(value, 0)
}

// Check validates, before anything is created or allocated, every cell field that
// becomes a path, an argument or an environment variable (beyond the seed, which trusts
// the manifest): the cluster names the harness's results directory; backends are joined
// with "," into OPERATORX_BACKENDS; env members become variables; mode, image and import
// URI become arguments; testlist names become file names.
func (c *Cell) Check() error {
	if !files.SafeName(c.Cluster) {
		cluster, _ := c.Raw.String("cluster")
		return fmt.Errorf("has cluster %s: use letters, digits, '.', '_' and '-'", pytext.Repr(cluster))
	}
	backends, ok := c.Raw.Array("backends")
	if !ok || len(backends) == 0 {
		return errors.New("needs a non-empty backends list")
	}
	for _, b := range backends {
		if s, ok := b.(string); !ok || !files.SafeName(s) {
			return fmt.Errorf("has backend %s: use letters, digits, '.', '_' and '-'", pytext.Repr(fmt.Sprint(b)))
		}
	}
	if xs, ok := c.Raw.Get("exclude_nodes"); ok {
		list, isList := xs.([]pyjson.Value)
		if !isList {
			return errors.New("exclude_nodes must be a list of node names")
		}
		for _, x := range list {
			if s, ok := x.(string); !ok || !files.SafeName(s) {
				return fmt.Errorf("has exclude_nodes entry %s: a node name (letters, digits, '.', '_' and '-')", pytext.Repr(fmt.Sprint(x)))
			}
		}
	}
	if mode, ok := c.Raw.String("mode"); ok && mode != "timing" && mode != "counters" {
		return fmt.Errorf("has mode %s: timing or counters", pytext.Repr(mode))
	}
	if v, ok := c.Raw.Get("env"); ok && v != nil {
		e, isObj := v.(*pyjson.Object)
		if !isObj {
			return errors.New("env must be an object of strings")
		}
		for _, m := range e.Members() {
			val, isStr := m.Value.(string)
			if !isStr || !ValidEnv(m.Key, val) {
				return fmt.Errorf("env member %s is not NAME: string", pytext.Repr(m.Key))
			}
		}
	}
	for _, f := range []struct{ key, v string }{{"image", c.Image}, {"import_uri", c.ImportURI}} {
		if strings.ContainsFunc(f.v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("has %s %s: no spaces or control characters", f.key, pytext.Repr(f.v))
		}
	}
	if c.ImportURI != "" && !strings.HasPrefix(c.ImportURI, "docker://") {
		return fmt.Errorf("has import_uri %s: it must be docker://<image>", pytext.Repr(c.ImportURI))
	}
	return nil
}

// Testlist is one testlist's shapes as a cell carries them, in case order: what execute
// writes into the stage for the harness.
type Testlist []pyjson.Value

// Write writes the testlist as the harness reads it.
func (t Testlist) Write(path string) error { return files.WriteJSON(path, []pyjson.Value(t)) }

// EngineArgsJSON and ParallelJSON are the cell's engine_args and parallel as the harness's
// environment carries them: json.dumps of the value, {} when it is empty or absent.
func (c *Cell) EngineArgsJSON() string { return objectJSON(c.EngineArgs) }

// ParallelJSON: see EngineArgsJSON.
func (c *Cell) ParallelJSON() string { return objectJSON(c.Parallel) }

func objectJSON(v pyjson.Value) string {
	if !pyjson.Truthy(v) {
		return "{}"
	}
	return string(pyjson.MustMarshal(v, pyjson.Default))
}

// Testlists groups the cell's case shapes by testlist, in case order, and returns the
// testlist names sorted.
func (c *Cell) Testlists() (names []string, shapes map[string]Testlist, err error) {
	cases, _ := c.Raw.Array("cases")
	shapes = map[string]Testlist{}
	for i, cv := range cases {
		if _, ok := cv.(*pyjson.Object); !ok {
			return nil, nil, errors.New("manifest case is not an object")
		}
		name := c.Cases[i].Testlist
		if !catalog.ValidTestlistName(name) {
			return nil, nil, fmt.Errorf("manifest case names an invalid testlist %s", pytext.Repr(name))
		}
		if _, seen := shapes[name]; !seen {
			names = append(names, name)
		}
		shapes[name] = append(shapes[name], c.Cases[i].Shape)
	}
	sort.Strings(names)
	return names, shapes, nil
}
