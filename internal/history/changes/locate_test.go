package changes

import (
	"math"
	"math/rand/v2"
	"testing"
)

// prefixDeviations gives what deviation gives, prefix by prefix, on series of every
// shape (ties, steps, outliers, short and long).
func TestPrefixDeviationsIsDeviation(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for trial := range 300 {
		n := 1 + rng.IntN(80)
		y := make([]float64, n)
		for i := range y {
			switch trial % 3 {
			case 0:
				y[i] = rng.NormFloat64()
			case 1:
				y[i] = float64(rng.IntN(4)) // ties
			default:
				y[i] = rng.NormFloat64() + float64(i/20)*3
			}
		}
		got := prefixDeviations(y)
		for k := 0; k <= n; k++ {
			want := 0.0
			if k > 0 {
				want = deviation(y[:k])
			}
			if math.Abs(got[k]-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("trial %d, prefix %d of %v: %v, want %v", trial, k, y, got[k], want)
			}
		}
	}
}

// BenchmarkAtNewest1000 is the gate's check of one 1,000-run series with a 15% step every
// 50 runs and a slow drift (the shape whose cost grew fastest): go test -bench AtNewest
// -benchmem ./internal/history/changes (docs/history.md).
func BenchmarkAtNewest1000(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := make([]Obs, 1000)
	for i := range s {
		s[i] = Obs{V: 20 * math.Exp(rng.NormFloat64()*0.02) * math.Pow(1.15, float64((i/50)%2)) * (1 + 0.0005*float64(i)), Node: "a"}
	}
	b.ReportAllocs()
	for b.Loop() {
		AtNewest(s, Defaults)
	}
}

// BenchmarkAtNewest1000Quiet is a 1,000-run series with no change on six nodes: what most
// series of a backfill are.
func BenchmarkAtNewest1000Quiet(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 3))
	s := make([]Obs, 1000)
	for i := range s {
		s[i] = Obs{V: 20 * math.Exp(rng.NormFloat64()*0.02), Node: string(rune('a' + rng.IntN(6)))}
	}
	b.ReportAllocs()
	for b.Loop() {
		AtNewest(s, Defaults)
	}
}

// deviation is v's sum of absolute deviations about its median: the direct sum
// prefixDeviations is held to.
func deviation(v []float64) float64 {
	m := median(v)
	d := 0.0
	for _, x := range v {
		d += math.Abs(x - m)
	}
	return d
}
