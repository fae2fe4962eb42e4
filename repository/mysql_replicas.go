package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/service"
)

var _ Confirmer = (*Replicas)(nil)

// Replicas confirms commits on the primary's replicas
// (mysql.min_replicas): a commit is confirmed once min replicas other
// than the server that committed it have it. Each replica is asked by one
// goroutine of its own, with MASTER_GTID_WAIT for the highest position
// anyone waits for, so a confirmation covers every earlier commit of the
// same server and waits overlap instead of queueing: one wait serves
// many batches, never one per order.
//
// What a replica has is read from @@gtid_slave_pos and
// @@gtid_binlog_state in the wait's round trip, stream by stream
// (domain and server): after a failover the promoted server reuses the
// sequence numbers of the commits the old primary lost, and only the
// server id tells them apart (MASTER_GTID_WAIT alone compares sequence
// numbers).
type Replicas struct {
	min     int
	timeout time.Duration
	primary *sql.DB // the watch's probe of the primary
	retire  Retirer // ends the primary pool's connections when it reaches a read-only server
	open    func(addr string) (*sql.DB, error)
	obs     ReplicaObserver
	log     *slog.Logger

	mu           sync.Mutex
	nodes        []*replica    // the listed, then those found on the primary; only grows
	primaryAt    gtids         // the primary's position at the watch's last probe
	changed      chan struct{} // closed and replaced whenever a replica's state moves
	wanted       gtids         // what callers wait for, on wantedServer
	wantedServer int64
	waiting      int    // Confirm calls under way: no replica is asked without one
	semiSync     string // the primary's semi-sync replication, as the watch saw it
	readOnly     bool   // the primary's address reached a read-only server
	primaryID    int64
	logged       map[string]bool // what was logged once

	stop chan struct{}
	wg   sync.WaitGroup
}

// Retirer ends a pool's connections (database.PrimaryGuard).
type Retirer interface{ Retire() }

// ReplicaObserver hears of each confirmation: how long it waited and
// whether enough replicas confirmed.
type ReplicaObserver interface {
	Confirmation(wait time.Duration, confirmed bool)
}

// replica is one replica and what it was last seen to have. Its fields
// below kick are guarded by Replicas.mu.
type replica struct {
	name  string // "replica 2 (127.0.0.1:3307)": never the DSN
	addr  string
	found bool // found on the primary (SHOW SLAVE HOSTS), not listed
	db    *sql.DB
	kick  chan struct{} // capacity 1: "someone waits for more"

	has      gtids // every stream's last commit it was seen to have
	serverID int64
	state    string // see replicaStates
	err      string // the last error, when down
	lastWait time.Duration
	lagTxns  int64 // transactions behind the primary, as the watch saw it
	keepsUp  bool  // had what it was last asked for, or what the primary had a probe before
	asking   int   // waits in flight (at most waitsPerReplica)
	asked    gtids // the highest position they wait for
}

// waitsPerReplica is how many waits one replica is asked at once: a
// commit that arrives while a wait is in flight for an earlier one is
// asked for at once, not after it, so a confirmation takes one wait, not
// up to two.
const waitsPerReplica = 2

// The states a replica is reported in.
const (
	replicaUnknown  = "unknown"    // not asked yet
	replicaInSync   = "in_sync"    // had what it was asked for
	replicaLagging  = "lagging"    // did not have it within mysql.replica_timeout
	replicaDown     = "down"       // did not answer
	replicaPrimary  = "is_primary" // it is the server that committed: it does not count
	replicaDiverged = "elsewhere"  // at the sequence asked for, from another server's history
)

// ReplicaConfig is one replica: its pool and its name.
type ReplicaConfig struct {
	DB   *sql.DB
	Addr string
}

// ReplicasConfig is what NewReplicas confirms with.
type ReplicasConfig struct {
	Nodes   []ReplicaConfig // mysql.replicas
	Min     int             // mysql.min_replicas
	Timeout time.Duration   // mysql.replica_timeout
	// Primary is the service's pool of the primary, probed every
	// watchEvery for its semi-sync status, its read-only flag and its
	// replicas; Retire ends its connections when it turned read-only.
	Primary *sql.DB
	Retire  Retirer
	// Open, when set, opens a pool to a replica the primary lists (SHOW
	// SLAVE HOSTS, with report_host) at an address Nodes lack: after a
	// failover the old primary comes back as a replica there.
	Open func(addr string) (*sql.DB, error)
	Obs  ReplicaObserver
	Log  *slog.Logger
}

// maxReplicaNodes bounds the replicas asked, listed and found together.
const maxReplicaNodes = 16

// NewReplicas starts confirming on the configured replicas: Min of them
// must have a commit within Timeout. Close stops it.
func NewReplicas(cfg ReplicasConfig) *Replicas {
	r := &Replicas{min: cfg.Min, timeout: cfg.Timeout, primary: cfg.Primary, retire: cfg.Retire, open: cfg.Open,
		obs: cfg.Obs, log: cfg.Log, changed: make(chan struct{}), wanted: gtids{}, semiSync: "unknown", stop: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	for _, n := range cfg.Nodes {
		r.add(n.DB, n.Addr, false)
	}
	r.wg.Add(1)
	go r.watch()
	return r
}

// add starts asking the replica at addr; false when maxReplicaNodes are
// asked already.
func (r *Replicas) add(db *sql.DB, addr string, found bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.nodes) >= maxReplicaNodes {
		return false
	}
	name := fmt.Sprintf("replica %d (%s)", len(r.nodes)+1, addr)
	if found {
		name = fmt.Sprintf("replica %d (%s, found on the primary)", len(r.nodes)+1, addr)
	}
	n := &replica{name: name, addr: addr, found: found, db: db, kick: make(chan struct{}, 1), has: gtids{}, asked: gtids{}, state: replicaUnknown}
	r.nodes = append(r.nodes, n)
	for range waitsPerReplica {
		r.wg.Add(1)
		go r.follow(n)
	}
	return true
}

// list returns the replicas asked so far.
func (r *Replicas) list() []*replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.nodes)
}

// Close stops the goroutines and closes the replicas' pools.
func (r *Replicas) Close() error {
	close(r.stop)
	r.wg.Wait()
	var errs []error
	for _, n := range r.list() {
		errs = append(errs, n.db.Close())
	}
	return errors.Join(errs...)
}

// Confirm implements Confirmer (and the engine's Replicas).
func (r *Replicas) Confirm(ctx context.Context, c service.Commit) error {
	if r.min <= 0 {
		return nil
	}
	want, err := parseGTIDs(c.GTIDs)
	if err != nil || c.Server == 0 || len(want) == 0 {
		return fmt.Errorf("%w: the commit's position is unknown (is the primary's binary log on?)", service.ErrNotReplicated)
	}
	start := time.Now()
	r.mu.Lock()
	if c.Server != r.wantedServer {
		r.wanted, r.wantedServer = gtids{}, c.Server
	}
	r.wanted.merge(want)
	r.waiting++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
	}()
	for _, n := range r.list() {
		n.poke()
	}
	deadline := time.NewTimer(r.timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		have := r.confirmedLocked(c.Server, want)
		changed := r.changed
		r.mu.Unlock()
		if have >= r.min {
			r.observe(time.Since(start), true)
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.observe(time.Since(start), false)
			return fmt.Errorf("%w: %d of the %d replicas asked for had it within %v", service.ErrNotReplicated, have, r.min, r.timeout)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", service.ErrNotReplicated, ctx.Err())
		}
	}
}

func (r *Replicas) observe(wait time.Duration, ok bool) {
	if r.obs != nil {
		r.obs.Confirmation(wait, ok)
	}
}

// confirmedLocked counts the replicas, other than the server that
// committed, that have want. Called with r.mu held.
func (r *Replicas) confirmedLocked(server int64, want gtids) int {
	n := 0
	for _, node := range r.nodes {
		if node.serverID != 0 && node.serverID != server && node.has.covers(want) {
			n++
		}
	}
	return n
}

// poke tells n's follower that someone waits.
func (n *replica) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// follow asks replica n, whenever someone waits for a commit it was not
// seen to have and no wait in flight asks for, to wait for the highest
// position wanted. Each replica has waitsPerReplica of them.
func (r *Replicas) follow(n *replica) {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			return
		case <-n.kick:
		}
		for {
			r.mu.Lock()
			server, want := r.wantedServer, gtids{}
			want.merge(r.wanted)
			need := r.waiting > 0 && len(want) > 0 && n.serverID != server && !n.has.covers(want) &&
				(n.asking == 0 || !n.asked.covers(want)) // a wait in flight for it already
			if need {
				n.asking++
				n.asked.merge(want)
			}
			r.mu.Unlock()
			if !need {
				break
			}
			again := r.waitOn(n, server, want)
			r.mu.Lock()
			if n.asking--; n.asking == 0 {
				n.asked = gtids{}
			}
			r.mu.Unlock()
			if !again {
				// Down, at the sequence from another history, or asked
				// to wait less than a round trip: ask again after a
				// pause, not in a loop, whatever mysql.replica_timeout.
				select {
				case <-r.stop:
					return
				case <-time.After(askAgainAfter):
				}
			}
		}
	}
}

// askAgainAfter is the pause before a replica that cannot confirm now is
// asked again.
const askAgainAfter = 250 * time.Millisecond

// waitOn asks n to wait for want, committed on server, and records what
// it has. It reports whether asking again at once makes sense: false
// when n did not answer, answered at once without having want, or waited
// less than askAgainAfter without having it.
func (r *Replicas) waitOn(n *replica, server int64, want gtids) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+2*time.Second)
	defer cancel()
	start := time.Now()
	var (
		waited            sql.NullInt64
		id                int64
		slavePos, binlogs string
	)
	err := func() error {
		rows, err := n.db.QueryContext(ctx, "SELECT IF(@@server_id = ?, -2, MASTER_GTID_WAIT(?, ?)); SELECT @@server_id, @@gtid_slave_pos, @@gtid_binlog_state",
			server, want.String(), r.timeout.Seconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		if !rows.Next() {
			return errors.Join(rows.Err(), errors.New("no answer to the wait"))
		}
		if err := rows.Scan(&waited); err != nil {
			return err
		}
		if !rows.NextResultSet() || !rows.Next() {
			return errors.Join(rows.Err(), errors.New("no state after the wait"))
		}
		if err := rows.Scan(&id, &slavePos, &binlogs); err != nil {
			return err
		}
		return rows.Close()
	}()
	var has gtids
	if err == nil {
		has, err = parseGTIDs(slavePos + "," + binlogs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	before := n.state
	switch {
	case err != nil:
		n.state, n.err = replicaDown, err.Error()
	case waited.Valid && waited.Int64 == -2: // what it has is its own
		n.serverID, n.err, n.state = id, "", replicaPrimary
	default:
		if id != n.serverID { // another server at its address: what the old had is not its
			n.has = gtids{}
		}
		n.serverID, n.err = id, ""
		n.has.merge(has)
		switch {
		case n.has.covers(want):
			n.state, n.lastWait = replicaInSync, time.Since(start)
		case waited.Valid && waited.Int64 == 0:
			n.state = replicaDiverged
		default:
			n.state, n.lastWait = replicaLagging, time.Since(start)
		}
	}
	n.keepsUp = n.state == replicaInSync
	r.logState(n, before, time.Since(start))
	r.broadcastLocked()
	quick := n.state == replicaLagging && time.Since(start) < askAgainAfter
	return n.state != replicaDown && n.state != replicaDiverged && !quick
}

// logState logs n's state when it moved from before: a replica back in
// sync at INFO, any other move at WARN with its error if it has one.
// Called with r.mu held.
func (r *Replicas) logState(n *replica, before string, waited time.Duration) {
	if n.state == before {
		return
	}
	args := []any{"replica", n.name, "was", before}
	if waited > 0 {
		args = append(args, "waited_ms", waited.Milliseconds())
	}
	if n.err != "" && n.state == replicaDown {
		args = append(args, "err", n.err)
	}
	level := slog.LevelWarn
	if n.state == replicaInSync || n.state == replicaPrimary && before == replicaUnknown {
		level = slog.LevelInfo
	}
	r.log.Log(context.Background(), level, "mysql replica "+strings.ReplaceAll(n.state, "_", " "), args...)
}

// broadcastLocked wakes every Confirm waiting for a change. Called with
// r.mu held.
func (r *Replicas) broadcastLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}
