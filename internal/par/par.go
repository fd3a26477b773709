// Package par reads in parallel and uses in order: work on every core, results handed on in
// their order, the first error the one a sequential reader would meet.
//
// It reads in parallel and uses in order: the reader of a run parses its files
// on every core while what it settles — the shard report, the ledger, the rows handed to
// a command — still comes in the run's order, and the first error is the one a sequential
// reading would have met.
package par

import (
	"context"
	"runtime"
	"slices"
	"sync"
)

// Ordered runs read(i) for every i in [0, n) on up to GOMAXPROCS goroutines, and hands
// each result to use in index order, holding at most window results that use has not
// taken yet (window < 1: twice the goroutines), so memory stays bounded whatever n is. It
// stops at the first error in index order — read's or use's — cancels the reads still
// going and returns that error.
func Ordered[T any](ctx context.Context, n, window int, read func(ctx context.Context, i int) (T, error), use func(i int, v T) error) error {
	workers := min(runtime.GOMAXPROCS(0), max(n, 1))
	if window < 1 {
		window = 2 * workers
	}
	ctx, cancel := context.WithCancel(ctx)
	type result struct {
		v   T
		err error
	}
	slots := make([]chan result, n)
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	todo := make(chan int)
	room := make(chan struct{}, window) // a result read and not yet used holds one
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs first: the reads and the dispatcher stop, then Wait returns
	wg.Go(func() {
		defer close(todo)
		for i := range n {
			select {
			case room <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case todo <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range workers {
		wg.Go(func() {
			for i := range todo {
				if ctx.Err() != nil {
					slots[i] <- result{err: context.Cause(ctx)}
					continue
				}
				v, err := read(ctx, i)
				slots[i] <- result{v, err}
			}
		})
	}
	for i := range n {
		var r result
		select {
		case r = <-slots[i]:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		<-room
		if r.err != nil {
			return r.err
		}
		if err := use(i, r.v); err != nil {
			return err
		}
	}
	return nil
}

// SortFunc sorts s by cmp, which must order every two elements (none compare equal): a
// part of s on each core (slices.SortFunc), then the sorted parts merged, two at a time,
// each pair on a core. The order is the one cmp gives, as slices.SortFunc's is.
func SortFunc[E any](s []E, cmp func(a, b E) int) {
	parts := min(runtime.GOMAXPROCS(0), len(s)/4096) // below a few thousand, one core's sort is the quicker
	if parts < 2 {
		slices.SortFunc(s, cmp)
		return
	}
	bounds := make([]int, parts+1) // the sorted runs: s[bounds[p]:bounds[p+1]]
	for p := range bounds {
		bounds[p] = len(s) * p / parts
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { slices.SortFunc(s[bounds[p]:bounds[p+1]], cmp) })
	}
	wg.Wait()
	src, dst := s, make([]E, len(s))
	for len(bounds) > 2 {
		next := make([]int, 0, len(bounds)/2+1)
		for p := 0; p < len(bounds)-1; p += 2 {
			lo := bounds[p]
			next = append(next, lo)
			if p+2 == len(bounds) { // a run left over: as it is
				hi := bounds[p+1]
				wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
				continue
			}
			mid, hi := bounds[p+1], bounds[p+2]
			wg.Go(func() { merge(dst[lo:hi], src[lo:mid], src[mid:hi], cmp) })
		}
		wg.Wait()
		bounds = append(next, len(s))
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

// merge writes sorted a and b, merged, to dst.
func merge[E any](dst, a, b []E, cmp func(a, b E) int) {
	k := 0
	for len(a) > 0 && len(b) > 0 {
		if cmp(b[0], a[0]) < 0 {
			dst[k], b = b[0], b[1:]
		} else {
			dst[k], a = a[0], a[1:]
		}
		k++
	}
	k += copy(dst[k:], a)
	copy(dst[k:], b)
}
