package repository

import (
	"fmt"
	"strconv"
	"strings"
)

// stream is one server's commits in one replication domain: a MariaDB
// GTID is domain-server-seq, and one server's sequence numbers in one
// domain are one history. After a failover the domain's sequence goes
// on under the promoted server's id, so a lost commit's seq is reused:
// only the pair tells a commit from its successor's.
type stream struct{ domain, server uint32 }

// gtids is a GTID position: the last sequence number of each stream.
type gtids map[stream]uint64

// parseGTIDs reads a GTID list as MariaDB writes it ("0-1-100,1-2-7").
func parseGTIDs(s string) (gtids, error) {
	out := gtids{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("repository: %q is not a GTID", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		srv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("repository: %q is not a GTID", part)
		}
		out.add(stream{uint32(d), uint32(srv)}, seq)
	}
	return out, nil
}

func (g gtids) add(s stream, seq uint64) {
	if seq > g[s] {
		g[s] = seq
	}
}

// merge adds every stream of o.
func (g gtids) merge(o gtids) {
	for s, seq := range o {
		g.add(s, seq)
	}
}

// covers reports whether g has every commit of want.
func (g gtids) covers(want gtids) bool {
	for s, seq := range want {
		if g[s] < seq {
			return false
		}
	}
	return true
}

// String writes g as MASTER_GTID_WAIT takes it: the latest GTID of each
// domain.
func (g gtids) String() string {
	last := map[uint32]struct {
		server uint32
		seq    uint64
	}{}
	for s, seq := range g {
		if l, ok := last[s.domain]; !ok || seq > l.seq {
			last[s.domain] = struct {
				server uint32
				seq    uint64
			}{s.server, seq}
		}
	}
	parts := make([]string, 0, len(last))
	for d, l := range last {
		parts = append(parts, fmt.Sprintf("%d-%d-%d", d, l.server, l.seq))
	}
	return strings.Join(parts, ",")
}
