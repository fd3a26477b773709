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

// Finish is the plan CLI's part after plan() (seed-spec §5.5–§5.7, decisions §4): resolve
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
	res := map[string]manifest.Resolution{}
	byDigest := map[string]bool{} // decisions §4: imported by the containers.toml digest
	resolve := func(list []string) error {
		var ask []string
		for _, img := range list {
			if d := manifest.PinnedDigest(img); d != "" {
				res[img] = manifest.Resolution{Digest: d} // a pinned image is used as is
			} else {
				ask = append(ask, img)
			}
		}
		if len(ask) > 0 && r != nil {
			for img, got := range r.Resolve(ctx, ask, imagePlatform) {
				if got.NoPlatform {
					return fmt.Errorf("image %s has no manifest for %s; pick an image built for it", img, imagePlatform)
				}
				res[img] = got
			}
		}
		for _, img := range ask {
			if res[img].Digest != "" {
				continue
			}
			for _, entry := range images {
				if entry.Image == img && entry.Digest != "" {
					res[img] = manifest.Resolution{Digest: entry.Digest}
					byDigest[img] = true
					break
				}
			}
		}
		return nil
	}
	if err := resolve(distinct); err != nil {
		return nil, err
	}
	for _, cell := range cells {
		img, _ := cell.String("image")
		backends, _ := cell.Array("backends")
		first, _ := backends[0].(string)
		fallback := images[first].Image
		if img != "" && res[img].Digest == "" && img != fallback && fallback != "" {
			key := "image_unavailable"
			if cell.Has("recipe") {
				key = "recipe_image_unavailable"
			}
			cell.Set(key, img)
			cell.Set("image", fallback)
			if res[fallback].Digest == "" {
				if err := resolve([]string{fallback}); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, cell := range cells {
		img, _ := cell.String("image")
		if img != "" && res[img].Digest == "" {
			return nil, &RuntimeError{"cannot resolve image digest: " + img}
		}
	}
	for _, cell := range cells {
		img, _ := cell.String("image")
		id, _ := cell.String("id")
		got := res[img]
		cell.Set("digest", got.Digest)
		if got.PlatformDigest != "" && got.PlatformDigest != got.Digest {
			// beyond the seed: the platform's own manifest inside a multi-arch index
			cell.Set("platform_digest", got.PlatformDigest)
		}
		uri := ""
		switch {
		case img == "":
		case byDigest[img]:
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
	return fallbacks(byDigest), nil
}

// RuntimeError is one of the seed's runtime errors (a Python RuntimeError).
type RuntimeError struct{ Msg string }

func (e *RuntimeError) Error() string { return e.Msg }

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
