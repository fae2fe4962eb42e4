package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/repository"
)

// replicationCollector publishes the MariaDB replication's state as the
// confirmation of commits last saw it (repository.Replicas.Status), at
// scrape time, without I/O.
type replicationCollector struct {
	repl     *repository.Replicas
	state    *prometheus.Desc
	lag      *prometheus.Desc
	wait     *prometheus.Desc
	semiSync *prometheus.Desc
	readOnly *prometheus.Desc
	keeping  *prometheus.Desc
	min      *prometheus.Desc
}

func newReplicationCollector(repl *repository.Replicas) *replicationCollector {
	return &replicationCollector{
		repl: repl,
		state: prometheus.NewDesc("seckill_mysql_replica_state",
			"1 for each replica's current state (in_sync, lagging, down, is_primary, elsewhere, unknown).", []string{"replica", "state"}, nil),
		lag: prometheus.NewDesc("seckill_mysql_replica_lag_transactions",
			"Transactions of the primary a replica had not applied when last probed; -1 unknown.", []string{"replica"}, nil),
		wait: prometheus.NewDesc("seckill_mysql_replica_last_wait_seconds",
			"How long a replica took to confirm the last position it was asked for.", []string{"replica"}, nil),
		semiSync: prometheus.NewDesc("seckill_mysql_semi_sync",
			"1 for the primary's semi-sync replication state: on, off (enabled but fallen back to asynchronous), not_enabled, unknown.", []string{"state"}, nil),
		readOnly: prometheus.NewDesc("seckill_mysql_primary_read_only",
			"1 when the primary's address reaches a read-only server (a demoted primary): its connections are retired.", nil, nil),
		keeping: prometheus.NewDesc("seckill_mysql_replicas_keeping_up",
			"Replicas, other than the primary, that had what the primary had at the watch's last probe (or what they were last asked): those that can confirm a commit now.", nil, nil),
		min: prometheus.NewDesc("seckill_mysql_min_replicas",
			"mysql.min_replicas: replicas that must have a write before it is acknowledged.", nil, nil),
	}
}

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.lag
	ch <- c.wait
	ch <- c.semiSync
	ch <- c.readOnly
	ch <- c.keeping
	ch <- c.min
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.repl.Status()
	for _, r := range st.Replicas {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, r.Name, r.State)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(r.LagTransactions), r.Name)
		ch <- prometheus.MustNewConstMetric(c.wait, prometheus.GaugeValue, r.LastWaitMS/1000, r.Name)
	}
	ch <- prometheus.MustNewConstMetric(c.semiSync, prometheus.GaugeValue, 1, st.SemiSync)
	ro := 0.0
	if st.PrimaryReadOnly {
		ro = 1
	}
	ch <- prometheus.MustNewConstMetric(c.readOnly, prometheus.GaugeValue, ro)
	ch <- prometheus.MustNewConstMetric(c.keeping, prometheus.GaugeValue, float64(st.Confirming))
	ch <- prometheus.MustNewConstMetric(c.min, prometheus.GaugeValue, float64(st.MinReplicas))
}
