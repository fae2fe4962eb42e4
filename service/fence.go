package service

import (
	"fmt"
	"math"
)

// ZooKeeperFences is where the ZooKeeper lock's fences start (1<<62 plus
// the node's creation zxid); the Redis lock's are below. Fences of two
// backends do not compare: a switch resets the comparison rather than
// refusing every write as stale (docs/design.md, invariant 12), and while
// both run only the version column guards the stock.
const ZooKeeperFences int64 = 1 << 62

// FenceCeiling returns the highest fence issued by the backend that issued
// f: a stored fence above it came from another backend.
func FenceCeiling(f int64) int64 {
	if f >= ZooKeeperFences {
		return math.MaxInt64
	}
	return ZooKeeperFences - 1
}

// FenceStale reports whether a batch fenced with f must be refused because
// the stored fence is newer and was issued by the same backend as f: its
// lease was superseded. A batch without a fence (f == 0) is never stale.
func FenceStale(stored, f int64) bool {
	return f > 0 && stored > f && stored <= FenceCeiling(f)
}

// StaleFenceError is the ErrStaleFence a store returns, with the fences it
// compared.
type StaleFenceError struct {
	SKUID  int64
	Stored int64 // the SKU row's fence
	Fence  int64 // the batch's
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("%v: sku %d carries fence %d, the batch %d", ErrStaleFence, e.SKUID, e.Stored, e.Fence)
}

func (e *StaleFenceError) Unwrap() error { return ErrStaleFence }
