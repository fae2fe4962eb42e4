package main

import "fmt"

// benchCase is one k6 run against one freshly started instance.
type benchCase struct {
	name     string
	strategy string // "" for the ceiling, "locked" for the service, else a design of bench/compare
	vus      int
	skus     int
	soldOut  bool // the SKU is sold out before the run: every answer is a reject
	ceiling  bool
	// access, when set ("on" or "off"), runs at the default log level
	// (info) with log.access so: what the access log costs.
	access string
	// rate > 0 is an open load: this many arrivals per second, whatever
	// the latency, from up to vus buyers at once.
	rate int
	// noJWT serves with auth.shopper none: what verifying a shopper costs.
	noJWT bool
	// topology, when set, runs on a private Sentinel group or Cluster
	// (harness.RedisSentinel, harness.RedisCluster) instead of the
	// standalone server, with lock.min_replicas minReplicas.
	topology    string
	minReplicas int
	zk          bool // on the ZooKeeper lock backend
	// replicated runs on a throwaway MariaDB primary with a local replica
	// (replica.go), with mysql.min_replicas mysqlMinReplicas.
	replicated       bool
	mysqlMinReplicas int
	// held > 0 runs the Go client of held.go instead of k6: this many
	// connections held, each a closed-loop buyer.
	held int
}

// load names the case's load: closed-loop buyers or an open arrival rate.
func (c benchCase) load() string {
	if c.held > 0 {
		return fmt.Sprintf("%d conns", c.held)
	}
	if c.rate > 0 {
		return fmt.Sprintf("%d/s", c.rate)
	}
	return fmt.Sprintf("%d VUs", c.vus)
}

// design reports whether the case runs a comparison design's server
// rather than the service.
func (c benchCase) design() bool { return c.strategy != "" && c.strategy != "locked" }

// label is how -rows selects a case: its name and its load.
func (c benchCase) label() string { return c.name + " @" + c.load() }

// Cases of the access-log pair; on is the default configuration.
const (
	caseAccessOff = "locked, info, access log off"
	caseAccessOn  = "locked, info, access log on"
	caseNoJWT     = "locked, auth.shopper none"
	caseCeiling   = "ceiling (constant answer)"
	// caseProduction is locked as production runs it: shopper tokens
	// verified, log level info, the access log on.
	caseProduction = "locked, production (jwt, info, access log)"
)

// plan lists the cases of a run, in order. The ceilings come first and
// again after the saturated runs: the ratios use the mean of its runs,
// so a machine that drifts during the run moves both sides.
func plan(o options) []benchCase {
	cases := []benchCase{{name: caseCeiling, vus: o.vus, ceiling: true}}
	for _, s := range o.strategies {
		cases = append(cases, benchCase{name: s, strategy: s, vus: o.vus, skus: 1})
		if s == "locked" && o.zookeeper {
			cases = append(cases, benchCase{name: caseZooKeeper, strategy: s, vus: o.vus, skus: 1, zk: true})
		}
	}
	cases = append(cases,
		benchCase{name: "locked, sold out", strategy: "locked", vus: o.vus, skus: 1, soldOut: true},
		benchCase{name: fmt.Sprintf("locked, %d SKUs", o.skus), strategy: "locked", vus: o.vus, skus: o.skus},
		benchCase{name: caseNoJWT, strategy: "locked", vus: o.vus, skus: 1, noJWT: true},
	)
	if o.accessLog { // side by side, so the machine's drift moves both
		cases = append(cases,
			benchCase{name: caseAccessOff, strategy: "locked", vus: o.vus, skus: 1, access: "off"},
			benchCase{name: caseAccessOn, strategy: "locked", vus: o.vus, skus: 1, access: "on"},
		)
	}
	cases = append(cases, benchCase{name: caseCeiling, vus: o.vus, ceiling: true})
	if o.rate > 0 {
		open := func(c benchCase) benchCase { c.rate, c.vus = o.rate, o.openVUs; return c }
		cases = append(cases,
			open(benchCase{name: caseCeiling, ceiling: true}),
			open(benchCase{name: "locked", strategy: "locked", skus: 1}),
			open(benchCase{name: fmt.Sprintf("locked, %d SKUs", o.skus), strategy: "locked", skus: o.skus}),
			open(benchCase{name: caseProduction, strategy: "locked", skus: 1, access: "on"}),
			open(benchCase{name: caseCeiling, ceiling: true}),
		)
	}
	if o.held > 0 {
		held := func(c benchCase) benchCase { c.held = o.held; return c }
		cases = append(cases,
			held(benchCase{name: caseCeiling, ceiling: true}),
			held(benchCase{name: "locked, sold out", strategy: "locked", skus: 1, soldOut: true}),
			held(benchCase{name: "locked", strategy: "locked", skus: 1}),
			held(benchCase{name: caseCeiling, ceiling: true}),
		)
	}
	cases = append(cases, topologyCases(o.vus)...)
	if o.replica {
		cases = append(cases, replicatedCases(o.vus)...)
	}
	cases = append(cases,
		benchCase{name: caseCeiling, vus: o.lowVUs, ceiling: true},
		benchCase{name: "locked", strategy: "locked", vus: o.lowVUs, skus: 1},
		benchCase{name: "per-request", strategy: "per-request", vus: o.lowVUs, skus: 1},
		benchCase{name: "conditional", strategy: "conditional", vus: o.lowVUs, skus: 1},
	)
	if o.rows == nil {
		return cases
	}
	loads := map[string]bool{} // a ceiling runs when a picked case has its load
	for _, c := range cases {
		if !c.ceiling && o.rows.MatchString(c.label()) {
			loads[c.load()] = true
		}
	}
	var picked []benchCase
	for _, c := range cases {
		if o.rows.MatchString(c.label()) || (c.ceiling && loads[c.load()]) {
			picked = append(picked, c)
		}
	}
	return picked
}
