package handler

import (
	"fmt"
	"testing"
)

func TestLimiter_NewKeysPastTheCapDoNotResetABusyKey(t *testing.T) {
	t.Parallel()
	const keys = 100
	l := newLimiter(0.001, 3, keys) // no refill within the test
	for i := range 3 {
		if !l.allow("heavy") {
			t.Fatalf("heavy request %d refused within its burst", i)
		}
	}
	// Rotating ids, ten times the table, while the heavy user keeps trying.
	for i := range 10 * keys {
		if !l.allow(fmt.Sprintf("rotating-%d", i)) {
			t.Fatalf("rotating id %d refused: a new key has a full bucket", i)
		}
		if i%(keys/4) == 0 && l.allow("heavy") {
			t.Fatalf("after %d rotating ids the heavy user was allowed again: its bucket was reset", i+1)
		}
		if n := len(l.buckets); n > keys {
			t.Fatalf("%d buckets after %d rotating ids; want at most %d", n, i+1, keys)
		}
	}
	if n := l.listed(); n != len(l.buckets) {
		t.Errorf("%d buckets listed by use, %d in the table", n, len(l.buckets))
	}
}

func TestLimiter_EvictsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	l := newLimiter(0.001, 1, 3)
	for _, k := range []string{"a", "b", "c"} {
		l.allow(k) // each bucket now empty
	}
	l.allow("a") // a is the most recently used; b the least
	l.allow("d") // evicts b
	for _, tt := range []struct {
		key  string
		want bool
	}{{"b", true}, {"a", false}, {"d", false}} {
		if got := l.allow(tt.key); got != tt.want {
			t.Errorf("allow(%q) = %v; want %v", tt.key, got, tt.want)
		}
	}
}

// listed counts the buckets on the use list, checking that the table
// and the list agree.
func (l *limiter) listed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byUse.Len() != len(l.buckets) {
		return -1
	}
	for e := l.byUse.Front(); e != nil; e = e.Next() {
		if l.buckets[e.Value.(*bucket).key] != e {
			return -1
		}
	}
	return l.byUse.Len()
}
