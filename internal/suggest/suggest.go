// Package suggest finds what a user most likely meant by a name opx does not know: the
// one "did you mean" every command gives for a mistyped flag, backend or subcommand.
package suggest

import "strings"

// Closest is the option nearest name: within two edits, or one that name begins (a
// prefix counts as one edit, after every option within one real edit); "" when none.
// Options at the same distance keep their order.
func Closest(name string, options []string) string {
	best, bestD, bestReal := "", 3, 0
	for _, o := range options {
		real := Distance(name, o)
		d := real
		if strings.HasPrefix(o, name) && d > 1 {
			d = 1
		}
		if d < bestD || d == bestD && real < bestReal {
			best, bestD, bestReal = o, d, real
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
