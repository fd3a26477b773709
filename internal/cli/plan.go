package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/recipes"
	"github.com/semianalysis/opx/internal/registry"
)

type planOptions struct {
	runner, backends, testlists, worldSizes string
	runID, attempt, sourceSHA               string
	chunkSize                               int64
	mode                                    string
	platformConfig, testlistDir             string
	containers, recipes, out                string
	digestTimeout                           time.Duration
}

const planLong = `Plan a sweep: split the selected testlists into shards (one exclusive GPU node each),
resolve every image to a digest, write the manifest, and print the one-line matrix that
GitHub Actions fans out over on stdout (and nothing else there).

The catalog — testlists, the platform registry keyed by runner label, containers.toml —
is embedded in opx; --platform-config, --testlist-dir, --containers and --recipes replace
its parts. Runners: the nine cluster:* labels, custom runners declared in a platform
config (an entry with "cluster"), and "local" (this machine, no Slurm).

Shard ids, manifests and messages are exactly those of InferenceX's OperatorX planner
(ci.py) for the same inputs, so workflows written for it keep working.`

const planExample = `  opx plan --runner cluster:h200-dgxc --backends vllm --testlists gemm_perf \
      --world-sizes 1 --run-id 12 --attempt 1 --source-sha $(git rev-parse HEAD) \
      --chunk-size 500 --out operatorx-manifest.json > operatorx-matrix.json
  opx plan --runner local --backends cpu --testlists cpu_smoke --world-sizes 1 --out plan.json`

func newPlanCmd(env Env) *cobra.Command {
	o := &planOptions{}
	c := &cobra.Command{
		Use:     "plan",
		Short:   "Split a selection into shards and write the manifest",
		Long:    planLong,
		Example: planExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runPlan(c.Context(), env, o)
		},
	}
	addPlanFlags(c, o, true)
	return c
}

// addPlanFlags declares plan's selection flags on c (opx run shares them); required marks
// the selection flags required, else they keep o's defaults.
func addPlanFlags(c *cobra.Command, o *planOptions, required bool) {
	f := c.Flags()
	req := ""
	if required {
		req = " (required)"
	}
	f.StringVar(&o.runner, "runner", o.runner, "runner label, e.g. cluster:h200-dgxc, a custom runner, or local (opx list runners)"+req)
	f.StringVar(&o.backends, "backends", o.backends, "comma-separated backends, e.g. vllm,torch or cpu (opx list backends)"+req)
	f.StringVar(&o.testlists, "testlists", o.testlists, "comma-separated testlist names (opx list testlists)"+req)
	f.StringVar(&o.worldSizes, "world-sizes", o.worldSizes, "comma-separated world sizes from 1,2,4,8"+req)
	f.StringVar(&o.runID, "run-id", "local", "GitHub run id (part of queue tokens and stage names)")
	f.StringVar(&o.attempt, "attempt", "1", "GitHub run attempt")
	f.StringVar(&o.sourceSHA, "source-sha", "unknown", "source commit recorded in the manifest")
	f.Int64Var(&o.chunkSize, "chunk-size", 500, "cases per shard, 1-500")
	f.StringVar(&o.mode, "mode", "timing", "timing or counters")
	f.StringVar(&o.platformConfig, "platform-config", "", "platform overlay JSON keyed by runner label (default: embedded)")
	f.StringVar(&o.testlistDir, "testlist-dir", "", "directory of <name>.json testlists (default: embedded)")
	f.StringVar(&o.containers, "containers", "", "containers.toml (default: embedded)")
	f.StringVar(&o.recipes, "recipes", "", "recipes JSON file (default: none)")
	if required { // opx run's --out is its directory
		f.StringVar(&o.out, "out", "operatorx-manifest.json", "where to write the manifest")
	}
	f.DurationVar(&o.digestTimeout, "digest-timeout", 10*time.Second, "registry timeout per image")
	if required {
		for _, req := range []string{"runner", "backends", "testlists", "world-sizes"} {
			_ = c.MarkFlagRequired(req)
		}
	}
}

// loadRegistry reads the platform config (embedded when path is "").
func loadRegistry(path string, env Env) (*platform.Registry, string, error) {
	src := catalog.Embedded("platforms.json")
	if path != "" {
		src = catalog.Disk(path)
	}
	g, err := platform.Load(src, platform.LocalDefaults{CountGPUs: localGPUs})
	return g, src.Name, err
}

// deviceTool runs a GPU tool for its stdout, bounded (a hung driver must not hang plan).
func deviceTool(argv ...string) (string, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return proc.Output(ctx, proc.Cmd{Argv: append([]string{path}, argv[1:]...), Stderr: io.Discard, Grace: time.Second})
}

// localGPUs counts this machine's devices for the local runner: nvidia-smi -L, then
// rocm-smi, else 1.
func localGPUs() int {
	if out, err := deviceTool("nvidia-smi", "-L"); err == nil {
		n := 0
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "GPU ") {
				n++
			}
		}
		if n > 0 {
			return n
		}
	}
	if out, err := deviceTool("rocm-smi", "--showid"); err == nil {
		seen := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "GPU[") {
				seen[l[:strings.Index(l, "]")+1]] = true
			}
		}
		if len(seen) > 0 {
			return len(seen)
		}
	}
	return 1
}

// pyInt parses like Python's int(): surrounding whitespace, a sign and "_" between digits.
func pyInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	body := strings.TrimLeft(t, "+-")
	ok := len(t)-len(body) <= 1 && body != "" && body[0] != '_' && body[len(body)-1] != '_' && !strings.Contains(body, "__")
	if ok {
		if n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("invalid literal for int() with base 10: %s", pyjson.Repr(s))
}

func runPlan(ctx context.Context, env Env, o *planOptions) error {
	names := strings.Split(o.testlists, ",")
	for _, n := range names {
		if !catalog.ValidTestlistName(n) {
			return fmt.Errorf("invalid testlist name: %s (allowed: letters, digits, '_' and '-')", pyjson.Repr(n))
		}
	}
	// the inputs are read in the order the seed meets their errors
	tls := catalog.NewTestlists(o.testlistDir)
	var lists []plan.Testlist
	for _, n := range names {
		shapes, err := tls.Load(n)
		if err != nil {
			return err
		}
		lists = append(lists, plan.Testlist{Name: n, Shapes: shapes})
	}
	reg, regName, err := loadRegistry(o.platformConfig, env)
	if err != nil {
		return err
	}
	csrc := catalog.Embedded("containers.toml")
	if o.containers != "" {
		csrc = catalog.Disk(o.containers)
	}
	containers, containersErr := catalog.LoadContainers(csrc)
	runner, known := reg.Runner(o.runner)
	if !known {
		runner = platform.Runner{Label: o.runner, Family: platform.Family(o.runner)}
	}
	vendor := runner.Vendor()
	if containersErr != nil {
		return containersErr
	}
	images, ok := containers[vendor]
	if !ok && !onlyCPU(o.backends) {
		return fmt.Errorf("%s: no [%s] table", csrc.Name, vendor)
	}
	var missing []string
	for _, b := range strings.Split(o.backends, ",") {
		if _, ok := images[b]; !ok && b != plan.CPU {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		known := []string{plan.CPU}
		for b := range images {
			known = append(known, b)
		}
		sort.Strings(known)
		return fmt.Errorf("no %s backend module for: %s (%s backends: %s; see opx list backends)", vendor, strings.Join(missing, ", "), vendor, strings.Join(known, ", "))
	}
	var sizes []int64
	for _, w := range strings.Split(o.worldSizes, ",") {
		n, err := pyInt(w)
		if err != nil {
			return err
		}
		sizes = append(sizes, n)
	}
	var book *recipes.Book
	if o.recipes != "" {
		var err error
		if book, err = recipes.Load(catalog.Disk(o.recipes)); err != nil {
			return err
		}
	}
	sel := plan.Selection{Runner: o.runner, Backends: strings.Split(o.backends, ","), Testlists: lists,
		WorldSizes: sizes, ChunkSize: o.chunkSize, Mode: o.mode}
	in := plan.Inputs{Registry: reg, Images: images, Recipes: book, Config: regName}
	result, err := plan.Plan(sel, in)
	if err != nil {
		return err
	}
	entry, _ := reg.Entry(o.runner)
	imagePlatform, _ := entry.String("image_platform")
	resolver := &registry.Resolver{Timeout: o.digestTimeout}
	fallbacks, err := plan.Finish(ctx, result, images, resolver, imagePlatform,
		plan.Provenance{SourceSHA: o.sourceSHA, RunID: o.runID, Attempt: o.attempt})
	if err != nil {
		return err
	}
	for _, img := range fallbacks {
		// beyond the seed, which says nothing: the shard will import by that digest
		fmt.Fprintf(env.Stderr, "opx plan: %s did not resolve (offline, or the tag is gone); using its digest from containers.toml\n", img)
	}
	if err := files.WriteJSON(o.out, result); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	w := bufio.NewWriter(env.Stdout)
	w.Write(plan.Matrix(result))
	w.WriteByte('\n')
	if err := w.Flush(); err != nil {
		return err
	}
	if isTerminal(env.Stderr) {
		printPlanSummary(env.Stderr, result, o.out)
	}
	return nil
}

func onlyCPU(backends string) bool {
	for _, b := range strings.Split(backends, ",") {
		if b != plan.CPU {
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
