package registry

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/manifest"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// hubLike is go-containerregistry's real in-memory registry behind a front that demands
// anonymous bearer tokens the way Docker Hub does, and can drop the digest header.
type hubLike struct {
	srv         *httptest.Server
	dropDigest  atomic.Bool
	dropType    atomic.Bool  // no Content-Type on manifests
	lieDigest   atomic.Bool  // a Docker-Content-Digest that is not the content's
	busy        atomic.Int32 // manifest requests still to answer 503
	tokens      atomic.Int32
	manifestReq atomic.Int32
}

func newHub(t *testing.T) *hubLike {
	h := &hubLike{}
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			h.tokens.Add(1)
			if !strings.HasPrefix(r.URL.Query().Get("scope"), "repository:") {
				http.Error(w, "no scope", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"token": "anon-token"}`))
			return
		}
		if r.Header.Get("Authorization") != "Bearer anon-token" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+h.srv.URL+`/token",service="hub.test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if strings.Contains(r.URL.Path, "/manifests/") {
			h.manifestReq.Add(1)
			if h.busy.Add(-1) >= 0 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
		}
		if h.dropDigest.Load() || h.dropType.Load() || h.lieDigest.Load() {
			reg.ServeHTTP(&noDigestWriter{ResponseWriter: w, h: h}, r)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

type noDigestWriter struct {
	http.ResponseWriter
	h *hubLike
}

func (w *noDigestWriter) WriteHeader(code int) {
	if w.h.dropDigest.Load() {
		w.Header().Del("Docker-Content-Digest")
	}
	if w.h.lieDigest.Load() && w.Header().Get("Docker-Content-Digest") != "" {
		w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
	}
	if w.h.dropType.Load() {
		w.Header().Del("Content-Type")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (h *hubLike) host() string { return strings.TrimPrefix(h.srv.URL, "http://") }

func imageFor(t *testing.T, arch string) v1.Image {
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t *testing.T, ref string, img v1.Image) string {
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

func pushIndex(t *testing.T, ref string, arches ...string) (index string, per map[string]string) {
	per = map[string]string{}
	var adds []mutate.IndexAddendum
	for _, a := range arches {
		img := imageFor(t, a)
		d, _ := img.Digest()
		per[a] = d.String()
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: a}}})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	r, _ := name.ParseReference(ref)
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	return d.String(), per
}

func TestResolveAgainstTokenRegistry(t *testing.T) {
	h := newHub(t)
	single := h.host() + "/team/amd64only:1"
	singleDigest := push(t, single, imageFor(t, "amd64"))
	multi := h.host() + "/team/multi:nightly"
	idxDigest, per := pushIndex(t, multi, "amd64", "arm64")
	x86idx := h.host() + "/team/x86idx:1"
	pushIndex(t, x86idx, "amd64")
	missing := h.host() + "/team/nothere:1"
	unreachable := "127.0.0.1:1/team/x:1"

	r := &Resolver{Timeout: 5 * time.Second}
	ctx := context.Background()
	got := r.Resolve(ctx, []string{single, multi, x86idx, missing, unreachable}, "linux/arm64")
	if g := got[single]; g.Digest != singleDigest || !g.NoPlatform {
		t.Errorf("amd64-only image on arm64: %+v (want digest %s, NoPlatform)", g, singleDigest)
	}
	if g := got[multi]; g.Digest != idxDigest || g.PlatformDigest != per["arm64"] || g.NoPlatform {
		t.Errorf("multi-arch: %+v, want index %s and arm64 %s", g, idxDigest, per["arm64"])
	}
	if g := got[x86idx]; !g.NoPlatform {
		t.Errorf("index without arm64: %+v", g)
	}
	if g := got[missing]; g.Digest != "" {
		t.Errorf("missing tag resolved: %+v", g)
	}
	if g := got[unreachable]; g.Digest != "" {
		t.Errorf("unreachable registry resolved: %+v", g)
	}
	if h.tokens.Load() == 0 {
		t.Error("no bearer token was requested")
	}
	// amd64 is fine for the single-arch image
	if g := r.Resolve(ctx, []string{single}, "linux/amd64")[single]; g.NoPlatform || g.Digest != singleDigest {
		t.Errorf("amd64 image on amd64: %+v", g)
	}

	// a registry that omits Docker-Content-Digest: GET computes it
	h.dropDigest.Store(true)
	if g := r.Resolve(ctx, []string{multi}, "linux/amd64")[multi]; g.Digest != idxDigest || g.PlatformDigest != per["amd64"] {
		t.Errorf("without digest header: %+v, want %s", g, idxDigest)
	}
	h.dropDigest.Store(false)

	// a moved tag: Digest reports the new one
	before := r.Digest(ctx, single)
	after := push(t, single, imageFor(t, "amd64"))
	if now := r.Digest(ctx, single); before != singleDigest || now != after || now == before {
		t.Errorf("moved tag: before %s now %s (pushed %s)", before, now, after)
	}
}

func TestResolveEachImageOnce(t *testing.T) {
	h := newHub(t)
	ref := h.host() + "/team/once:1"
	push(t, ref, imageFor(t, "amd64"))
	h.manifestReq.Store(0)
	r := &Resolver{}
	out := r.Resolve(context.Background(), []string{ref}, "linux/amd64")
	if out[ref].Digest == "" {
		t.Fatal("not resolved")
	}
	// HEAD, then one GET of the manifest to read its platform
	if n := h.manifestReq.Load(); n != 2 {
		t.Fatalf("%d manifest requests, want 2 (HEAD + GET)", n)
	}
}

// A registry whose digest header disagrees with the manifest it sends resolves to
// nothing (it does not know the HEAD's digest, and the tag's GET contradicts it); one
// that sends no Content-Type still has its index read, from the manifest's mediaType;
// one that answers 503 twice is asked again.
func TestResolveDistrustsTheRegistry(t *testing.T) {
	h := newHub(t)
	multi := h.host() + "/team/multi:1"
	idxDigest, per := pushIndex(t, multi, "amd64", "arm64")
	r := &Resolver{Timeout: 5 * time.Second}
	ctx := context.Background()

	h.dropType.Store(true)
	if g := r.Resolve(ctx, []string{multi}, "linux/arm64")[multi]; g.Digest != idxDigest || g.PlatformDigest != per["arm64"] {
		t.Errorf("without Content-Type: %+v, want %s / %s", g, idxDigest, per["arm64"])
	}
	h.dropType.Store(false)

	h.lieDigest.Store(true)
	if g := r.Resolve(ctx, []string{multi}, "linux/arm64")[multi]; g != (manifest.Resolution{}) {
		t.Errorf("a digest header that is not the content's was believed: %+v", g)
	}
	h.lieDigest.Store(false)

	// a registry that is briefly unavailable (503) is asked again, as remote would
	h.busy.Store(2)
	if g := r.Resolve(ctx, []string{multi}, "linux/arm64")[multi]; g.Digest != idxDigest || g.PlatformDigest != per["arm64"] {
		t.Errorf("after two 503s: %+v", g)
	}
}
