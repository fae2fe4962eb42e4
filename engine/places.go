package engine

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/service"
)

// A buyer told to come back (429 busy, 503) who sends the same request
// with the same Idempotency-Key within Retry-After plus order.place_grace
// keeps its first arrival, on any instance (docs/design.md, invariant
// 19): each instance remembers the places of the buyers it sent back and
// shares them through the PlaceBoard, and a keyed request finds its place
// in the local table, without a round trip. What is remembered is bounded
// by order.places_max per process, the soonest to lapse evicted first,
// whoever posted it; the board keeps nothing in Redis. A place is the
// request's: the same key with another quantity is a new arrival
// (docs/api.md, "Idempotency keys").
//
// Until a buyer sent back busy (429: a full queue) comes back, or
// Retry-After plus returnSlack has passed, it is still in line: no
// instance sells a buyer of its SKU younger than it by more than
// order.fair_window; the younger wait in their queues (fair.go, turn). So
// a full queue delays the line; it does not reorder it. A buyer sent back
// unavailable (503) keeps its arrival for when it comes back but holds
// nobody up: a 503 says a dependency failed or the buyer waited past its
// deadline, and holding the others for it would turn one slow spell into
// a stall of every instance.

// comeBackAfter is the Retry-After of a 429 or 503 (handler/errors.go);
// returnSlack is how long after it a buyer sent back still holds up the
// younger ones, if it has not come back.
const (
	comeBackAfter = time.Second
	returnSlack   = time.Second
)

// Place is the first arrival (unix µs) of a buyer's request told to come
// back, remembered until Expires (unix µs).
type Place struct {
	SKUID            int64
	UserID, Key      string
	Quantity         int64 // the request's; 0 (posted by an earlier version): any
	Arrived, Expires int64
	Busy             bool // told 429 busy: it holds up the younger until it comes back
	Back             bool // the buyer came back: it no longer holds up the younger
}

// PlaceBoard shares places with every instance (Redis pub/sub); without
// one, places are this instance's own.
type PlaceBoard interface {
	// Post tells every instance listening about ps; best effort.
	Post(ctx context.Context, ps []Place) error
	// Listen calls learn with every batch of places posted by any
	// instance until stop is called.
	Listen(learn func([]Place)) (stop func())
}

// placeKey names a request as its retry names it again.
type placeKey struct {
	sku       int64
	user, key string
}

// placeAt is what a place says.
type placeAt struct {
	arrived, expires int64
	holds            int64 // until when it holds up younger buyers (unix µs), unless back or lapsed; 0: never
	quantity         int32 // the request's (quantityOf); 0: any
	back             bool
}

// holding reports whether the place holds up younger buyers at now: a
// lapsed place does not, even before its hold ends (order.place_grace
// under returnSlack).
func (at placeAt) holding(now int64) bool {
	return !at.back && at.holds > now && at.expires > now
}

// sameRequest reports whether quantities a and b name one request; 0 is
// a place posted by an earlier version, which did not say.
func sameRequest(a, b int32) bool { return a == 0 || b == 0 || a == b && a > 0 }

// quantityOf is q as a place keeps it, in 4 bytes (a place costs 16 less
// with them): -1, no request's, when no request can ask for q.
func quantityOf(q int64) int32 {
	if q < 0 || q > service.MaxQuantity {
		return -1
	}
	return int32(q)
}

// place is a remembered place. Its turns in fifo and in its SKU's line
// point at it rather than name its key, so telling a stale turn costs no
// lookup and a turn costs 16 bytes.
type place struct {
	k placeKey
	placeAt
	kept uint32 // the last compact that kept it in its line
	gone bool   // dropped from byKey: its turns are stale
}

// inLine is a place's turn in its SKU's line of buyers sent back, at the
// arrival it had when it took it.
type inLine struct {
	at      *place
	arrived int64
}

// live reports whether e's place still holds up the younger from e.
func (e inLine) live(now int64) bool {
	return !e.at.gone && e.at.arrived == e.arrived && e.at.holding(now)
}

// lapse is a place's turn in fifo, at the expiry it had when it took it:
// a place has one live turn, its latest.
type lapse struct {
	at      *place
	expires int64
}

func (t lapse) live() bool { return !t.at.gone && t.at.expires == t.expires }

// places is the bounded table of remembered places. All it holds is
// bounded by max, whichever instance posted the places and whether or not
// a worker here asks for their SKU: byKey holds at most max places, fifo
// and the lines together at most 2×max entries each (docs/operations.md,
// Sizing).
type places struct {
	max  int
	keep time.Duration
	log  *slog.Logger

	n        atomic.Int64 // entries, read without mu by the order path
	mu       sync.Mutex
	byKey    map[placeKey]*place
	fifo     []lapse            // by expiry; may hold stale turns
	line     map[int64][]inLine // sku → turns by arrival; may hold stale turns
	lined    int                // turns the lines took since compact, trimmed ones included
	compacts uint32

	out       chan Place    // to the board; nil without one; never closed
	quit      chan struct{} // closed by close: the poster posts what it has and exits
	stop      func()        // ends Listen
	published chan struct{} // closed when the poster has exited
}

// placeBatch bounds the places one Post carries; placeOut the places
// waiting to be posted (more are not shared); placeFlush how long the
// poster gathers places before posting.
const (
	placeBatch = 256
	placeOut   = 4096
	placeFlush = 5 * time.Millisecond
)

func newPlaces(maxEntries int, keep time.Duration, board PlaceBoard, log *slog.Logger) *places {
	p := &places{max: max(maxEntries, 0), keep: keep, log: log, byKey: map[placeKey]*place{}, line: map[int64][]inLine{}}
	if board != nil && p.max > 0 {
		p.out = make(chan Place, placeOut)
		p.quit = make(chan struct{})
		p.published = make(chan struct{})
		p.stop = board.Listen(p.learn)
		go p.post(board)
	}
	return p
}

// arrival returns r's arrival: the one it kept when it was told to come
// back, else now. The same key with another body is a new arrival, and
// its buyer, back, no longer holds up the younger. A request without a
// key, or any while no place is remembered, costs an atomic load.
func (p *places) arrival(r service.OrderRequest) int64 {
	now := time.Now().UnixMicro()
	if r.IdempotencyKey == "" || p.n.Load() == 0 {
		return now
	}
	p.mu.Lock()
	var at placeAt
	pl, ok := p.byKey[placeKey{r.SKUID, r.UserID, r.IdempotencyKey}]
	if ok {
		at = pl.placeAt
	}
	ok = ok && now < at.expires && at.arrived < now
	first := ok && !at.back
	if first {
		pl.back = true
	}
	p.mu.Unlock()
	if first {
		p.share(Place{SKUID: r.SKUID, UserID: r.UserID, Key: r.IdempotencyKey, Quantity: int64(at.quantity), Arrived: at.arrived, Expires: at.expires, Back: true})
	}
	if !ok || !sameRequest(at.quantity, quantityOf(r.Quantity)) {
		return now
	}
	return at.arrived
}

// ahead returns the arrival of the oldest buyer of sku sent back and not
// yet come back, still holding up the younger; noLimit when none.
func (p *places) ahead(sku int64) int64 {
	if p.n.Load() == 0 {
		return noLimit
	}
	now := time.Now().UnixMicro()
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.line[sku]
	for len(l) > 0 {
		if l[0].live(now) {
			p.line[sku] = l
			return l[0].arrived
		}
		l[0] = inLine{}
		l = l[1:]
	}
	delete(p.line, sku)
	return noLimit
}

// comeBack remembers, and shares, the place of a keyed request answered
// err when err tells its buyer to come back.
func (p *places) comeBack(r service.OrderRequest, arrived int64, err error) {
	if p.max == 0 || r.IdempotencyKey == "" || err == nil {
		return
	}
	busy := errors.Is(err, service.ErrBusy) || errors.Is(err, service.ErrTooManySKUs)
	if !busy && !errors.Is(err, service.ErrUnavailable) {
		return
	}
	pl := Place{SKUID: r.SKUID, UserID: r.UserID, Key: r.IdempotencyKey, Quantity: r.Quantity,
		Arrived: arrived, Expires: time.Now().UnixMicro() + p.keep.Microseconds(), Busy: busy}
	p.learn([]Place{pl})
	p.share(pl)
}

// share posts pl to the other instances, unless the board is behind.
func (p *places) share(pl Place) {
	if p.out != nil {
		select {
		case p.out <- pl:
		default: // this place stays this instance's
		}
	}
}

// learn remembers ps, keeping the earlier arrival of a request known. A
// place heard again (the poster hears its own post; a Back for a place
// already back) changes nothing and takes no room.
func (p *places) learn(ps []Place) {
	now := time.Now().UnixMicro()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range ps {
		if pl.Expires <= now || p.max == 0 {
			continue
		}
		k := placeKey{pl.SKUID, pl.UserID, pl.Key}
		old := p.byKey[k]
		known := old != nil && old.expires > now && sameRequest(old.quantity, quantityOf(pl.Quantity))
		if pl.Back {
			if known && old.arrived == pl.Arrived {
				old.back = true
			}
			continue
		}
		var was placeAt
		if known {
			was = old.placeAt
		}
		at := p.merge(pl, was, known)
		switch {
		case known && at == was:
			continue
		case known:
			old.placeAt = at
		default: // new, or in the place of a lapsed one or another request's
			if old != nil {
				p.drop(old)
			} else {
				p.evict(now)
			}
			old = &place{k: k, placeAt: at}
			p.byKey[k] = old
		}
		if !known || at.expires != was.expires {
			p.fifo = append(p.fifo, lapse{old, at.expires})
		}
		if at.holds > 0 && !(known && was.holding(now) && was.arrived == at.arrived) { // not in line yet
			p.enter(pl.SKUID, inLine{old, at.arrived}, now)
		}
	}
	p.n.Store(int64(len(p.byKey)))
}

// merge returns the place pl makes of old, the one remembered for its
// key, if known (the same request).
func (p *places) merge(pl Place, old placeAt, known bool) placeAt {
	at := placeAt{arrived: pl.Arrived, expires: pl.Expires, quantity: quantityOf(pl.Quantity)}
	if pl.Busy {
		at.holds = pl.Expires - p.keep.Microseconds() + (comeBackAfter + returnSlack).Microseconds()
	}
	if known {
		at.arrived = min(at.arrived, old.arrived)
		at.expires = max(at.expires, old.expires)
		at.holds = max(at.holds, old.holds)
		at.quantity = max(at.quantity, old.quantity)    // an earlier version's 0 learns it
		at.back = old.back && pl.Expires <= old.expires // a post older than its return does not put it back in line
	}
	return at
}

// enter adds e to its SKU's line, by arrival. Called with mu held.
func (p *places) enter(sku int64, e inLine, now int64) {
	l := p.line[sku]
	i, _ := slices.BinarySearchFunc(l, e.arrived, func(x inLine, t int64) int { return cmp.Compare(x.arrived, t) })
	p.line[sku] = slices.Insert(l, i, e)
	p.lined++
	if p.lined-p.max > p.max { // 2*max would overflow near MaxInt
		p.compact(now)
	}
}

// compact keeps in the lines only the live turns, one a place, in slices
// of their size, and drops the empty lines: the lines then hold at most
// the table's places, whichever SKUs' and whether or not a worker here
// trims them (ahead). Each compact follows at least max turns, so its
// cost per turn is constant. Called with mu held.
func (p *places) compact(now int64) {
	p.compacts++
	lines := map[int64][]inLine{}
	p.lined = 0
	for sku, l := range p.line {
		n := 0
		for _, e := range l {
			if e.live(now) && e.at.kept != p.compacts {
				e.at.kept = p.compacts
				l[n] = e
				n++
			}
		}
		if n > 0 {
			lines[sku] = slices.Clone(l[:n])
			p.lined += n
		}
	}
	p.line = lines
}

// evict makes room for one entry: it drops the lapsed, then the soonest
// to lapse while the table is full. Called with mu held.
func (p *places) evict(now int64) {
	for len(p.fifo) > 0 {
		t := p.fifo[0]
		if t.live() && t.expires > now && len(p.byKey) < p.max {
			break
		}
		p.fifo[0] = lapse{}
		p.fifo = p.fifo[1:]
		if t.live() {
			p.drop(t.at)
		}
	}
	if len(p.fifo)-p.max > p.max { // places heard many times: keep each one's live turn
		fifo := make([]lapse, 0, len(p.byKey))
		for _, t := range p.fifo {
			if t.live() {
				fifo = append(fifo, t)
			}
		}
		p.fifo = fifo
	}
}

// drop forgets pl; its turns go stale. Called with mu held.
func (p *places) drop(pl *place) {
	delete(p.byKey, pl.k)
	pl.gone = true
}

// post sends the places told to come back here to the board, a batch at
// a time, until close.
func (p *places) post(board PlaceBoard) {
	defer close(p.published)
	batch := make([]Place, 0, placeBatch)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := board.Post(ctx, batch); err != nil {
			p.log.Warn("places not shared with the other instances", "n", len(batch), "err", err)
		}
		cancel()
		batch = batch[:0]
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case pl := <-p.out:
			batch = append(batch, pl)
		case <-p.quit:
			return
		}
		t.Reset(placeFlush)
	gather:
		for len(batch) < placeBatch {
			select {
			case pl := <-p.out:
				batch = append(batch, pl)
			case <-t.C:
				break gather
			case <-p.quit:
				break gather
			}
		}
		flush()
	}
}

// close stops sharing places; it waits for the poster's last batch.
func (p *places) close() {
	if p.out == nil {
		return
	}
	close(p.quit)
	<-p.published
	p.stop()
}
