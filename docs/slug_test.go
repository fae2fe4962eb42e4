package docs

import "testing"

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Two commands", "two-commands"},
		{"8. ZooKeeper: ephemeral sequential nodes", "8-zookeeper-ephemeral-sequential-nodes"},
		{"What `WAIT` buys (`lock.min_replicas`, `lock.replica_timeout`)", "what-wait-buys-lockmin_replicas-lockreplica_timeout"},
		{"Every answer checked for linearizability (verify/linearize.go)", "every-answer-checked-for-linearizability-verifylinearizego"},
		{"The lock as a leader lease: the order-expiry sweeper", "the-lock-as-a-leader-lease-the-order-expiry-sweeper"},
		{"See [the API](#api)", "see-the-api"},
	} {
		if got := Slug(tc.in); got != tc.want {
			t.Errorf("Slug(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestPageAnchorsNumberRepeats(t *testing.T) {
	a := pageAnchors("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n<a id=\"x\"></a>\n")
	for _, want := range []string{"a", "notes", "notes-1", "x"} {
		if !a[want] {
			t.Errorf("pageAnchors: missing %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("pageAnchors: a line in a code block became a heading")
	}
}
