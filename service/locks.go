package service

import (
	"context"
	"strconv"
	"time"
)

// LockInspector reads a lock's state as its store knows it, without taking
// or extending the lease. It returns ErrUnavailable and ErrLockUnavailable
// (wrapped) when the lock's backend cannot be reached.
type LockInspector interface {
	InspectLock(ctx context.Context, key string) (LockState, error)
}

// LockState is one lock's state (see lock.State).
type LockState struct {
	Held bool
	// Owner names the holder's instance; Token is the first characters of
	// its lease's random token, never the whole token.
	Owner, Token string
	// Fence is the holder's fence; when free, the last one issued.
	Fence     int64
	LeaseLeft time.Duration
	Since     time.Time // zero when the backend cannot tell
	// Renewed reports that the holder was seen alive lately; Wanted that
	// another instance was refused the lock lately.
	Renewed, Wanted bool
	// Waiters are this instance's goroutines queued for the lock; Queued
	// every instance's (only ZooKeeper knows).
	Waiters, Queued int
	// Nodes is the state on each master of a Redlock.
	Nodes []LockState
}

// SKULockKey is the key of a SKU's lock.
func SKULockKey(id int64) string { return "sku:" + strconv.FormatInt(id, 10) }
