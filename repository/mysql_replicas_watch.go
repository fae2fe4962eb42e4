package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// watchEvery is how often the primary (its semi-sync status, read-only
// flag, position and replicas) and each replica (its server and
// position) are read.
const watchEvery = 2 * time.Second

// watch reads, every watchEvery, the primary and its replicas, logging
// each change once. A read-only primary is not the primary: its pool's
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

// primaryState is what one probe read of the primary.
type primaryState struct {
	id       int64
	readOnly bool
	at       gtids
	semiSync string
}

// replicaState is what one probe read of a replica.
type replicaState struct {
	id    int64
	slave gtids // what it applied from its primary
	has   gtids // that and its own binary log
	err   error
}

func (r *Replicas) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var (
		p   primaryState
		pos string
	)
	if r.primary == nil || r.primary.QueryRowContext(ctx, "SELECT @@server_id, @@read_only, @@gtid_binlog_pos").Scan(&p.id, &p.readOnly, &pos) != nil {
		return
	}
	p.semiSync = semiSyncOf(ctx, r.primary)
	p.at, _ = parseGTIDs(pos)
	r.discover(ctx)
	nodes := r.list()
	seen := make([]replicaState, len(nodes))
	for i, n := range nodes {
		seen[i] = readReplica(ctx, n.db)
	}
	r.mu.Lock()
	wasReadOnly, wasSemi := r.readOnly, r.semiSync
	before := r.primaryAt
	if p.id != r.primaryID {
		before = p.at // a new primary: judge by where it is now
	}
	r.primaryID, r.readOnly, r.semiSync, r.primaryAt = p.id, p.readOnly, p.semiSync, p.at
	for i, n := range nodes {
		r.seenLocked(n, seen[i], p, before)
	}
	r.broadcastLocked()
	r.mu.Unlock()
	if p.readOnly && !wasReadOnly {
		r.log.Error("the primary's address reaches a read-only server: it is not the primary; its connections are retired", "server_id", p.id)
	}
	if p.readOnly && r.retire != nil {
		r.retire.Retire()
	}
	if p.semiSync != wasSemi && (p.semiSync == "off" || wasSemi == "off") {
		r.log.Warn("mysql semi-sync replication "+p.semiSync+" on the primary", "was", wasSemi, "server_id", p.id)
	}
}

// readReplica reads a replica's server and position.
func readReplica(ctx context.Context, db *sql.DB) replicaState {
	var (
		st              replicaState
		slave, binlogs  string
		errSlave, errAt error
	)
	st.err = db.QueryRowContext(ctx, "SELECT @@server_id, @@gtid_slave_pos, @@gtid_binlog_state").Scan(&st.id, &slave, &binlogs)
	if st.err != nil {
		return st
	}
	st.slave, errSlave = parseGTIDs(slave)
	st.has, errAt = parseGTIDs(slave + "," + binlogs)
	st.err = errors.Join(errSlave, errAt)
	return st
}

// seenLocked records what a probe read of n: its server (a new one at
// its address forgets what the old had, and is asked again at once),
// whether it is the primary, and whether it keeps up: it had what the
// primary had at the probe before. Called with r.mu held.
func (r *Replicas) seenLocked(n *replica, st replicaState, p primaryState, before gtids) {
	was := n.state
	defer func() { r.logState(n, was, 0) }()
	n.keepsUp, n.lagTxns = false, -1
	if st.err != nil {
		n.state, n.err = replicaDown, st.err.Error()
		return
	}
	if st.id != n.serverID {
		n.serverID, n.has = st.id, gtids{}
		n.poke()
	}
	n.err = ""
	n.has.merge(st.has)
	n.lagTxns = behind(p.at, st.slave)
	switch {
	case st.id == p.id:
		n.state = replicaPrimary
	case n.has.covers(before):
		n.keepsUp = true
		if n.state != replicaDiverged {
			n.state = replicaInSync
		}
	case n.state == replicaInSync || n.state == replicaUnknown || n.state == replicaPrimary || n.state == replicaDown:
		n.state = replicaLagging
	}
}

// discover asks the primary for its replicas (SHOW SLAVE HOSTS: those
// started with report_host) and starts asking each one at an address not
// asked yet, whose server is not asked under another address.
func (r *Replicas) discover(ctx context.Context) {
	if r.open == nil {
		return
	}
	hosts, err := slaveHosts(ctx, r.primary)
	if err != nil {
		r.once("discover", func() {
			r.log.Warn("the primary's replicas cannot be listed (SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN): only mysql.replicas are asked", "err", err)
		})
		return
	}
	for _, h := range hosts {
		if r.asked(h.addr, h.id) {
			continue
		}
		db, err := r.open(h.addr)
		if err != nil {
			r.log.Warn("a replica found on the primary cannot be opened", "addr", h.addr, "err", err)
			continue
		}
		if !r.add(db, h.addr, true) {
			db.Close()
			r.once("full", func() {
				r.log.Warn("a replica found on the primary is not asked: already asking the most", "addr", h.addr, "max", maxReplicaNodes)
			})
			continue
		}
		r.log.Info("mysql replica found on the primary", "addr", h.addr, "server_id", h.id)
	}
}

// asked reports whether a replica at addr, or of server id, is asked.
func (r *Replicas) asked(addr string, id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		if n.addr == addr || n.serverID == id {
			return true
		}
	}
	return false
}

// once runs f the first time key is seen.
func (r *Replicas) once(key string, f func()) {
	r.mu.Lock()
	done := r.logged[key]
	if r.logged == nil {
		r.logged = map[string]bool{}
	}
	r.logged[key] = true
	r.mu.Unlock()
	if !done {
		f()
	}
}

type slaveHost struct {
	id   int64
	addr string
}

// slaveHosts reads SHOW SLAVE HOSTS: its first three columns are the
// server id, the reported host and port on MariaDB and MySQL alike.
func slaveHosts(ctx context.Context, db *sql.DB) ([]slaveHost, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE HOSTS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if len(cols) < 3 {
		return nil, fmt.Errorf("SHOW SLAVE HOSTS has %d columns", len(cols))
	}
	var out []slaveHost
	for rows.Next() && len(out) < maxReplicaNodes {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var id int64
		if _, err := fmt.Sscan(vals[0].String, &id); err != nil || strings.TrimSpace(vals[1].String) == "" || vals[2].String == "0" {
			continue // no report_host: not reachable by what it reports
		}
		out = append(out, slaveHost{id: id, addr: net.JoinHostPort(strings.TrimSpace(vals[1].String), vals[2].String)})
	}
	return out, rows.Err()
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

// ErrCannotConfirm is readiness's answer while fewer than
// mysql.min_replicas replicas keep up with the primary: its commits
// would be answered outcome_unknown.
var ErrCannotConfirm = errors.New("fewer replicas keep up with the primary than mysql.min_replicas")

// Ready returns nil while min replicas, other than the primary, kept up
// with it at the watch's last probe, else an error wrapping
// ErrCannotConfirm; nil when none are asked for. No I/O.
func (r *Replicas) Ready() error {
	if r.min <= 0 {
		return nil
	}
	st := r.Status()
	if st.Confirming >= r.min {
		return nil
	}
	return fmt.Errorf("%w: %d of %d", ErrCannotConfirm, st.Confirming, r.min)
}

// ReplicationStatus is what readiness shows of the replication: never a
// DSN or a password.
type ReplicationStatus struct {
	MinReplicas     int             `json:"min_replicas"`
	PrimaryServerID int64           `json:"primary_server_id"`
	PrimaryReadOnly bool            `json:"primary_read_only"`
	SemiSync        string          `json:"semi_sync"` // on, off, not_enabled, unknown
	Replicas        []ReplicaStatus `json:"replicas"`
	Confirming      int             `json:"confirming"` // replicas that kept up with the primary at the last probe
}

// ReplicaStatus is one replica's state.
type ReplicaStatus struct {
	Name            string  `json:"name"`
	ServerID        int64   `json:"server_id"`
	State           string  `json:"state"`
	Found           bool    `json:"found_on_primary,omitempty"`
	LastWaitMS      float64 `json:"last_wait_ms"`
	LagTransactions int64   `json:"lag_transactions"` // -1: unknown
}

// Status returns the replication's state as last seen, without I/O.
func (r *Replicas) Status() ReplicationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ReplicationStatus{MinReplicas: r.min, PrimaryServerID: r.primaryID, PrimaryReadOnly: r.readOnly, SemiSync: r.semiSync}
	for _, n := range r.nodes {
		st.Replicas = append(st.Replicas, ReplicaStatus{Name: n.name, ServerID: n.serverID, State: n.state, Found: n.found,
			LastWaitMS: float64(n.lastWait.Microseconds()) / 1000, LagTransactions: n.lagTxns})
		if n.keepsUp && n.serverID != r.primaryID {
			st.Confirming++
		}
	}
	return st
}
