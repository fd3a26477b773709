package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/image"
	"github.com/semianalysis/opx/internal/registry"
)

func newImportCmd(env Env) *cobra.Command {
	var o image.Options
	c := &cobra.Command{
		Use:   "import",
		Short: "Bring a shard's image into the node's squashfs cache (run on the compute node)",
		Long: `Run by execute through srun on the allocated node. Checks that the host's
architecture matches --image-platform before creating anything, takes the per-image lock
<cache>/<key>.lock (waiting honours cancellation; a lock whose holder died is free),
reuses <cache>/<key>.sqsh when it is whole, and otherwise runs
'enroot import -o <cache>/<key>.partial <uri>' in private scratch directories, validates
the result, checks that a tag still points at the planned digest, and renames it into
place. A truncated or otherwise damaged cache entry, or a stale .partial, is replaced.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runImport(c.Context(), env, &o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Cache, "cache", "", "the shared squashfs cache directory (required)")
	f.StringVar(&o.Image, "image", "", "image reference from the manifest (required)")
	f.StringVar(&o.Digest, "digest", "", "planned manifest digest, sha256:... (required)")
	f.StringVar(&o.URI, "uri", "", "enroot URI (default: docker://<host>#<repository>:<tag>)")
	f.StringVar(&o.ImagePlatform, "image-platform", "", "linux/amd64 or linux/arm64 (required)")
	for _, r := range []string{"cache", "image", "digest", "image-platform"} {
		_ = c.MarkFlagRequired(r)
	}
	return c
}

// runImport is opx import with its flags (image.Options): the cache entry made or reused.
func runImport(ctx context.Context, env Env, o *image.Options) error {
	switch o.ImagePlatform {
	case "linux/amd64", "linux/arm64":
	default:
		return &UsageError{fmt.Errorf("--image-platform must be linux/amd64 or linux/arm64, not %q", o.ImagePlatform)}
	}
	o.Environ, o.Stdout, o.Stderr = env.environ(), env.Stderr, env.Stderr
	o.Resolver = &registry.Resolver{}
	res, err := image.Run(ctx, *o)
	if err != nil {
		return err
	}
	what := "reused"
	if res.Imported {
		what = "imported"
	}
	fmt.Fprintf(env.Stderr, "opx import: %s %s\n", what, res.Squash)
	return nil
}
