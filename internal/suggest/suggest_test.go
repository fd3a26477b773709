package suggest

import "testing"

// The nearest option wins; a prefix counts, after a true one-edit match; nothing far.
func TestClosest(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []string
		want string
	}{
		{"testlist", []string{"testlist-dir", "testlists"}, "testlists"},
		{"testl", []string{"testlist-dir", "testlists"}, "testlists"}, // both begin with it: the nearer
		{"cpuu", []string{"cpu", "vllm"}, "cpu"},
		{"sglang", []string{"cpu", "vllm"}, ""},
		{"test", []string{"testlist-dir"}, "testlist-dir"},
	} {
		if got := Closest(c.name, c.opts); got != c.want {
			t.Errorf("Closest(%q, %v) = %q, want %q", c.name, c.opts, got, c.want)
		}
	}
}
