package lock

import "time"

// Observer receives events a service may turn into metrics. Its methods are
// called synchronously from the goroutine that caused the event (the caller
// of Obtain, Refresh, or the watchdog), so they must be safe for concurrent
// use and return quickly. QueueDepth is called under the Client's internal
// lock, so that the depths of one key arrive in order (a gauge fed from them
// ends at the true depth); it must not call back into the Client.
type Observer interface {
	// Obtained reports every Obtain outcome: the Redis attempts made (0 when
	// the call never reached Redis, e.g. ErrQueueFull), the time from the call
	// to the outcome including local queueing, and the error (nil on success).
	Obtained(key string, attempts int, wait time.Duration, err error)
	// QueueDepth reports the number of goroutines of this Client waiting
	// locally for key, each time it changes, in order.
	QueueDepth(key string, depth int)
	// Refreshed reports the outcome of every lease renewal, by the watchdog
	// or by Lock.Refresh.
	Refreshed(key string, err error)
	// LeaseLost reports that the watchdog found a lease gone while its holder
	// still held the Lock.
	LeaseLost(key string)
}

// NopObserver is an Observer that ignores every event. It is the default.
type NopObserver struct{}

// Obtained does nothing.
func (NopObserver) Obtained(string, int, time.Duration, error) {}

// QueueDepth does nothing.
func (NopObserver) QueueDepth(string, int) {}

// Refreshed does nothing.
func (NopObserver) Refreshed(string, error) {}

// LeaseLost does nothing.
func (NopObserver) LeaseLost(string) {}
