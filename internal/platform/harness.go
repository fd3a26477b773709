package platform

import (
	"fmt"
	"path"
	"strings"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/safe"
)

// HarnessPath is one entry of a platform config's "affected"."harness" list (beyond the
// seed): a path of the repository a pull request changes — a file, or a directory when
// it ends in "/" — and the cases its change can move, for opx plan --affected-by: its
// backends' cases, in its testlists when it names them (a backend's smoke list), else in
// every testlist of the selection. A changed file no entry holds moves every case (the
// safe default).
type HarnessPath struct {
	Path      string
	Backends  []string
	Testlists []string
}

// Holds is whether the repository path f (relative to its top, slash-separated) is this
// entry's: the file itself, or one under the directory.
func (h HarnessPath) Holds(f string) bool {
	if strings.HasSuffix(h.Path, "/") {
		return strings.HasPrefix(f, h.Path)
	}
	return f == h.Path
}

// Harness is the config's harness mapping, in its order (none: every changed file not a
// testlist or an image moves every case).
func (g *Registry) Harness() []HarnessPath { return g.harness }

// readHarness reads doc's "affected"."harness" list, each entry checked: a relative path
// inside the repository, at least one backend, names that are strings.
func readHarness(src catalog.Source, doc *pyjson.Object) ([]HarnessPath, error) {
	v, ok := doc.Get("affected")
	if !ok {
		return nil, nil
	}
	aff, ok := v.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("%s: \"affected\" is %s, not an object", src.Name, pyjson.TypeName(v))
	}
	for _, m := range aff.Members() {
		if m.Key != "harness" {
			return nil, fmt.Errorf("%s: affected.%s: unknown key (affected holds \"harness\")", src.Name, safe.Text(m.Key))
		}
	}
	hv, ok := aff.Get("harness")
	if !ok {
		return nil, nil
	}
	list, ok := hv.([]pyjson.Value)
	if !ok {
		return nil, fmt.Errorf("%s: affected.harness is %s, not a list", src.Name, pyjson.TypeName(hv))
	}
	var out []HarnessPath
	for i, e := range list {
		where := fmt.Sprintf("%s: affected.harness[%d]", src.Name, i)
		o, ok := e.(*pyjson.Object)
		if !ok {
			return nil, fmt.Errorf("%s is %s, not an object", where, pyjson.TypeName(e))
		}
		var h HarnessPath
		for _, m := range o.Members() {
			switch m.Key {
			case "path":
				p, ok := m.Value.(string)
				clean := path.Clean(p)
				if !ok || p == "" || path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(p, "\\") {
					return nil, fmt.Errorf("%s.path %s: a path inside the repository, relative to its top (a directory ends in /)", where, safe.Text(fmt.Sprint(m.Value)))
				}
				h.Path = clean
				if strings.HasSuffix(p, "/") {
					h.Path += "/"
				}
			case "backends", "testlists":
				names, ok := m.Value.([]pyjson.Value)
				if !ok {
					return nil, fmt.Errorf("%s.%s is %s, not a list of names", where, m.Key, pyjson.TypeName(m.Value))
				}
				for _, n := range names {
					s, ok := n.(string)
					if !ok || s == "" {
						return nil, fmt.Errorf("%s.%s: %s is not a name", where, m.Key, safe.Text(fmt.Sprint(n)))
					}
					if m.Key == "backends" {
						h.Backends = append(h.Backends, s)
					} else {
						h.Testlists = append(h.Testlists, s)
					}
				}
			default:
				return nil, fmt.Errorf("%s: unknown key %s (path, backends, testlists)", where, safe.Text(m.Key))
			}
		}
		if h.Path == "" || len(h.Backends) == 0 {
			return nil, fmt.Errorf("%s: give a path and at least one backend", where)
		}
		out = append(out, h)
	}
	return out, nil
}
