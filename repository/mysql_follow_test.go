package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
	"github.com/seckill/seckill/service"
)

// replicaRig is a primary and its replicas of a test's own, a table to
// commit to, and a pool of the primary that reads each commit's position.
type replicaRig struct {
	set     *mariadb.Set
	primary *sql.DB
	mover   *mariadb.Mover // the primary's address
}

func newReplicaRig(t testing.TB, replicas int) *replicaRig {
	t.Helper()
	ctx := context.Background()
	set, mover := mariadb.SetBehindMover(t, replicas, false)
	primary, err := sql.Open("mysql", "root@tcp("+mover.Addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Close() })
	if err := set.Primary.Exec(ctx, "CREATE DATABASE t", "CREATE TABLE t.x (id INT AUTO_INCREMENT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return &replicaRig{set: set, primary: primary, mover: mover}
}

// commit inserts a row on whatever the primary's address reaches and
// returns its position.
func (rig *replicaRig) commit(t *testing.T) service.Commit {
	t.Helper()
	ctx := context.Background()
	for range 50 { // the pool's connection to a server just gone is dropped, once
		conn, err := rig.primary.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var c service.Commit
		_, err = conn.ExecContext(ctx, "INSERT INTO t.x () VALUES ()")
		if err == nil {
			err = conn.QueryRowContext(ctx, positionQuery).Scan(&c.Server, &c.GTIDs)
		}
		conn.Close()
		if err == nil {
			return c
		}
		time.Sleep(100 * time.Millisecond) // the promoted server takes writes
	}
	t.Fatal("no commit on the primary's address in 5s")
	return service.Commit{}
}

func openReplicaAt(t testing.TB, addr string) ReplicaConfig {
	t.Helper()
	db, got, err := database.OpenReplica("root@tcp("+addr+")/", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return ReplicaConfig{DB: db, Addr: got}
}

// confirmedWithin asks Confirm c up to n times (each bounded by the
// replica timeout), for as long as the watch may take to see a change.
func confirmedWithin(r *Replicas, c service.Commit, n int) error {
	var err error
	for range n {
		if err = r.Confirm(context.Background(), c); err == nil {
			return nil
		}
	}
	return err
}

// TestReplicas_AnAddressMovedToAnotherServerIsAskedAgain (issue 46 d): a
// listed replica address that reached the primary (a promoted server
// still listed) and then moves to a real replica confirms commits again,
// without a restart: what was known of the address's server is not
// trusted once the server behind it changed.
func TestReplicas_AnAddressMovedToAnotherServerIsAskedAgain(t *testing.T) {
	rig := newReplicaRig(t, 1)
	at, err := mariadb.NewMover(rig.set.Primary.Addr) // the listed replica's address, at the primary first
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(at.Close)
	r := NewReplicas(ReplicasConfig{Nodes: []ReplicaConfig{openReplicaAt(t, at.Addr)}, Min: 1,
		Timeout: 300 * time.Millisecond, Primary: rig.primary, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { r.Close() })

	if err := r.Confirm(context.Background(), rig.commit(t)); !errors.Is(err, service.ErrNotReplicated) {
		t.Fatalf("Confirm with the only listed address at the primary = %v; want ErrNotReplicated", err)
	}
	at.Move(rig.set.Replicas[0].Addr, true)
	// The watch reads each replica's server every 2s: 40 tries of 300ms
	// cover several of its rounds.
	if err := confirmedWithin(r, rig.commit(t), 40); err != nil {
		t.Fatalf("Confirm after the address moved to a replica = %v; want nil: the old server id was trusted", err)
	}
}

// TestReplicas_FollowTheFailover (issue 46 f, g): one primary, one
// replica, min_replicas 1. The primary is lost and the replica promoted
// behind the primary's address: at once the listed replica is known as
// the primary and Ready says commits cannot be confirmed. The old
// primary, rebuilt, comes back as a replica of the promoted one at an
// address nobody listed: it is found on the primary (SHOW SLAVE HOSTS)
// and confirms again, with no restart. A replica back in sync is logged
// at INFO without an empty error.
func TestReplicas_FollowTheFailover(t *testing.T) {
	rig := newReplicaRig(t, 1)
	ctx := context.Background()
	replica := rig.set.Replicas[0]
	logs := &testenv.SyncBuffer{}
	opened := func(addr string) (*sql.DB, error) { return openReplicaAt(t, addr).DB, nil }
	r := NewReplicas(ReplicasConfig{Nodes: []ReplicaConfig{openReplicaAt(t, replica.Addr)}, Min: 1,
		Timeout: 300 * time.Millisecond, Primary: rig.primary, Open: opened,
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(func() { r.Close() })

	if err := confirmedWithin(r, rig.commit(t), 10); err != nil {
		t.Fatalf("Confirm before the failover = %v; want nil", err)
	}
	rig.set.Primary.Kill()
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	rig.mover.Move(replica.Addr, true)
	lost := rig.commit(t)
	if err := r.Confirm(ctx, lost); !errors.Is(err, service.ErrNotReplicated) {
		t.Fatalf("Confirm on the promoted primary with no replica = %v; want ErrNotReplicated", err)
	}
	if !eventually(func() bool {
		st := r.Status()
		return st.Replicas[0].State == replicaPrimary && errors.Is(r.Ready(), ErrCannotConfirm)
	}) {
		t.Fatalf("after the promotion: status %+v, Ready %v; want the listed replica is_primary and ErrCannotConfirm", r.Status(), r.Ready())
	}

	rebuilt, err := rig.set.AddReplica(ctx, 9, replica)
	if err != nil {
		t.Fatal(err)
	}
	if err := confirmedWithin(r, rig.commit(t), 60); err != nil {
		t.Fatalf("Confirm with the old primary rebuilt as a replica at %s = %v; want nil: it was not found", rebuilt.Addr, err)
	}
	if !eventually(func() bool { return r.Ready() == nil }) {
		t.Errorf("Ready with a replica found on the primary = %v; want nil", r.Ready())
	}
	st := r.Status()
	if len(st.Replicas) != 2 || !st.Replicas[1].Found || st.Replicas[1].ServerID != 9 {
		t.Errorf("replicas after the rebuild = %+v; want the listed one and server 9 found on the primary", st.Replicas)
	}
	checkReplicaLogs(t, logs.String())
}

// checkReplicaLogs: every line is JSON; "in sync" is INFO with no error.
func checkReplicaLogs(t *testing.T, out string) {
	t.Helper()
	inSync := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		if rec["msg"] == "mysql replica in sync" {
			inSync++
			if _, ok := rec["err"]; ok || rec["level"] != "INFO" {
				t.Errorf("replica in sync logged as %q; want INFO without err", line)
			}
		}
	}
	if inSync == 0 {
		t.Errorf("no replica in sync logged: %s", out)
	}
}

// eventually asks ok every 100ms for 10s: the watch reads every 2s.
func eventually(ok func() bool) bool {
	for range 100 {
		if ok() {
			return true
		}
		time.Sleep(100 * time.Millisecond) // the watch's next round
	}
	return false
}

// TestReplicas_TheShortestTimeoutIsNoBusyLoop (issue 46 e): at the
// shortest mysql.replica_timeout accepted (1ms), a replica that lags is
// asked again after a pause, not every millisecond: the round trips it
// gets are bounded by the time spent over askAgainAfter, plus the
// watch's probes.
func TestReplicas_TheShortestTimeoutIsNoBusyLoop(t *testing.T) {
	rig := newReplicaRig(t, 1)
	ctx := context.Background()
	proxy := testenv.StartMySQLProxy(t, rig.set.Replicas[0].Addr)
	r := NewReplicas(ReplicasConfig{Nodes: []ReplicaConfig{openReplicaAt(t, proxy.Addr)}, Min: 1,
		Timeout: time.Millisecond, Primary: rig.primary, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { r.Close() })
	if err := rig.set.Replicas[0].StopIO(ctx); err != nil {
		t.Fatal(err)
	}
	c := rig.commit(t)
	before, start := proxy.Commands(), time.Now()
	for range 200 {
		if err := r.Confirm(ctx, c); !errors.Is(err, service.ErrNotReplicated) {
			t.Fatalf("Confirm with the replica stalled = %v; want ErrNotReplicated", err)
		}
	}
	asked, took := proxy.Commands()-before, time.Since(start)
	if bound := int64(took/askAgainAfter)*2 + 2*int64(took/watchEvery) + 10; asked > bound {
		t.Errorf("the stalled replica was asked %d times in %v; want at most %d (a pause of %v between tries)", asked, took, bound, askAgainAfter)
	}
}
