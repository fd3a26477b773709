package shard

import (
	"slices"
	"testing"
)

// A cell's nodes to avoid (a confirmation manifest's) join the site profile's --exclude
// in one flag; with none, the profile's flags are as they were.
func TestExcludingMergesIntoOneFlag(t *testing.T) {
	profile := []string{"--account=perf", "--exclude=bad-01"}
	if got := excluding(profile, nil); !slices.Equal(got, profile) {
		t.Errorf("no nodes: %v", got)
	}
	got := excluding(profile, []string{"gpu-07", "gpu-09"})
	if want := []string{"--account=perf", "--exclude=bad-01,gpu-07,gpu-09"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := excluding([]string{"--qos=high"}, []string{"gpu-07"}); !slices.Equal(got, []string{"--qos=high", "--exclude=gpu-07"}) {
		t.Errorf("no profile exclude: %v", got)
	}
}
