// Package registry resolves image tags to digests with go-containerregistry, anonymously, each
// image once and in parallel, with a timeout.
//
// It resolves image tags to digests with go-containerregistry (docs/compat-spec.md
// §16.4): HEAD the manifest with anonymous bearer tokens, GET when a registry omits the
// digest header, each distinct image once and in parallel, under a timeout. Beyond the
// seed it finds the platform's manifest inside a multi-arch index and refuses an image
// that has none for the platform.
//
// It talks to registries through go-containerregistry's transport (the token dance,
// retries), names and manifest types, and reads the few manifests it needs itself rather
// than through its remote package, whose image-layer machinery (zstd, gzip, tarballs)
// every opx process would otherwise load and initialise at start.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/manifest"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/semianalysis/opx/internal/version"
)

// Resolver resolves tags against their registries.
type Resolver struct {
	Timeout   time.Duration     // per image; the seed uses 10 s
	Transport http.RoundTripper // nil: the default transport
	Parallel  int               // concurrent lookups; 0 means 8
}

// Resolve implements plan.Resolver. Unreachable registries, unknown tags and malformed
// references resolve to an empty digest, as the seed's probe does.
func (r *Resolver) Resolve(ctx context.Context, images []string, imagePlatform string) map[string]manifest.Resolution {
	out := make(map[string]manifest.Resolution, len(images))
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
	c, cancel, err := r.open(ctx, image)
	if err != nil {
		return ""
	}
	defer cancel()
	m := c.headOrGet()
	if m == nil {
		return ""
	}
	return m.digest
}

// defaultTransport is go-containerregistry's remote.DefaultTransport: http's default
// with its proxy settings, and more idle connections per host.
var defaultTransport = sync.OnceValue(func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 50
	return t
})

// retryCodes are the statuses remote retries: timeouts, rate limits and gateway errors.
var retryCodes = []int{
	http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
	499, // nginx: client closed request
	522, // Cloudflare: connection timed out
}

// client reads one repository's manifests and blobs.
type client struct {
	ctx  context.Context
	ref  name.Reference
	http *http.Client
}

// open prepares a client for image's repository: anonymous, with bearer tokens when the
// registry asks for them, retries on transient errors, under the resolver's timeout.
func (r *Resolver) open(ctx context.Context, image string) (*client, context.CancelFunc, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, nil, err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	base := r.Transport
	if base == nil {
		base = defaultTransport()
	}
	base = transport.NewUserAgent(transport.NewRetry(base, transport.WithRetryStatusCodes(retryCodes...)), "opx/"+version.Version)
	t, err := transport.NewWithContext(ctx, ref.Context().Registry, authn.Anonymous, base, []string{ref.Scope(transport.PullScope)})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return &client{ctx: ctx, ref: ref, http: &http.Client{Transport: t}}, cancel, nil
}

// acceptManifests are the manifest types opx reads, as remote asks for them.
var acceptManifests = strings.Join([]string{
	string(types.OCIImageIndex), string(types.OCIManifestSchema1),
	string(types.DockerManifestList), string(types.DockerManifestSchema2),
}, ", ")

// fetched is what a HEAD or GET of a manifest told.
type fetched struct {
	digest    string
	mediaType types.MediaType
	body      []byte // GET only
}

// maxManifest bounds what is read of a manifest or config blob.
const maxManifest = 8 << 20

func (c *client) get(method, kind, identifier, accept string) (*http.Response, error) {
	repo := c.ref.Context()
	u := url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/%s/%s", repo.RepositoryStr(), kind, identifier)}
	req, err := http.NewRequestWithContext(c.ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// fetch HEADs or GETs the manifest identifier (a tag or a digest). A GET's digest is
// computed from the body, and must agree with the registry's header and with a digest
// asked for.
func (c *client) fetch(method, identifier string) (*fetched, error) {
	resp, err := c.get(method, "manifests", identifier, acceptManifests)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := &fetched{digest: resp.Header.Get("Docker-Content-Digest")}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil {
		if t := types.MediaType(mt); t.IsIndex() || t.IsImage() {
			m.mediaType = t
		}
	}
	if method == http.MethodHead {
		return m, nil
	}
	if m.body, err = io.ReadAll(io.LimitReader(resp.Body, maxManifest)); err != nil {
		return nil, err
	}
	h, _, _ := v1.SHA256(bytes.NewReader(m.body))
	computed := h.String()
	if m.digest != "" && m.digest != computed || strings.HasPrefix(identifier, "sha256:") && identifier != computed {
		return nil, fmt.Errorf("manifest %s: digest %s does not match its content (%s)", identifier, m.digest, computed)
	}
	m.digest = computed
	if m.mediaType == "" { // no manifest Content-Type: the manifest's own, else its shape
		var head struct {
			MediaType types.MediaType   `json:"mediaType"`
			Manifests []json.RawMessage `json:"manifests"`
		}
		if json.Unmarshal(m.body, &head) == nil {
			switch {
			case head.MediaType != "":
				m.mediaType = head.MediaType
			case head.Manifests != nil:
				m.mediaType = types.OCIImageIndex
			default:
				m.mediaType = types.OCIManifestSchema1
			}
		}
	}
	return m, nil
}

// headOrGet returns the tag's manifest: HEAD when the registry sends the digest header,
// else GET, which computes it from the body. nil when neither works.
func (c *client) headOrGet() *fetched {
	id := c.ref.Identifier()
	if m, err := c.fetch(http.MethodHead, id); err == nil && manifest.ValidDigest(m.digest) {
		return m
	}
	m, err := c.fetch(http.MethodGet, id)
	if err != nil || !manifest.ValidDigest(m.digest) {
		return nil
	}
	return m
}

func (r *Resolver) one(ctx context.Context, image, imagePlatform string) manifest.Resolution {
	c, cancel, err := r.open(ctx, image)
	if err != nil {
		return manifest.Resolution{}
	}
	defer cancel()
	m := c.headOrGet()
	if m == nil {
		return manifest.Resolution{}
	}
	res := manifest.Resolution{Digest: m.digest}
	want, err := v1.ParsePlatform(imagePlatform)
	if err != nil {
		return res
	}
	if m.body == nil { // pin the rest of the lookups to what the tag pointed at just now
		g, err := c.fetch(http.MethodGet, res.Digest)
		if err != nil {
			var te *transport.Error
			if !errors.As(err, &te) || te.StatusCode != http.StatusNotFound {
				return res // digest known; platform unknown: leave it to the import
			}
			// the registry does not know the digest its HEAD gave: read the tag itself,
			// whose content must then agree with its header
			if g, err = c.fetch(http.MethodGet, c.ref.Identifier()); err != nil {
				return manifest.Resolution{}
			}
			res.Digest = g.digest
		}
		m = g
	}
	if m.mediaType.IsIndex() {
		idx, err := v1.ParseIndexManifest(bytes.NewReader(m.body))
		if err != nil {
			return res
		}
		for _, d := range idx.Manifests {
			if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
				res.PlatformDigest = d.Digest.String()
				return res
			}
		}
		res.NoPlatform = true
		return res
	}
	img, err := v1.ParseManifest(bytes.NewReader(m.body))
	if err != nil {
		return res
	}
	cfg, err := c.config(img.Config.Digest)
	if err != nil || cfg.Architecture == "" {
		return res
	}
	if !strings.EqualFold(cfg.OS, want.OS) || cfg.Architecture != want.Architecture {
		res.NoPlatform = true
	}
	return res
}

// config reads and checks an image's config blob.
func (c *client) config(d v1.Hash) (*v1.ConfigFile, error) {
	resp, err := c.get(http.MethodGet, "blobs", d.String(), "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest))
	if err != nil {
		return nil, err
	}
	if h, _, _ := v1.SHA256(bytes.NewReader(body)); h != d {
		return nil, fmt.Errorf("config blob %s does not match its content", d)
	}
	return v1.ParseConfigFile(bytes.NewReader(body))
}
