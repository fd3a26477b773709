package plan

import (
	"context"
	"fmt"
	"sort"

	"github.com/semianalysis/opx/internal/manifest"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
)

// Resolver resolves image tags to digests, each distinct image once.
type Resolver interface {
	Resolve(ctx context.Context, images []string, imagePlatform string) map[string]manifest.Resolution
}

// Provenance is what plan adds at the top level.
type Provenance struct{ SourceSHA, RunID, Attempt string }

// Finish is the plan CLI's part after plan() (docs/compat-spec.md §5.5–§5.7, decisions §4): resolve
// digests, apply the image-unavailable fallback, add digest, import_uri and queue-token to
// every cell, and the provenance to the top level. Ids are not recomputed. It returns the
// images whose tag did not resolve and that fall back to containers.toml's digest, so the
// caller can say so (the seed says nothing).
func Finish(ctx context.Context, result *pyjson.Object, images map[string]catalog.Image, r Resolver, imagePlatform string, prov Provenance) ([]string, error) {
	include, _ := result.Array("include")
	cells := make([]*pyjson.Object, len(include))
	var distinct []string
	seen := map[string]bool{}
	for i, c := range include {
		cells[i] = c.(*pyjson.Object)
		img, _ := cells[i].String("image")
		if img != "" && !seen[img] {
			seen[img] = true
			distinct = append(distinct, img)
		}
	}
	d := &digests{ctx: ctx, r: r, images: images, imagePlatform: imagePlatform,
		res: map[string]manifest.Resolution{}, byDigest: map[string]bool{}}
	if err := d.resolve(distinct); err != nil {
		return nil, err
	}
	for _, cell := range cells {
		if err := d.fallBack(cell); err != nil {
			return nil, err
		}
	}
	for _, cell := range cells {
		img, _ := cell.String("image")
		if img != "" && d.res[img].Digest == "" {
			return nil, &DigestError{"cannot resolve image digest: " + img}
		}
	}
	for _, cell := range cells {
		img, _ := cell.String("image")
		id, _ := cell.String("id")
		got := d.res[img]
		cell.Set("digest", got.Digest)
		if got.PlatformDigest != "" && got.PlatformDigest != got.Digest {
			// beyond the seed: the platform's own manifest inside a multi-arch index
			cell.Set("platform_digest", got.PlatformDigest)
		}
		uri := ""
		switch {
		case img == "":
		case d.byDigest[img]:
			uri = EnrootURI(img + "@" + got.Digest)
		default:
			uri = EnrootURI(img)
		}
		cell.Set("import_uri", uri)
		cell.Set("queue-token", manifest.QueueToken(prov.RunID, prov.Attempt, id))
	}
	result.Set("source_sha", prov.SourceSHA)
	result.Set("run_id", prov.RunID)
	result.Set("attempt", prov.Attempt)
	return fallbacks(d.byDigest), nil
}

// digests is what Finish learns about the images' digests.
type digests struct {
	ctx           context.Context
	r             Resolver
	images        map[string]catalog.Image
	imagePlatform string
	res           map[string]manifest.Resolution
	byDigest      map[string]bool // decisions §4: imported by the containers.toml digest
}

// resolve asks the registry for the images not pinned, and takes containers.toml's digest
// for those it could not resolve.
func (d *digests) resolve(list []string) error {
	var ask []string
	for _, img := range list {
		if dg := manifest.PinnedDigest(img); dg != "" {
			d.res[img] = manifest.Resolution{Digest: dg} // a pinned image is used as is
		} else {
			ask = append(ask, img)
		}
	}
	if len(ask) > 0 && d.r != nil {
		for img, got := range d.r.Resolve(d.ctx, ask, d.imagePlatform) {
			if got.NoPlatform {
				return fmt.Errorf("image %s has no manifest for %s; pick an image built for it", img, d.imagePlatform)
			}
			d.res[img] = got
		}
	}
	for _, img := range ask {
		if d.res[img].Digest != "" {
			continue
		}
		for _, entry := range d.images {
			if entry.Image == img && entry.Digest != "" {
				d.res[img] = manifest.Resolution{Digest: entry.Digest}
				d.byDigest[img] = true
				break
			}
		}
	}
	return nil
}

// fallBack moves a cell whose image did not resolve to its first backend's image from
// containers.toml (docs/compat-spec.md §5.6), recording the image it wanted.
func (d *digests) fallBack(cell *pyjson.Object) error {
	img, _ := cell.String("image")
	backends, _ := cell.Array("backends")
	first, _ := backends[0].(string)
	fallback := d.images[first].Image
	if img == "" || d.res[img].Digest != "" || img == fallback || fallback == "" {
		return nil
	}
	key := "image_unavailable"
	if cell.Has("recipe") {
		key = "recipe_image_unavailable"
	}
	cell.Set(key, img)
	cell.Set("image", fallback)
	if d.res[fallback].Digest == "" {
		return d.resolve([]string{fallback})
	}
	return nil
}

// DigestError is an image whose digest cannot be resolved (ci.py raises it as a RuntimeError).
type DigestError struct{ Msg string }

func (e *DigestError) Error() string { return e.Msg }

// Matrix is the slim matrix printed on stdout: only id, runner, nodes and queue-token.
func Matrix(result *pyjson.Object) []byte {
	include, _ := result.Array("include")
	slim := make([]pyjson.Value, len(include))
	for i, c := range include {
		cell := c.(*pyjson.Object)
		o := pyjson.NewObject()
		for _, k := range []string{"id", "runner", "nodes", "queue-token"} {
			v, _ := cell.Get(k)
			o.Set(k, v)
		}
		slim[i] = o
	}
	return pyjson.MustMarshal(pyjson.Obj("include", slim), pyjson.Compact)
}

func fallbacks(byDigest map[string]bool) []string {
	var out []string
	for img := range byDigest {
		out = append(out, img)
	}
	sort.Strings(out)
	return out
}
