package plan

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/recipes"
	"github.com/semianalysis/opx/internal/registry"
	"github.com/semianalysis/opx/internal/suggest"
)

// Request is a plan's selection and inputs: plan's flags.
type Request struct {
	Runner, Backends, Testlists, WorldSizes string
	RunID, Attempt, SourceSHA               string
	ChunkSize                               int64
	Mode                                    string
	PlatformConfig, TestlistDir             string
	Containers, Recipes, Out                string
	DigestTimeout                           time.Duration
	// Affected narrows the selection to what a change touches (AffectedBy): nil plans all
	Affected *Affected
}

// Run is `opx plan`: read the inputs, plan, resolve the images, write the manifest to
// o.Out and the matrix line to stdout; on a terminal (tty) a summary goes to stderr.
func Run(ctx context.Context, o *Request, stdout, stderr io.Writer, tty bool) error {
	sel, in, err := o.inputs()
	if err != nil {
		return err
	}
	if err := localBackends(ctx, o, sel); err != nil {
		return err
	}
	if o.Affected != nil {
		vendor := ""
		if r, ok := in.Registry.Runner(o.Runner); ok {
			vendor = r.Vendor()
		}
		var names []string
		for _, t := range sel.Testlists {
			names = append(names, t.Name)
		}
		keepT, keepB, why := o.Affected.Narrow(names, sel.Backends, vendor)
		for _, w := range why {
			fmt.Fprintf(stderr, "opx plan: --affected-by %s: %s\n", o.Affected.Range, w)
		}
		if len(keepT) == 0 || len(keepB) == 0 {
			fmt.Fprintf(stderr, "opx plan: --affected-by %s: the change (%d file(s)) touches none of the selected cases: nothing to measure, no manifest written\n", o.Affected.Range, o.Affected.Files)
			return nil
		}
		sel.Testlists = slices.DeleteFunc(sel.Testlists, func(t Testlist) bool { return !slices.Contains(keepT, t.Name) })
		sel.Backends = keepB
	}
	result, dropped, err := Plan(sel, in)
	if err != nil {
		return err
	}
	for _, d := range dropped {
		fmt.Fprintf(stderr, "opx plan: %s\n", d)
	}
	entry, _ := in.Registry.Entry(o.Runner)
	if r, ok := in.Registry.Runner(o.Runner); ok {
		// beyond ci.py: what execute will read is checked before any node is allocated
		if missing := platform.Missing(r, entry); len(missing) > 0 {
			return selectionErr("the platform entry for %s lacks %s: complete it in the platform config (opx doctor --runner %s says the same)",
				o.Runner, strings.Join(missing, ", "), o.Runner)
		}
	}
	imagePlatform, _ := entry.String("image_platform")
	resolver := &registry.Resolver{Timeout: o.DigestTimeout}
	fallbacks, err := Finish(ctx, result, in.Images, resolver, imagePlatform,
		Provenance{SourceSHA: o.SourceSHA, RunID: o.RunID, Attempt: o.Attempt})
	if err != nil {
		return err
	}
	for _, img := range fallbacks {
		// beyond the seed, which says nothing: the shard will import by that digest
		fmt.Fprintf(stderr, "opx plan: %s did not resolve (offline, or the tag is gone); using its digest from containers.toml\n", img)
	}
	if err := files.WriteJSON(o.Out, result); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	w := bufio.NewWriter(stdout)
	w.Write(Matrix(result))
	w.WriteByte('\n')
	if err := w.Flush(); err != nil {
		return err
	}
	if tty {
		printPlanSummary(stderr, result, o.Out)
	}
	return nil
}

// inputs reads what the request names — testlists, platform config, containers.toml,
// recipes — in the order the seed meets their errors, and checks the backends and world
// sizes against them.
func (o *Request) inputs() (Selection, Inputs, error) {
	var sel Selection
	var in Inputs
	names := strings.Split(o.Testlists, ",")
	for _, n := range names {
		if !catalog.ValidTestlistName(n) {
			return sel, in, fmt.Errorf("invalid testlist name: %s (allowed: letters, digits, '_' and '-')", pytext.Repr(n))
		}
	}
	tls := catalog.NewTestlists(o.TestlistDir)
	var lists []Testlist
	for _, n := range names {
		shapes, err := tls.Load(n)
		if err != nil {
			return sel, in, err
		}
		lists = append(lists, Testlist{Name: n, Shapes: shapes})
	}
	reg, regName, err := platform.LoadConfig(o.PlatformConfig)
	if err != nil {
		return sel, in, err
	}
	images, err := o.images(reg)
	if err != nil {
		return sel, in, err
	}
	var sizes []int64
	if strings.TrimSpace(o.WorldSizes) == "" {
		if o.Runner == platform.Local {
			return sel, in, selectionErr("--world-sizes is empty: give the world sizes to sweep (the local runner offers 1 on a machine of one device)")
		}
		return sel, in, selectionErr("--world-sizes is empty: give the world sizes to sweep, such as 1 or 1,2,4,8")
	}
	for _, w := range strings.Split(o.WorldSizes, ",") {
		n, err := pyjson.ParseInt(w)
		if err != nil {
			return sel, in, &SelectionError{err.Error()} // ci.py's words
		}
		sizes = append(sizes, n)
	}
	var book *recipes.Book
	if o.Recipes != "" {
		if book, err = recipes.Load(catalog.Disk(o.Recipes)); err != nil {
			return sel, in, err
		}
	}
	sel = Selection{Runner: o.Runner, Backends: strings.Split(o.Backends, ","), Testlists: lists,
		WorldSizes: sizes, ChunkSize: o.ChunkSize, Mode: o.Mode}
	return sel, Inputs{Registry: reg, Images: images, Recipes: book, Config: regName}, nil
}

// images is containers.toml's table for the runner's vendor, after checking that every
// selected backend but cpu is in it.
func (o *Request) images(reg *platform.Registry) (map[string]catalog.Image, error) {
	csrc := catalog.Embedded("containers.toml")
	if o.Containers != "" {
		csrc = catalog.Disk(o.Containers)
	}
	containers, err := catalog.LoadContainers(csrc)
	if err != nil {
		return nil, err
	}
	runner, known := reg.Runner(o.Runner)
	if !known {
		runner = platform.Runner{Label: o.Runner, Family: platform.Family(o.Runner)}
	}
	vendor := runner.Vendor()
	images, ok := containers[vendor]
	if !ok && !onlyCPU(o.Backends) {
		return nil, fmt.Errorf("%s: no [%s] table", csrc.Name, vendor)
	}
	var missing []string
	for _, b := range strings.Split(o.Backends, ",") {
		if _, ok := images[b]; !ok && b != CPU {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		known := []string{CPU}
		for b := range images {
			known = append(known, b)
		}
		sort.Strings(known)
		hint := ""
		if b := suggest.Closest(missing[0], known); b != "" {
			hint = "; did you mean " + b + "?"
		}
		if runner.Label == platform.Local {
			return nil, selectionErr("no backend %s on the local runner (it runs: %s; see opx list backends)%s", strings.Join(missing, ", "), strings.Join(known, ", "), hint)
		}
		return nil, selectionErr("no %s backend module for: %s (%s backends: %s; see opx list backends)%s", vendor, strings.Join(missing, ", "), vendor, strings.Join(known, ", "), hint)
	}
	return images, nil
}

func onlyCPU(backends string) bool {
	for _, b := range strings.Split(backends, ",") {
		if b != CPU {
			return false
		}
	}
	return true
}

// printPlanSummary is the human view of a plan, on a terminal only.
func printPlanSummary(w io.Writer, result *pyjson.Object, out string) {
	include, _ := result.Array("include")
	cases := 0
	images := map[string]string{}
	for _, c := range include {
		cell := c.(*pyjson.Object)
		cs, _ := cell.Array("cases")
		cases += len(cs)
		img, _ := cell.String("image")
		d, _ := cell.String("digest")
		images[img] = d
	}
	excluded, _ := result.Get("excluded_shapes")
	fmt.Fprintf(w, "planned %d shard(s), %d case(s); %v shape(s) excluded by world size\n", len(include), cases, excluded)
	var imgs []string
	for i := range images {
		imgs = append(imgs, i)
	}
	sort.Strings(imgs)
	for _, i := range imgs {
		if i == "" {
			fmt.Fprintf(w, "  image: (none: runs on the host)\n")
			continue
		}
		fmt.Fprintf(w, "  image: %s @ %s\n", i, images[i])
	}
	fmt.Fprintf(w, "manifest: %s\n", out)
}

// localBackends refuses, on the local runner, a backend this machine cannot run: any but
// cpu needs the OperatorX harness importable by python3 (the shard would otherwise fail
// with "No module named operatorx" after it started).
func localBackends(ctx context.Context, o *Request, sel Selection) error {
	if o.Runner != platform.Local {
		return nil
	}
	var others []string
	for _, b := range sel.Backends {
		if b != CPU {
			others = append(others, b)
		}
	}
	if len(others) == 0 {
		return nil
	}
	if can, missing := platform.LocalBackends(ctx, nil); missing != "" {
		return selectionErr("the local runner cannot run %s on this machine: %s; it can run %s (--backends cpu)", strings.Join(others, ", "), missing, can)
	}
	return nil
}
