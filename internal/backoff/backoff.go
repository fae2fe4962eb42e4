// Package backoff spreads retries out: a jittered pause that grows with
// each attempt, so that contenders that failed together do not retry
// together.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Wait waits a random pause under 2^attempt ms (at most 64ms), plus
// 100µs, or until ctx ends, whichever comes first.
func Wait(ctx context.Context, attempt int) {
	ceiling := time.Millisecond << min(attempt, 6)
	t := time.NewTimer(rand.N(ceiling) + 100*time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
