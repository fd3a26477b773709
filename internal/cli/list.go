package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pyjson"
)

type listOptions struct{ platformConfig, containers, testlistDir string }

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
The embedded catalog is listed unless --platform-config, --containers or --testlist-dir
replace a part of it, as they do for plan.`,
		Example: `  opx list runners
  opx list testlists --testlist-dir ./testlists`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"runners", "backends", "testlists", "images"},
		RunE:      func(c *cobra.Command, args []string) error { return runList(env, o, args[0]) },
	}
	f := c.Flags()
	f.StringVar(&o.platformConfig, "platform-config", "", "platform config JSON (default: the embedded one)")
	f.StringVar(&o.containers, "containers", "", "containers.toml (default: the embedded one)")
	f.StringVar(&o.testlistDir, "testlist-dir", "", "testlist directory (default: the embedded testlists)")
	return c
}

func runList(env Env, o *listOptions, what string) error {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	switch what {
	case "runners":
		return listRunners(tw, env, o)
	case "backends", "images":
		return listImages(tw, o, what == "backends")
	case "testlists":
		return listTestlists(tw, o)
	}
	return &UsageError{fmt.Errorf("opx list takes runners, backends, testlists or images, not %s", pyjson.Repr(what))}
}

func listRunners(w io.Writer, env Env, o *listOptions) error {
	reg, _, err := platform.LoadConfig(o.platformConfig)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "RUNNER\tCLUSTER\tFAMILY\tVENDOR\tGPUS/NODE\tPLATFORM\tCONTAINER")
	for _, label := range reg.Labels() {
		r, _ := reg.Runner(label)
		e, _ := reg.Entry(label)
		gpus, _ := e.Get("gpus_per_node")
		ip, _ := e.String("image_platform")
		mode := platform.ContainerMode(label, e)
		if label == platform.Local {
			mode = "local (processes on this machine)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\t%s\n", label, r.Cluster, r.Family, r.Vendor(), gpus, ip, mode)
	}
	return nil
}

func listImages(w io.Writer, o *listOptions, backendsOnly bool) error {
	src := catalog.Embedded("containers.toml")
	if o.containers != "" {
		src = catalog.Disk(o.containers)
	}
	cs, err := catalog.LoadContainers(src)
	if err != nil {
		return err
	}
	var vendors []string
	for v := range cs {
		vendors = append(vendors, v)
	}
	sort.Strings(vendors)
	if backendsOnly {
		fmt.Fprintln(w, "VENDOR\tBACKENDS")
		for _, v := range vendors {
			bs := []string{plan.CPU + " (built in)"}
			for b := range cs[v] {
				bs = append(bs, b)
			}
			sort.Strings(bs[1:])
			fmt.Fprintf(w, "%s\t%s\n", v, strings.Join(bs, ", "))
		}
		fmt.Fprintln(w, "local\tcpu (built in: fp32/fp64 GEMM on this CPU)")
		return nil
	}
	fmt.Fprintln(w, "VENDOR\tBACKEND\tIMAGE\tDIGEST")
	for _, v := range vendors {
		var bs []string
		for b := range cs[v] {
			bs = append(bs, b)
		}
		sort.Strings(bs)
		for _, b := range bs {
			d := cs[v][b].Digest
			if d == "" {
				d = "(resolved by plan)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v, b, cs[v][b].Image, d)
		}
	}
	return nil
}

func listTestlists(w io.Writer, o *listOptions) error {
	tls := catalog.NewTestlists(o.testlistDir)
	fmt.Fprintln(w, "TESTLIST\tCASES\tOP TYPES")
	for _, n := range tls.Names() {
		shapes, err := tls.Load(n)
		if err != nil {
			return err
		}
		types := map[string]int{}
		for _, s := range shapes {
			t, _ := s.(*pyjson.Object).String("type")
			types[t]++
		}
		var ts []string
		for t := range types {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		fmt.Fprintf(w, "%s\t%d\t%s\n", n, len(shapes), strings.Join(ts, ", "))
	}
	return nil
}
