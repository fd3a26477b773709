// Readable names: a series key as people say it (CaseName), a cluster as a runner and a
// machine (RunnerOf, IsLocal), and what a run's time is of (CPU on the local runner).

package history

import (
	"strings"

	"github.com/semianalysis/opx/internal/summary"
)

// CaseName is a case key as people read it — "gemm 128×128×128 fp32 · cpu · ws=1 ·
// local@vm": the op, a GEMM's m×n×k and its dtypes (one when they agree, else
// a×b→out: fp8×fp8→bf16), the other
// args as key=value, the backend, world size and cluster. Pages show it; the full key
// stays in links, titles and JSON. A key not of opx's shape is returned as it is.
func CaseName(key string) string {
	parts := strings.Split(key, " | ")
	if len(parts) < 6 {
		return key
	}
	n := len(parts)
	op, args, backend, ws, cluster := parts[1], strings.Join(parts[2:n-3], " | "), parts[n-3], parts[n-2], parts[n-1]
	a, err := summary.ParseArgs([]byte(args))
	if err != nil {
		return key
	}
	words := []string{op}
	var dims, dtypes, rest []string
	typed := map[string]string{} // the dtype fields, by key
	fields := strings.Fields(a.Label())
	at := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		at[k] = v
	}
	shaped := at["m"] != "" && at["n"] != "" && at["k"] != ""
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		switch {
		case shaped && (k == "m" || k == "n" || k == "k"):
			continue
		case shaped && (k == "a" || k == "b" || k == "out" || strings.HasSuffix(k, "dtype")):
			typed[k] = v
			if !contains(dtypes, v) {
				dtypes = append(dtypes, v)
			}
		default:
			rest = append(rest, f)
		}
	}
	if shaped {
		dims = []string{at["m"] + "×" + at["n"] + "×" + at["k"]}
	}
	// dtypes that differ keep their places: a×b→out (fp8×fp8→bf16), else key=value
	if len(dtypes) > 1 {
		if len(typed) == 3 && typed["a"] != "" && typed["b"] != "" && typed["out"] != "" {
			dtypes = []string{typed["a"] + "×" + typed["b"] + "→" + typed["out"]}
		} else {
			dtypes = dtypes[:0]
			for _, f := range fields {
				if k, _, _ := strings.Cut(f, "="); typed[k] != "" {
					dtypes = append(dtypes, f)
				}
			}
		}
	}
	words = append(append(append(words, dims...), dtypes...), rest...)
	return strings.Join(words, " ") + " · " + backend + " · " + ws + " · " + cluster
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// IsLocal is whether a series' cluster is a machine of the local runner (local@HOST).
func IsLocal(cluster string) bool {
	return cluster == LocalRunner || strings.HasPrefix(cluster, LocalRunner+"@")
}

// unitOf is what a run's or case's time is of: "CPU" on the local runner, else "GPU".
func unitOf(cpu bool) string {
	if cpu {
		return "CPU"
	}
	return "GPU"
}

// RunnerOf is a runner label of a series' cluster's hardware family (h200_dgxc_8x:
// cluster:h200), enough to place its cases against the family's limits (sol).
func RunnerOf(cluster string) string {
	family, _, _ := strings.Cut(strings.TrimPrefix(cluster, LocalRunner+"@"), "_")
	return "cluster:" + family
}
