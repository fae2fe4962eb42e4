package repository

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
	"github.com/seckill/seckill/service"
)

// TestReplicas_ThePrimaryIsNotItsOwnReplica: a commit is confirmed by a
// replica that has it, never by the server that committed it, even when
// that server is in the list (a replica promoted and still listed): with
// the only other replica stalled, nothing is confirmed; once it resumes,
// the same commit is. A primary and one replica of its own.
func TestReplicas_ThePrimaryIsNotItsOwnReplica(t *testing.T) {
	ctx := context.Background()
	set, err := mariadb.StartSet(ctx, t.TempDir(), 1, false)
	t.Cleanup(set.Stop)
	if err != nil {
		t.Fatal(err)
	}
	replica := set.Replicas[0]
	var nodes []ReplicaConfig
	for _, s := range []*mariadb.Server{set.Primary, replica} {
		db, addr, err := database.OpenReplica(s.RootDSN(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, ReplicaConfig{DB: db, Addr: addr})
	}
	primary, err := sql.Open("mysql", set.Primary.RootDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Close() })
	r := NewReplicas(ReplicasConfig{Nodes: nodes, Min: 1, Timeout: 300 * time.Millisecond, Primary: primary, Log: testenv.Logger()})
	t.Cleanup(func() { r.Close() })
	if err := set.Primary.Exec(ctx, "CREATE DATABASE t", "CREATE TABLE t.x (id INT AUTO_INCREMENT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	commit := func() service.Commit {
		t.Helper()
		conn, err := primary.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var c service.Commit
		if _, err := conn.ExecContext(ctx, "INSERT INTO t.x () VALUES ()"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, positionQuery).Scan(&c.Server, &c.GTIDs); err != nil {
			t.Fatal(err)
		}
		return c
	}

	if err := r.Confirm(ctx, commit()); err != nil {
		t.Fatalf("Confirm with the replica following = %v; want nil", err)
	}
	if err := replica.StopIO(ctx); err != nil {
		t.Fatal(err)
	}
	stalled := commit()
	if err := r.Confirm(ctx, stalled); !errors.Is(err, service.ErrNotReplicated) {
		t.Fatalf("Confirm with the replica stalled = %v; want ErrNotReplicated: the primary confirmed its own commit", err)
	}
	st := r.Status()
	if st.Replicas[0].State != replicaPrimary {
		t.Errorf("the listed primary's state = %q; want %q", st.Replicas[0].State, replicaPrimary)
	}
	if err := replica.StartIO(ctx); err != nil {
		t.Fatal(err)
	}
	// Once the replica has the commit (however long a busy machine takes
	// it to catch up), one Confirm within the 300ms timeout says so.
	var waited int
	if err := nodes[1].DB.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 60)", stalled.GTIDs).Scan(&waited); err != nil || waited != 0 {
		t.Fatalf("the resumed replica did not have the stalled commit within 60s: MASTER_GTID_WAIT = %d, %v", waited, err)
	}
	if err := r.Confirm(ctx, stalled); err != nil {
		t.Errorf("Confirm once the replica resumed = %v; want nil", err)
	}
	if err := r.Confirm(ctx, service.Commit{}); !errors.Is(err, service.ErrNotReplicated) {
		t.Errorf("Confirm of an unknown position = %v; want ErrNotReplicated", err)
	}
}

// TestGTIDs_StreamsAreTheirServers: a position is covered stream by
// stream; a later sequence number of another server (the promoted
// primary's, after a failover) does not cover a lost commit's.
func TestGTIDs_StreamsAreTheirServers(t *testing.T) {
	has, err := parseGTIDs("0-2-530,1-1-7")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{"0-2-530", true},
		{"0-2-100", true},
		{"0-2-531", false},
		{"0-1-520", false}, // the old primary's lost commit: seq passed, but by server 2
		{"1-1-7,0-2-1", true},
		{"1-1-8", false},
	} {
		want, err := parseGTIDs(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if got := has.covers(want); got != tc.ok {
			t.Errorf("%q covers %q = %v; want %v", "0-2-530,1-1-7", tc.want, got, tc.ok)
		}
	}
	for _, bad := range []string{"0-1", "a-b-c", "0-1-2-3"} {
		if _, err := parseGTIDs(bad); err == nil {
			t.Errorf("parseGTIDs(%q) = nil error; want one", bad)
		}
	}
}
