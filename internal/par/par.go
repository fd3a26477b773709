// Package par reads in parallel and uses in order: the reader of a run parses its files
// on every core while what it settles — the shard report, the ledger, the rows handed to
// a command — still comes in the run's order, and the first error is the one a sequential
// reading would have met.
package par

import (
	"context"
	"runtime"
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
