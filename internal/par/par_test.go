package par

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Results come in index order whatever order the reads end in, and no more than window
// are held.
func TestOrderedUsesInOrder(t *testing.T) {
	var held, most atomic.Int64
	var got []int
	err := Ordered(t.Context(), 50, 3, func(_ context.Context, i int) (int, error) {
		time.Sleep(time.Duration((50-i)%7) * time.Millisecond) // later ones often end first
		n := held.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return i * i, nil
	}, func(i, v int) error {
		held.Add(-1)
		if v != i*i {
			return fmt.Errorf("result %d is %d", i, v)
		}
		got = append(got, i)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("used out of order: %v", got)
		}
	}
	if len(got) != 50 || most.Load() > 3 {
		t.Errorf("%d used, at most %d held (window 3)", len(got), most.Load())
	}
}

// The error is the first in index order, as a sequential reading would meet it, and
// nothing after it is used.
func TestOrderedStopsAtTheFirstErrorInOrder(t *testing.T) {
	var used []int
	err := Ordered(t.Context(), 20, 0, func(_ context.Context, i int) (int, error) {
		switch i {
		case 7:
			time.Sleep(20 * time.Millisecond) // ends after 12's error
			return 0, errors.New("seven")
		case 12:
			return 0, errors.New("twelve")
		}
		return i, nil
	}, func(i, v int) error {
		used = append(used, i)
		return nil
	})
	if err == nil || err.Error() != "seven" || len(used) != 7 {
		t.Errorf("err %v, used %v", err, used)
	}
	// use's own error stops it too
	err = Ordered(t.Context(), 20, 0, func(_ context.Context, i int) (int, error) { return i, nil }, func(i, v int) error {
		if i == 3 {
			return errors.New("use")
		}
		return nil
	})
	if err == nil || err.Error() != "use" {
		t.Errorf("use's error: %v", err)
	}
	// a cancelled context ends it
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Ordered(ctx, 5, 0, func(ctx context.Context, i int) (int, error) { return i, ctx.Err() }, func(int, int) error { return nil }); err == nil {
		t.Error("a cancelled context: no error")
	}
}

// SortFunc gives slices.SortFunc's order, at every length and on any number of cores:
// runs of every size, an odd one left over, elements moved whole.
func TestSortFuncIsSlicesSortFunc(t *testing.T) {
	type item struct {
		key string
		n   int
	}
	cmp := func(a, b item) int { return strings.Compare(a.key, b.key) }
	rng := rand.New(rand.NewPCG(3, 1))
	for _, procs := range []int{1, 2, 3, 4, 7} {
		old := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 2, 4095, 8192, 8193, 12289, 30000} {
			s := make([]item, n)
			for i := range s {
				s[i] = item{fmt.Sprintf("%08x-%d", rng.Uint32(), i), i}
			}
			want := slices.Clone(s)
			slices.SortFunc(want, cmp)
			SortFunc(s, cmp)
			if !slices.Equal(s, want) {
				t.Errorf("%d cores, %d items: not slices.SortFunc's order", procs, n)
			}
		}
		runtime.GOMAXPROCS(old)
	}
}
