package gitsource

import "time"

// Hooks into the Branch for its tests.

// PushAttempts is how many pushes Write tries before it gives up.
const PushAttempts = pushAttempts

// BeforePush makes b call f after each commit is built and before it is
// pushed: the window in which someone else may push.
func BeforePush(b *Branch, f func(attempt int)) { b.beforePush = f }

// FastRetries makes rejected pushes retry at once, until the test ends.
func FastRetries(cleanup func(func())) {
	b, m := retryBase, retryMax
	retryBase, retryMax = time.Millisecond, 5*time.Millisecond
	cleanup(func() { retryBase, retryMax = b, m })
}

// CompactAfter sets how many stored objects make the Branch drop its
// cache, until the test ends.
func CompactAfter(n int, cleanup func(func())) {
	old := compactAfter
	compactAfter = n
	cleanup(func() { compactAfter = old })
}
