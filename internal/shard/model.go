package shard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pytext"
)

// DefaultHFEndpoint is where model configs come from unless HF_ENDPOINT names a mirror.
const DefaultHFEndpoint = "https://huggingface.co"

// maxConfigBytes bounds a downloaded config.json (real ones are a few KiB).
const maxConfigBytes = 16 << 20

// modelConfigURL is <HF_ENDPOINT>/<checkpoint>/raw/main/config.json (docs/compat-spec.md §3.12).
func (r *execution) modelConfigURL(ckpt string) string {
	endpoint := DefaultHFEndpoint
	if r.o.Getenv != nil {
		if e := r.o.Getenv("HF_ENDPOINT"); e != "" {
			endpoint = e
		}
	}
	return strings.TrimRight(endpoint, "/") + "/" + ckpt + "/raw/main/config.json"
}

// validCheckpoint: "<org>/<model>", each part a plain name (it becomes a path).
func validCheckpoint(ckpt string) bool {
	org, model, ok := strings.Cut(ckpt, "/")
	return ok && SafeID(org) && SafeID(model)
}

// stageModelConfig fetches the checkpoint's config.json into <stage>/models/<checkpoint>/
// (docs/compat-spec.md §3.12). Failure is a note on stdout, not an error: the benchmark then runs
// without OPERATORX_MODEL_CONFIG, as in the seed.
func (r *execution) stageModelConfig(ctx context.Context, ckpt string) {
	note := func(err error) {
		fmt.Fprintf(r.o.Stdout, "[operatorx] no config.json for %s: %v\n", ckpt, err)
	}
	if !validCheckpoint(ckpt) {
		note(fmt.Errorf("checkpoint %s is not <org>/<model>", pytext.Repr(ckpt)))
		return
	}
	dir := filepath.Join(r.stage, "models", ckpt)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		note(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	url := r.modelConfigURL(ckpt)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		note(err)
		return
	}
	client := r.o.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		note(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		note(fmt.Errorf("GET %s: %s", url, resp.Status))
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigBytes+1))
	if err != nil {
		note(fmt.Errorf("GET %s: %w", url, err))
		return
	}
	if len(body) > maxConfigBytes {
		note(fmt.Errorf("GET %s: larger than %d bytes", url, maxConfigBytes))
		return
	}
	if err := files.CheckJSONObject(body); err != nil {
		note(fmt.Errorf("GET %s: %w", url, err))
		return
	}
	if err := files.WriteAtomic(filepath.Join(dir, "config.json"), body, 0o644); err != nil {
		note(err)
		return
	}
	fmt.Fprintf(r.o.Stdout, "[operatorx] model config for %s from %s\n", ckpt, url)
}
