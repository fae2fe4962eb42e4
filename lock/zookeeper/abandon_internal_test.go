package zookeeper

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// TestZooKeeper_AbandonIsBounded: thousands of failed Obtains while
// ZooKeeper cannot be reached cost one goroutine and a bounded list, and
// each node is given up once its time is past.
func TestZooKeeper_AbandonIsBounded(t *testing.T) {
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	z := New(conn, Options{})
	before := runtime.NumGoroutine()
	const failures = 5000
	for i := range failures {
		z.abandon("/seckill/locks/k", fmt.Sprintf("token%d", i))
	}
	if grew := runtime.NumGoroutine() - before; grew > 1 {
		t.Errorf("%d failed Obtains started %d goroutines; want 1", failures, grew)
	}
	z.ab.mu.Lock()
	queued := len(z.ab.jobs)
	latest := time.Now().Add(abandonFor)
	for _, j := range z.ab.jobs {
		if j.until.After(latest) {
			t.Errorf("node %s retried until %v; want at most abandonFor (%v) after its failure", j.token, j.until, abandonFor)
			break
		}
	}
	// Their time is up: the goroutine drops them all and ends.
	for i := range z.ab.jobs {
		z.ab.jobs[i].until = time.Now()
	}
	z.ab.mu.Unlock()
	if queued != maxAbandoned {
		t.Errorf("%d nodes queued for deletion after %d failures; want %d (the bound)", queued, failures, maxAbandoned)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		z.ab.mu.Lock()
		running, left := z.ab.running, len(z.ab.jobs)
		z.ab.mu.Unlock()
		if !running {
			if left != 0 {
				t.Errorf("%d nodes left queued with no goroutine to delete them", left)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleting goroutine still runs 30s after every node's time was past")
		}
		time.Sleep(10 * time.Millisecond) // polling state, bounded above
	}
}
