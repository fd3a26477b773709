package compare

import (
	"fmt"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
)

// Counts says how many of the cases are of each class: "1 broken, 2 only-base".
func Counts(cases []Case) string {
	n := map[string]int{}
	var order []string
	for _, c := range cases {
		if n[c.Class] == 0 {
			order = append(order, c.Class)
		}
		n[c.Class]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

// ParseKey parses --key: fields of the case key, at least one.
func ParseKey(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if !slices.Contains(results.KeyFields, f) {
			return nil, fmt.Errorf("--key: unknown field %s (fields: %s)", safe.Text(f), strings.Join(results.KeyFields, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseFilter parses a filter flag's FIELD=VALUE[,...].
func ParseFilter(flag, s string) (Filter, error) {
	if s == "" {
		return nil, nil
	}
	f := Filter{}
	fields := append(slices.Clone(results.KeyFields), "runner", "status")
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(fields, k) {
			return nil, fmt.Errorf("%s: %s is not FIELD=VALUE with a field of %s", flag, safe.Text(kv), strings.Join(fields, ", "))
		}
		f[k] = v
	}
	return f, nil
}
