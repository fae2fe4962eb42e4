package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/loadtest/verify"
)

// audit runs the operator's audit over the run's database, after the
// sale, and describes each SKU that fails it; nothing when it agrees, or
// when the runner has no database of its own (target mode).
func (r *run) audit(ctx context.Context) []string {
	if r.db == nil {
		return nil
	}
	var out []string
	audited := 0
	var opts []audit.Option
	if r.nats != nil { // each order's chain of events too (events_tell_changes)
		opts = append(opts, audit.WithEvents(config.Default().Events.Retention))
	}
	err := audit.All(ctx, r.db, 0, func(rep audit.Report) error {
		audited++
		for _, f := range rep.Failures {
			out = append(out, fmt.Sprintf("sku %d %s: %s", rep.SKU, f.Invariant, f.Detail))
		}
		return nil
	}, opts...)
	if err != nil {
		out = append(out, err.Error())
	}
	ob, err := audit.Outbox(ctx, r.db, opts...) // events_have_orders: nothing without events
	if err != nil {
		out = append(out, err.Error())
	}
	for _, f := range ob.Failures {
		out = append(out, fmt.Sprintf("the order events' outbox %s: %s", f.Invariant, f.Detail))
	}
	if len(out) == 0 {
		r.event("audit: %d SKUs, every invariant holds", audited)
	} else {
		r.event("audit: %d failures of %d SKUs: %s", len(out), audited, strings.Join(out[:min(len(out), 5)], "; "))
	}
	return out
}

// violationsOf is one violation named name per message.
func violationsOf(name string, msgs ...string) []verify.Violation {
	out := make([]verify.Violation, len(msgs))
	for i, m := range msgs {
		out[i] = verify.Violation{Name: name, Message: m}
	}
	return out
}
