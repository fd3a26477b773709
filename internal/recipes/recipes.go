// Package recipes reads opx's optional recipes file: per framework, hardware and checkpoint, the
// serving image, engine arguments and environment a shard uses.
//
// It reads opx's optional recipes file (decisions §3), the stand-in for
// InferenceX's recipe tree: per framework, hardware family and checkpoint, the serving
// variants with their split, image, launch env and engine args, and optional default
// images per (backend, family). Lookup follows docs/compat-spec.md §16.3.
//
// The file is JSON (so that env and engine_args keep their order in the manifest):
//
//	{"recipes": [{"framework": "vllm", "hardware": "h200", "checkpoint": "org/model",
//	              "recipe": "dsr1/vllm/h200-fp8/agg.yaml:tp8", "image": "vllm/vllm-openai:v0.11",
//	              "env": {"VLLM_X": "1"}, "engine_args": {"tensor-parallel-size": 8}}],
//	 "default_images": [{"backend": "vllm", "hardware": "h200", "image": "vllm/vllm-openai:v0.11"}]}
//
// A variant's split is "split" when given, else derived from engine_args the way
// InferenceX does (tensor-parallel-size, data-parallel-size, enable-expert-parallel,
// decode-context-parallel-size).
package recipes

import (
	"fmt"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/safe"
)

// Frameworks are the backends that have recipes (docs/compat-spec.md §16.3).
var Frameworks = []string{"vllm"}

// IsFramework reports whether backend is in Frameworks.
func IsFramework(backend string) bool {
	for _, f := range Frameworks {
		if f == backend {
			return true
		}
	}
	return false
}

// Variant is one recipe variant.
type Variant struct {
	Framework, Hardware, Checkpoint, Key, Image string
	Env, EngineArgs                             *pyjson.Object
	Split                                       *pyjson.Object // normalized
}

// Default is a default image for a backend on a hardware family.
type Default struct{ Backend, Hardware, Image string }

// Book is a loaded recipes file. The zero Book matches nothing.
type Book struct {
	Variants []Variant
	Defaults []Default
}

// Match is what find() returns.
type Match struct {
	Recipe, Match, Checkpoint, Image string
	Env, EngineArgs                  *pyjson.Object
}

// Find is operatorx.recipes.find: for each checkpoint in order, a variant whose split
// matches on axes ("split"), else the checkpoint's first variant ("checkpoint").
func (b *Book) Find(framework, hardware string, checkpoints []string, split *pyjson.Object, axes []string) *Match {
	if b == nil || !IsFramework(framework) {
		return nil
	}
	for _, ckpt := range checkpoints {
		var candidates []Variant
		for _, v := range b.Variants {
			if v.Framework == framework && v.Hardware == hardware && v.Checkpoint == ckpt {
				candidates = append(candidates, v)
			}
		}
		if len(candidates) == 0 {
			continue
		}
		chosen, how := candidates[0], "checkpoint"
		for _, v := range candidates {
			if splitMatches(v.Split, split, axes) {
				chosen, how = v, "split"
				break
			}
		}
		return &Match{Recipe: chosen.Key, Match: how, Checkpoint: ckpt, Image: chosen.Image, Env: chosen.Env, EngineArgs: chosen.EngineArgs}
	}
	return nil
}

func splitMatches(a, b *pyjson.Object, axes []string) bool {
	for _, ax := range axes {
		x, _ := a.Get(ax)
		y, _ := b.Get(ax)
		if string(pyjson.MustMarshal(x, pyjson.Identity)) != string(pyjson.MustMarshal(y, pyjson.Identity)) {
			return false
		}
	}
	return true
}

// DefaultImage is operatorx.recipes.default_image: the image for backend on hardware, or "".
func (b *Book) DefaultImage(backend, hardware string) string {
	if b == nil {
		return ""
	}
	for _, d := range b.Defaults {
		if d.Backend == backend && d.Hardware == hardware {
			return d.Image
		}
	}
	return ""
}

// Load reads a recipes file.
func Load(src catalog.Source) (*Book, error) {
	v, err := src.ReadJSON()
	if err != nil {
		return nil, err
	}
	doc, ok := v.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("%s: a recipes file is a JSON object, found %s", src.Name, pyjson.TypeName(v))
	}
	b := &Book{}
	list, err := objects(doc, "recipes", src.Name)
	if err != nil {
		return nil, err
	}
	for i, r := range list {
		where := fmt.Sprintf("%s: recipes[%d]", src.Name, i)
		var vr Variant
		for _, f := range []struct {
			key string
			dst *string
		}{{"framework", &vr.Framework}, {"hardware", &vr.Hardware}, {"checkpoint", &vr.Checkpoint}, {"recipe", &vr.Key}, {"image", &vr.Image}} {
			s, ok := r.String(f.key)
			if !ok || s == "" {
				return nil, fmt.Errorf("%s: %q must be a non-empty string", where, f.key)
			}
			*f.dst = s
		}
		vr.Env, vr.EngineArgs = pyjson.NewObject(), pyjson.NewObject()
		if e, ok := r.Get("env"); ok {
			eo, ok := e.(*pyjson.Object)
			if !ok {
				return nil, fmt.Errorf("%s: \"env\" must be an object of strings", where)
			}
			for _, m := range eo.Members() {
				if _, ok := m.Value.(string); !ok {
					return nil, fmt.Errorf("%s: env.%s must be a string", where, safe.Text(m.Key))
				}
			}
			vr.Env = eo
		}
		if e, ok := r.Get("engine_args"); ok {
			eo, ok := e.(*pyjson.Object)
			if !ok {
				return nil, fmt.Errorf("%s: \"engine_args\" must be an object", where)
			}
			vr.EngineArgs = eo
		}
		if s, ok := r.Get("split"); ok {
			so, ok := s.(*pyjson.Object)
			if !ok {
				return nil, fmt.Errorf("%s: \"split\" must be an object", where)
			}
			vr.Split = Normalize(so)
		} else {
			vr.Split = splitFromArgs(vr.EngineArgs)
		}
		b.Variants = append(b.Variants, vr)
	}
	defs, err := objects(doc, "default_images", src.Name)
	if err != nil {
		return nil, err
	}
	for i, d := range defs {
		var df Default
		for _, f := range []struct {
			key string
			dst *string
		}{{"backend", &df.Backend}, {"hardware", &df.Hardware}, {"image", &df.Image}} {
			s, ok := d.String(f.key)
			if !ok || s == "" {
				return nil, fmt.Errorf("%s: default_images[%d]: %q must be a non-empty string", src.Name, i, f.key)
			}
			*f.dst = s
		}
		b.Defaults = append(b.Defaults, df)
	}
	return b, nil
}

func objects(doc *pyjson.Object, key, name string) ([]*pyjson.Object, error) {
	v, ok := doc.Get(key)
	if !ok {
		return nil, nil
	}
	arr, ok := v.([]pyjson.Value)
	if !ok {
		return nil, fmt.Errorf("%s: %q must be an array", name, key)
	}
	out := make([]*pyjson.Object, len(arr))
	for i, e := range arr {
		o, ok := e.(*pyjson.Object)
		if !ok {
			return nil, fmt.Errorf("%s: %s[%d] must be an object", name, key, i)
		}
		out[i] = o
	}
	return out, nil
}

// Axes are parallel.AXES, in normalize's key order.
var Axes = []string{"tp", "dp", "ep", "dcp"}

// Normalize is parallel.normalize: {tp, dp, ep, dcp}, each defaulting to 1.
func Normalize(p *pyjson.Object) *pyjson.Object {
	out := pyjson.NewObject()
	for _, ax := range Axes {
		v, ok := p.Get(ax)
		if !ok {
			v = pyjson.Int("1")
		}
		out.Set(ax, v)
	}
	return out
}

func splitFromArgs(args *pyjson.Object) *pyjson.Object {
	get := func(k string) int64 {
		v, _ := args.Get(k)
		if i, ok := v.(pyjson.Int); ok {
			n, _ := i.Int64()
			return n
		}
		return 1
	}
	tp, dp, dcp := get("tensor-parallel-size"), get("data-parallel-size"), get("decode-context-parallel-size")
	ep := int64(1)
	if v, ok := args.Get("enable-expert-parallel"); ok && pyjson.Truthy(v) {
		ep = tp * dp
	}
	return pyjson.Obj("tp", tp, "dp", dp, "ep", ep, "dcp", dcp)
}
