package zookeeper

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Bounds of the background deletion of a failed Obtain's or Release's
// nodes. An orphan blocks its key while its session lives; past these
// bounds it is left to the session's end.
const (
	abandonFor   = time.Minute            // each node is retried this long after its failure
	abandonPause = 100 * time.Millisecond // between rounds while ZooKeeper does not answer
	maxAbandoned = 1024                   // nodes awaiting deletion per client
)

// abandoned is the nodes a client still has to delete, and whether its
// one goroutine that deletes them runs.
type abandoned struct {
	mu      sync.Mutex
	jobs    []abandonJob
	running bool
}

type abandonJob struct {
	dir, token string
	until      time.Time
}

// abandon queues the deletion of token's nodes under dir, retried for
// abandonFor by one goroutine per client, however many fail.
func (z *Client) abandon(dir, token string) {
	z.ab.mu.Lock()
	defer z.ab.mu.Unlock()
	if len(z.ab.jobs) >= maxAbandoned {
		return
	}
	z.ab.jobs = append(z.ab.jobs, abandonJob{dir: dir, token: token, until: time.Now().Add(abandonFor)})
	if !z.ab.running {
		z.ab.running = true
		go z.abandonAll()
	}
}

// abandonAll deletes the queued nodes, oldest first, until none is left.
// It sends nothing while the session is disconnected (a request would only
// wait for the connection) and pauses between rounds.
func (z *Client) abandonAll() {
	for {
		job, ok := z.nextAbandoned()
		if !ok {
			return
		}
		if z.conn.State() == zk.StateHasSession {
			ctx, cancel := context.WithDeadline(context.Background(), job.until)
			done, err := z.deleteByToken(ctx, job.dir, job.token)
			cancel()
			if done || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) {
				z.ab.mu.Lock()
				z.ab.jobs = z.ab.jobs[1:] // with the session, the nodes went too
				z.ab.mu.Unlock()
				continue
			}
		}
		time.Sleep(abandonPause) // waiting for ZooKeeper to answer again, bounded above by the jobs' time
	}
}

// nextAbandoned drops the jobs past their time and returns the oldest
// left, or false (and marks the goroutine stopped) when none is.
func (z *Client) nextAbandoned() (abandonJob, bool) {
	z.ab.mu.Lock()
	defer z.ab.mu.Unlock()
	now := time.Now()
	for len(z.ab.jobs) > 0 && !now.Before(z.ab.jobs[0].until) {
		z.ab.jobs = z.ab.jobs[1:]
	}
	if len(z.ab.jobs) == 0 {
		z.ab.jobs, z.ab.running = nil, false
		return abandonJob{}, false
	}
	return z.ab.jobs[0], true
}
