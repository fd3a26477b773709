package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pytext"
)

type listOptions struct {
	platformConfig, containers, testlistDir string
	json                                    bool
}

func newListCmd(env Env) *cobra.Command {
	o := &listOptions{}
	c := &cobra.Command{
		Use:   "list runners|backends|testlists|images",
		Short: "List the runners, backends, testlists and images opx knows",
		Long: `List what a plan can name:
  runners    every runner label: cluster, hardware family, vendor, GPUs per node, image
             platform and container mode (pyxis, none, or local)
  backends   the backends of each vendor (containers.toml) and the built-in cpu backend
  testlists  every testlist: cases and op types
  images     the container image (and pinned digest) of each vendor and backend
--json prints the same records as a JSON array of objects. The embedded catalog is
listed unless --platform-config, --containers or --testlist-dir
replace a part of it, as they do for plan.`,
		Example: `  opx list runners
  opx list testlists --testlist-dir ./testlists`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &UsageError{fmt.Errorf("say what to list: runners, backends, testlists or images")}
			}
			return nil
		},
		ValidArgs: []string{"runners", "backends", "testlists", "images"},
		RunE:      func(c *cobra.Command, args []string) error { return runList(env, o, args[0]) },
	}
	f := c.Flags()
	f.StringVar(&o.platformConfig, "platform-config", "", "platform config JSON (default: the embedded one)")
	f.StringVar(&o.containers, "containers", "", "containers.toml (default: the embedded one)")
	f.StringVar(&o.testlistDir, "testlist-dir", "", "testlist directory (default: the embedded testlists)")
	f.BoolVar(&o.json, "json", false, "print the list as a JSON array of objects, for scripts")
	return c
}

func runList(env Env, o *listOptions, what string) error {
	var rows any
	var err error
	switch what {
	case "runners":
		rows, err = listRunners(o)
	case "backends":
		rows, err = listBackends(o)
	case "images":
		rows, err = listImages(o)
	case "testlists":
		rows, err = listTestlists(o)
	default:
		return &UsageError{fmt.Errorf("opx list takes runners, backends, testlists or images, not %s", pytext.Repr(what))}
	}
	if err != nil {
		return err
	}
	if o.json { // the same records, for scripts: an array of objects
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	v := reflect.ValueOf(rows)
	for i := range v.Len() {
		r := v.Index(i).Interface().(tableRow)
		if i == 0 {
			fmt.Fprintln(tw, strings.Join(r.header(), "\t"))
		}
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	return nil
}

// tableRow is one record of a list as its table shows it.
type tableRow interface {
	header() []string
	cells() []string
}

type runnerRow struct {
	Runner        string `json:"runner"`
	Cluster       string `json:"cluster"`
	Family        string `json:"family"`
	Vendor        string `json:"vendor"`
	GPUsPerNode   *int64 `json:"gpus_per_node"` // null when the entry has no integer
	ImagePlatform string `json:"image_platform"`
	Container     string `json:"container"`
}

func (runnerRow) header() []string {
	return []string{"RUNNER", "CLUSTER", "FAMILY", "VENDOR", "GPUS/NODE", "PLATFORM", "CONTAINER"}
}

func (r runnerRow) cells() []string {
	c := r.Container
	if r.Runner == platform.Local {
		c = "local (processes on this machine)"
	}
	gpus := "-"
	if r.GPUsPerNode != nil {
		gpus = strconv.FormatInt(*r.GPUsPerNode, 10)
	}
	return []string{r.Runner, r.Cluster, r.Family, r.Vendor, gpus, r.ImagePlatform, c}
}

func listRunners(o *listOptions) ([]runnerRow, error) {
	reg, _, err := platform.LoadConfig(o.platformConfig)
	if err != nil {
		return nil, err
	}
	var out []runnerRow
	for _, label := range reg.Labels() {
		e, _ := reg.Facts(label)
		r := e.Runner
		var gpus *int64
		if e.GPUsKnown {
			gpus = &e.GPUsPerNode
		}
		vendor := r.Vendor()
		if label == platform.Local { // processes on this machine's CPU: no GPU vendor
			vendor = "cpu"
		}
		out = append(out, runnerRow{label, r.Cluster, r.Family, vendor, gpus, e.ImagePlatform, e.Container})
	}
	return out, nil
}

type backendRow struct {
	Vendor   string   `json:"vendor"`
	Backends []string `json:"backends"`
}

func (backendRow) header() []string { return []string{"VENDOR", "BACKENDS"} }

func (r backendRow) cells() []string {
	bs := slices.Clone(r.Backends)
	for i, b := range bs {
		if b == plan.CPU {
			bs[i] = plan.CPU + " (built in)"
			if r.Vendor == "local" {
				bs[i] = plan.CPU + " (built in: fp32/fp64 GEMM on this CPU)"
			}
		}
	}
	return []string{r.Vendor, strings.Join(bs, ", ")}
}

func containers(o *listOptions) (catalog.Containers, []string, error) {
	src := catalog.Embedded("containers.toml")
	if o.containers != "" {
		src = catalog.Disk(o.containers)
	}
	cs, err := catalog.LoadContainers(src)
	if err != nil {
		return nil, nil, err
	}
	return cs, slices.Sorted(maps.Keys(cs)), nil
}

func listBackends(o *listOptions) ([]backendRow, error) {
	cs, vendors, err := containers(o)
	if err != nil {
		return nil, err
	}
	var out []backendRow
	for _, v := range vendors {
		out = append(out, backendRow{v, append([]string{plan.CPU}, slices.Sorted(maps.Keys(cs[v]))...)})
	}
	return append(out, backendRow{"local", []string{plan.CPU}}), nil
}

type imageRow struct {
	Vendor  string `json:"vendor"`
	Backend string `json:"backend"`
	Image   string `json:"image"`
	Digest  string `json:"digest,omitempty"` // empty: resolved by plan
}

func (imageRow) header() []string { return []string{"VENDOR", "BACKEND", "IMAGE", "DIGEST"} }

func (r imageRow) cells() []string {
	d := r.Digest
	if d == "" {
		d = "(resolved by plan)"
	}
	return []string{r.Vendor, r.Backend, r.Image, d}
}

func listImages(o *listOptions) ([]imageRow, error) {
	cs, vendors, err := containers(o)
	if err != nil {
		return nil, err
	}
	var out []imageRow
	for _, v := range vendors {
		for _, b := range slices.Sorted(maps.Keys(cs[v])) {
			out = append(out, imageRow{v, b, cs[v][b].Image, cs[v][b].Digest})
		}
	}
	return out, nil
}

type testlistRow struct {
	Testlist string   `json:"testlist"`
	Cases    int      `json:"cases"`
	OpTypes  []string `json:"op_types"`
}

func (testlistRow) header() []string { return []string{"TESTLIST", "CASES", "OP TYPES"} }

func (r testlistRow) cells() []string {
	return []string{r.Testlist, strconv.Itoa(r.Cases), strings.Join(r.OpTypes, ", ")}
}

func listTestlists(o *listOptions) ([]testlistRow, error) {
	tls := catalog.NewTestlists(o.testlistDir)
	var out []testlistRow
	for _, n := range tls.Names() {
		shapes, types, err := tls.Summary(n)
		if err != nil {
			return nil, err
		}
		out = append(out, testlistRow{n, shapes, types})
	}
	return out, nil
}
