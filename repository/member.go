package repository

import "github.com/seckill/seckill/service"

// member is one batch (one SKU) of a transaction: what was read (or
// known) for it, what was decided, and its answer.
type member struct {
	b     service.Batch
	sku   skuRow                     // the SKU's row, read or known
	held  map[string]service.Holding // each buyer's holding of the SKU before this batch
	alloc service.Allocation
	res   service.BatchResult
	err   error // this member's own outcome, e.g. ErrSKUNotFound
}

// resolve gives each member without an error of its own the outcomes of
// its allocation.
func resolve(ms []*member) {
	for _, m := range ms {
		if m.err == nil {
			m.alloc.Resolve()
			m.res.Outcomes = m.alloc.Outcomes
		}
	}
}

// decide allocates m's batch on the SKU row and holdings read (or known)
// and the orders found under its idempotency keys.
func (m *member) decide(existing map[service.BuyerKey]service.Order) {
	m.alloc = service.Allocate(m.sku.domain(), m.b, existing, m.held)
	m.alloc.Hold(m.b.PaymentTimeout)
	m.res = service.BatchResult{SKU: m.sku.after(m.b, &m.alloc)}
}

func staleFence(b service.Batch, sku skuRow) error {
	return &service.StaleFenceError{SKUID: sku.ID, Stored: sku.Fence, Fence: b.Fence}
}

// newWaiters is the buyers of m given a waiting order: their holding's
// waiting flag is set by the batch's upsert.
func (m *member) newWaiters() map[string]bool {
	if m.alloc.Waiters == 0 {
		return nil
	}
	w := make(map[string]bool, m.alloc.Waiters)
	for _, i := range m.alloc.New {
		if o := m.alloc.Outcomes[i].Placed.Order; o.Status == service.OrderWaiting {
			w[o.UserID] = true
		}
	}
	return w
}

func distinctUsers(reqs []service.OrderRequest) []string {
	seen := make(map[string]bool, len(reqs))
	users := make([]string, 0, len(reqs))
	for _, r := range reqs {
		if !seen[r.UserID] {
			seen[r.UserID] = true
			users = append(users, r.UserID)
		}
	}
	return users
}

func idempotencyKeys(reqs []service.OrderRequest) []service.BuyerKey {
	var keys []service.BuyerKey
	for _, r := range reqs {
		if r.IdempotencyKey != "" {
			keys = append(keys, service.KeyOf(r))
		}
	}
	return keys
}
