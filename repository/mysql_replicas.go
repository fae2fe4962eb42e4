package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/service"
)

var _ service.Replicas = (*Replicas)(nil)

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
	nodes   []*replica
	primary *sql.DB // the watch's probe of the primary
	retire  Retirer // ends the primary pool's connections when it reaches a read-only server
	obs     ReplicaObserver
	log     *slog.Logger

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced whenever a replica's state moves
	wanted       gtids         // what callers wait for, on wantedServer
	wantedServer int64
	waiting      int    // Confirm calls under way: no replica is asked without one
	semiSync     string // the primary's semi-sync replication, as the watch saw it
	readOnly     bool   // the primary's address reached a read-only server
	primaryID    int64

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

// replica is one configured replica and what it was last seen to have.
// Its fields below db are guarded by Replicas.mu.
type replica struct {
	name string // "replica 2 (127.0.0.1:3307)": never the DSN
	db   *sql.DB
	kick chan struct{} // capacity 1: "someone waits for more"

	has      gtids // every stream's last commit it was seen to have
	serverID int64
	state    string // see replicaStates
	err      string // the last error, when down
	lastWait time.Duration
	lagTxns  int64 // transactions behind the primary, as the watch saw it
}

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

// NewReplicas starts confirming on the given replicas: min of them must
// have a commit within timeout. primary is the service's pool of the
// primary, probed every watchEvery for its semi-sync status and read-only
// flag; retire ends that pool's connections when it turned read-only.
// Close stops it.
func NewReplicas(nodes []ReplicaConfig, min int, timeout time.Duration, primary *sql.DB, retire Retirer, obs ReplicaObserver, log *slog.Logger) *Replicas {
	r := &Replicas{min: min, timeout: timeout, primary: primary, retire: retire, obs: obs, log: log,
		changed: make(chan struct{}), wanted: gtids{}, semiSync: "unknown", stop: make(chan struct{})}
	for i, n := range nodes {
		r.nodes = append(r.nodes, &replica{name: fmt.Sprintf("replica %d (%s)", i+1, n.Addr), db: n.DB,
			kick: make(chan struct{}, 1), has: gtids{}, state: replicaUnknown})
	}
	for _, n := range r.nodes {
		r.wg.Add(1)
		go r.follow(n)
	}
	r.wg.Add(1)
	go r.watch()
	return r
}

// Close stops the goroutines and closes the replicas' pools.
func (r *Replicas) Close() error {
	close(r.stop)
	r.wg.Wait()
	var errs []error
	for _, n := range r.nodes {
		errs = append(errs, n.db.Close())
	}
	return errors.Join(errs...)
}

// Confirm implements service.Replicas.
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
	for _, n := range r.nodes {
		select {
		case n.kick <- struct{}{}:
		default:
		}
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

// follow asks replica n, whenever someone waits for a commit it was not
// seen to have, to wait for the highest position wanted.
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
			need := r.waiting > 0 && len(want) > 0 && n.serverID != server && !n.has.covers(want)
			r.mu.Unlock()
			if !need {
				break
			}
			if !r.waitOn(n, server, want) {
				// Down, or at the sequence from another history: ask
				// again after a pause, not in a loop.
				select {
				case <-r.stop:
					return
				case <-time.After(min(r.timeout, 250*time.Millisecond)):
				}
			}
		}
	}
}

// waitOn asks n to wait for want, committed on server, and records what
// it has. It reports whether asking again at once makes sense: false
// when n did not answer, or answered at once without having want.
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
	if n.state != before && r.log != nil {
		r.log.Warn("mysql replica "+strings.ReplaceAll(n.state, "_", " "), "replica", n.name, "was", before,
			"waited_ms", time.Since(start).Milliseconds(), "err", n.err)
	}
	close(r.changed)
	r.changed = make(chan struct{})
	return n.state != replicaDown && n.state != replicaDiverged
}

// watchEvery is how often the primary's semi-sync status and read-only
// flag and the replicas' distance are read.
const watchEvery = 2 * time.Second

// watch reads, every watchEvery, the primary's semi-sync status and
// read-only flag and how far behind each replica is, logging each
// change once. A read-only primary is not the primary: its pool's
// connections are retired.
func (r *Replicas) watch() {
	defer r.wg.Done()
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		r.probe()
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
	}
}

func (r *Replicas) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var (
		id       int64
		readOnly bool
		pos      string
	)
	if r.primary == nil || r.primary.QueryRowContext(ctx, "SELECT @@server_id, @@read_only, @@gtid_binlog_pos").Scan(&id, &readOnly, &pos) != nil {
		return
	}
	semi := semiSyncOf(ctx, r.primary)
	primaryAt, _ := parseGTIDs(pos)
	lags := make([]int64, len(r.nodes))
	for i, n := range r.nodes {
		lags[i] = -1
		var slavePos string
		if n.db.QueryRowContext(ctx, "SELECT @@gtid_slave_pos").Scan(&slavePos) == nil {
			if at, err := parseGTIDs(slavePos); err == nil {
				lags[i] = behind(primaryAt, at)
			}
		}
	}
	r.mu.Lock()
	wasReadOnly, wasSemi := r.readOnly, r.semiSync
	r.primaryID, r.readOnly, r.semiSync = id, readOnly, semi
	for i, n := range r.nodes {
		n.lagTxns = lags[i]
	}
	r.mu.Unlock()
	if readOnly && !wasReadOnly {
		r.log.Error("the primary's address reaches a read-only server: it is not the primary; its connections are retired", "server_id", id)
	}
	if readOnly && r.retire != nil {
		r.retire.Retire()
	}
	if semi != wasSemi && (semi == "off" || wasSemi == "off") {
		r.log.Warn("mysql semi-sync replication "+semi+" on the primary", "was", wasSemi, "server_id", id)
	}
}

// semiSyncOf reads the primary's semi-sync replication: "on", "off"
// (enabled, but fallen back to asynchronous), "not_enabled", or
// "unknown" when the server cannot say.
func semiSyncOf(ctx context.Context, db *sql.DB) string {
	var name, enabled, status string
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_master_enabled'").Scan(&name, &enabled); err != nil {
		return "unknown"
	}
	if !strings.EqualFold(enabled, "ON") {
		return "not_enabled"
	}
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'").Scan(&name, &status); err != nil {
		return "unknown"
	}
	if strings.EqualFold(status, "ON") {
		return "on"
	}
	return "off"
}

// behind counts the transactions of primary's domains that at lacks.
func behind(primary, at gtids) int64 {
	last := func(g gtids) map[uint32]uint64 {
		out := map[uint32]uint64{}
		for s, seq := range g {
			out[s.domain] = max(out[s.domain], seq)
		}
		return out
	}
	p, a := last(primary), last(at)
	var n int64
	for d, seq := range p {
		if seq > a[d] {
			n += int64(seq - a[d])
		}
	}
	return n
}

// ReplicationStatus is what readiness shows of the replication: never a
// DSN or a password.
type ReplicationStatus struct {
	MinReplicas     int             `json:"min_replicas"`
	PrimaryServerID int64           `json:"primary_server_id"`
	PrimaryReadOnly bool            `json:"primary_read_only"`
	SemiSync        string          `json:"semi_sync"` // on, off, not_enabled, unknown
	Replicas        []ReplicaStatus `json:"replicas"`
	Confirming      int             `json:"confirming"` // replicas that can confirm a commit of the primary now
}

// ReplicaStatus is one replica's state.
type ReplicaStatus struct {
	Name            string  `json:"name"`
	ServerID        int64   `json:"server_id"`
	State           string  `json:"state"`
	LastWaitMS      float64 `json:"last_wait_ms"`
	LagTransactions int64   `json:"lag_transactions"` // -1: unknown
}

// Status returns the replication's state as last seen, without I/O.
func (r *Replicas) Status() ReplicationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ReplicationStatus{MinReplicas: r.min, PrimaryServerID: r.primaryID, PrimaryReadOnly: r.readOnly, SemiSync: r.semiSync}
	for _, n := range r.nodes {
		st.Replicas = append(st.Replicas, ReplicaStatus{Name: n.name, ServerID: n.serverID, State: n.state,
			LastWaitMS: float64(n.lastWait.Microseconds()) / 1000, LagTransactions: n.lagTxns})
		if n.state == replicaInSync && n.serverID != r.primaryID {
			st.Confirming++
		}
	}
	return st
}
