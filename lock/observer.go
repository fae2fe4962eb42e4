package lock

import "time"

// Observer receives events to turn into metrics. Its methods run in the
// goroutine that caused the event: they must be concurrency-safe and quick.
// QueueDepth runs under the Client's lock, so depths arrive in order; it
// must not call back into the Client.
type Observer interface {
	// Obtained reports every Obtain outcome: the Redis attempts (0 if none,
	// as with ErrQueueFull), the wait including local queueing, and the error.
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
