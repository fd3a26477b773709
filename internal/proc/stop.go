package proc

import (
	"context"
	"sync/atomic"
)

// stopNowKey carries the context that ends opx now: the second signal, where the first
// only stops new work and starts the cleanup.
type stopNowKey struct{}

// WithStopNow returns ctx carrying now, the context a second signal cancels. Cleanup
// contexts derived from ctx end when now does.
func WithStopNow(ctx, now context.Context) context.Context {
	return context.WithValue(ctx, stopNowKey{}, now)
}

// Cleanup is the context for what must still run once ctx is cancelled (a shard's
// allocation cancelled and confirmed gone, its rows collected): ctx's values, not ended by
// ctx's cancellation, ended (with its cause) when the context set by WithStopNow is — a
// second signal: the user asked to stop now, and the cleanup keeps what it could not
// prove safe to delete. Without one it is context.WithoutCancel(ctx). Call stop when done.
func Cleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	now, ok := ctx.Value(stopNowKey{}).(context.Context)
	if !ok {
		return c, func() { cancel(nil) }
	}
	unregister := context.AfterFunc(now, func() { cancel(context.Cause(now)) })
	return c, func() {
		unregister()
		cancel(nil)
	}
}

// stopWordsKey carries where a command puts what a second signal's message says of it.
type stopWordsKey struct{}

// WithStopWords returns ctx carrying words, which SetStopWords sets and StopWords reads:
// the words the second signal's message says (a server speaks of its requests, not of
// shards and allocations).
func WithStopWords(ctx context.Context, words *atomic.Pointer[string]) context.Context {
	return context.WithValue(ctx, stopWordsKey{}, words)
}

// SetStopWords makes msg what a second signal says while ctx's command runs.
func SetStopWords(ctx context.Context, msg string) {
	if w, ok := ctx.Value(stopWordsKey{}).(*atomic.Pointer[string]); ok {
		w.Store(&msg)
	}
}
