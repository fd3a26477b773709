// Package registry resolves image tags to digests with go-containerregistry (seed-spec
// §16.4): HEAD the manifest with anonymous bearer tokens, GET when a registry omits the
// digest header, each distinct image once and in parallel, under a timeout. Beyond the
// seed it finds the platform's manifest inside a multi-arch index and refuses an image
// that has none for the platform.
package registry

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/semianalysis/opx/internal/plan"
)

// Resolver resolves tags against their registries.
type Resolver struct {
	Timeout   time.Duration     // per image; the seed uses 10 s
	Transport http.RoundTripper // nil: the default transport
	Parallel  int               // concurrent lookups; 0 means 8
}

var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })

// Resolve implements plan.Resolver. Unreachable registries, unknown tags and malformed
// references resolve to an empty digest, as the seed's probe does.
func (r *Resolver) Resolve(ctx context.Context, images []string, imagePlatform string) map[string]plan.Resolution {
	out := make(map[string]plan.Resolution, len(images))
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := r.Parallel
	if n <= 0 {
		n = 8
	}
	sem := make(chan struct{}, n)
	for _, img := range images {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res := r.one(ctx, img, imagePlatform)
			mu.Lock()
			out[img] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// Digest returns the tag's current digest, or "" (the import's tag-moved check).
func (r *Resolver) Digest(ctx context.Context, image string) string {
	ref, opts, cancel, err := r.prepare(ctx, image)
	if err != nil {
		return ""
	}
	defer cancel()
	d, _ := headOrGet(ref, opts)
	if d == nil {
		return ""
	}
	return d.Digest.String()
}

func (r *Resolver) prepare(ctx context.Context, image string) (name.Reference, []remote.Option, context.CancelFunc, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, nil, nil, err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(authn.Anonymous)}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	return ref, opts, cancel, nil
}

func headOrGet(ref name.Reference, opts []remote.Option) (*v1.Descriptor, *remote.Descriptor) {
	if d, err := remote.Head(ref, opts...); err == nil && digestRE().MatchString(d.Digest.String()) {
		return d, nil
	}
	// no digest header (or no HEAD support): GET computes the digest from the body
	g, err := remote.Get(ref, opts...)
	if err != nil || !digestRE().MatchString(g.Digest.String()) {
		return nil, nil
	}
	return &g.Descriptor, g
}

func (r *Resolver) one(ctx context.Context, image, imagePlatform string) plan.Resolution {
	ref, opts, cancel, err := r.prepare(ctx, image)
	if err != nil {
		return plan.Resolution{}
	}
	defer cancel()
	desc, got := headOrGet(ref, opts)
	if desc == nil {
		return plan.Resolution{}
	}
	res := plan.Resolution{Digest: desc.Digest.String()}
	want, err := v1.ParsePlatform(imagePlatform)
	if err != nil {
		return res
	}
	// pin the rest of the lookups to what the tag pointed at just now
	byDigest := ref.Context().Digest(res.Digest)
	if got == nil || got.Digest != desc.Digest {
		if got, err = remote.Get(byDigest, opts...); err != nil {
			return res // digest known; platform unknown: leave it to the import
		}
	}
	if got.MediaType.IsIndex() {
		idx, err := got.ImageIndex()
		if err != nil {
			return res
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return res
		}
		for _, d := range m.Manifests {
			if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
				res.PlatformDigest = d.Digest.String()
				return res
			}
		}
		res.NoPlatform = true
		return res
	}
	img, err := got.Image()
	if err != nil {
		return res
	}
	cfg, err := img.ConfigFile()
	if err != nil || cfg.Architecture == "" {
		return res
	}
	if !strings.EqualFold(cfg.OS, want.OS) || cfg.Architecture != want.Architecture {
		res.NoPlatform = true
	}
	return res
}
