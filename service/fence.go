package service

import "math"

// ZooKeeperFences is where the ZooKeeper lock's fences start (1<<62 plus the
// lock node's creation zxid); the Redis lock's are below it
// (microsecond-seeded, about 2^51 today). Fences of different backends do
// not compare, so a Store accepts a batch whose fence is no older than the
// stored one, or whose stored fence was issued by the other backend: a
// switch of lock backend resets the comparison instead of leaving every
// write refused as stale (DESIGN.md invariant 12). While both backends are
// in use (a rolling switch) a holder of one excludes nobody of the other,
// and the version column alone guards the stock, as in fallback mode.
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
