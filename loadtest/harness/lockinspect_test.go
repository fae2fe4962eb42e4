package harness

import (
	"strings"
	"testing"
)

// TestLockInspectionChecks: the sampler passes holders whose fences grow
// and flags a fence that decreases, a new holder reusing a fence, a holder
// with no owner and a token longer than a prefix.
func TestLockInspectionChecks(t *testing.T) {
	t.Parallel()
	held := func(owner, token, fence string) lockAnswer {
		return lockAnswer{Held: true, Owner: owner, Token: token, Fence: fence, LeaseLeftMS: 900, Renewed: true}
	}
	cases := []struct {
		name    string
		answers []lockAnswer
		want    string // in the one problem; "" for none
	}{
		{"growing", []lockAnswer{held("a:1", "abc123", "100"), {Fence: "100"}, held("a:1", "abc123", "100"), held("b:2", "def456", "105"), held("a:1", "0a0b0c", "200")}, ""},
		{"fence decreases", []lockAnswer{held("a:1", "abc123", "100"), held("b:2", "def456", "99")}, "decreased"},
		{"same holder, fence decreases", []lockAnswer{held("a:1", "abc123", "100"), held("a:1", "abc123", "90")}, "decreased"},
		{"new holder, same fence", []lockAnswer{held("a:1", "abc123", "100"), held("b:2", "def456", "100")}, "with the fence 100"},
		{"whole token", []lockAnswer{held("a:1", "0123456789abcdef0123456789abcdef", "100")}, "token of 32 characters"},
		{"no token", []lockAnswer{held("a:1", "", "100")}, "token of 0 characters"},
		{"no owner", []lockAnswer{held("", "abc123", "100")}, "no owner"},
		{"fence not a number", []lockAnswer{held("a:1", "abc123", "")}, "not a number"},
	}
	for _, c := range cases {
		li := newLockInspection()
		for _, a := range c.answers {
			li.add("sku 7", 7, a)
		}
		vs := li.violations()
		if c.want == "" {
			if len(vs) != 0 || !li.Increasing {
				t.Errorf("%s: violations %v, increasing %t; want none", c.name, vs, li.Increasing)
			}
			if li.Samples != 5 || li.Held != 4 || len(li.owners) != 2 || len(li.Changes) != 3 || li.Grew != 2 {
				t.Errorf("%s: %d samples, %d held, %d owners, %d changes, %d grew; want 5, 4, 2, 3, 2", c.name, li.Samples, li.Held, len(li.owners), len(li.Changes), li.Grew)
			}
			continue
		}
		if len(vs) != 1 || vs[0].Name != LockInspectionFailed || !strings.Contains(vs[0].Message, c.want) {
			t.Errorf("%s: violations %v; want one %s containing %q", c.name, vs, LockInspectionFailed, c.want)
		}
	}
}

// TestLockInspectionViews: answers of separate views (ZooKeeper's
// instances) are not compared with each other.
func TestLockInspectionViews(t *testing.T) {
	t.Parallel()
	li := newLockInspection()
	li.add("http://a sku 7", 7, lockAnswer{Held: true, Owner: "b:2", Token: "def456", Fence: "105"})
	li.add("http://b sku 7", 7, lockAnswer{Held: true, Owner: "a:1", Token: "abc123", Fence: "100"})
	if vs := li.violations(); len(vs) != 0 {
		t.Fatalf("violations %v; want none", vs)
	}
}
