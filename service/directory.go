package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// Sizes of the SKU directory: at about 100 bytes an entry, each table
// stays under 7 MB whatever ids clients send.
const (
	maxKnownSKUs   = 1 << 16
	maxUnknownSKUs = 1 << 16
)

// DirectoryConfig tunes what an instance believes of the SKUs without
// reading them; see internal/config for the defaults.
type DirectoryConfig struct {
	ReadTimeout    time.Duration // one read of a SKU's row
	UnknownSKUTTL  time.Duration // how long an id found not to exist is answered 404 without a read
	SoldOutTTL     time.Duration // how often a SKU's shared sold-out mark is read
	SoldOutRecheck time.Duration // a local sold-out mark older than this is re-read from the database
}

// SKUReader reads a SKU's row: ErrSKUNotFound when there is none.
type SKUReader interface {
	SKU(ctx context.Context, id int64) (SKU, error)
}

// Directory is this instance's knowledge of the SKUs: which ids exist, so
// that nothing (a queue, a worker, a Redis key) is allocated for an
// invented one, and which are sold out or off sale, so that their buyers
// are answered without a queue (soldout.go, window.go). Each belief is tied
// to the row it was read from and re-read within a bound. An unknown id is
// remembered for UnknownSKUTTL: a SKU created through another instance is
// sellable here within that bound. Concurrent lookups of an id share one
// read.
type Directory struct {
	store SKUReader
	marks SoldOutMarks
	cfg   DirectoryConfig
	log   *slog.Logger
	obs   Observer
	known *lru.Cache[int64, *skuEntry]
	// unknown maps an id to the unix nanos until which it is known not to
	// exist; not expirable.LRU, whose janitor goroutine never exits.
	unknown *lru.Cache[int64, int64]
	flight  singleflight.Group
	// watch hears of the orders commits through this instance change
	// (Tell); nil: nobody long-polls.
	watch *Watch
}

// NewDirectory returns the SKUs as store holds them, their sold-out state
// shared through marks. obs may be nil.
func NewDirectory(store SKUReader, marks SoldOutMarks, cfg DirectoryConfig, log *slog.Logger, obs Observer) *Directory {
	if obs == nil {
		obs = nopObserver{}
	}
	known, err := lru.New[int64, *skuEntry](maxKnownSKUs)
	if err != nil {
		panic(err) // only for a size < 1
	}
	unknown, err := lru.New[int64, int64](maxUnknownSKUs)
	if err != nil {
		panic(err)
	}
	return &Directory{store: store, marks: marks, cfg: cfg, log: log, obs: obs, known: known, unknown: unknown}
}

// skuEntry is one existing SKU as this process knows it: its identity and
// its sold-out state.
type skuEntry struct {
	ref SKURef

	// mark is this process's belief: +version "sold out at version",
	// -version "in stock at version", 0 "not known". See soldout.go.
	mark atomic.Int64
	// confirmed is when (unix nanos) the sold-out mark last agreed with
	// the database or was adopted from the shared mark.
	confirmed atomic.Int64
	// shared is when (unix nanos) the shared mark was last read.
	shared atomic.Int64
	// refreshing single-flights reads of the shared mark.
	refreshing atomic.Bool
	// window is the sale window as last read (window.go); nil: not known.
	window atomic.Pointer[saleWindow]
	// reading is the re-read of the row in flight, if any (soldout.go).
	reading atomic.Pointer[rowRead]
}

// RefOf returns the identity of s: its id and created_at in microseconds,
// the database's precision.
func RefOf(s SKU) SKURef {
	return SKURef{ID: s.ID, Incarnation: s.CreatedAt.UnixMicro()}
}

// lookup returns the entry of an existing SKU, ErrSKUNotFound for an id
// that does not exist, or ErrUnavailable when the database cannot say.
func (d *Directory) lookup(ctx context.Context, id int64) (*skuEntry, error) {
	if e, ok := d.known.Get(id); ok {
		return e, nil
	}
	if d.knownMissing(id) {
		return nil, ErrSKUNotFound
	}
	ch := d.flight.DoChan(strconv.FormatInt(id, 10), func() (any, error) {
		// A flight that ended since the checks above has filled a table.
		if e, ok := d.known.Peek(id); ok {
			return e, nil
		}
		if d.knownMissing(id) {
			return nil, ErrSKUNotFound
		}
		// Not the first caller's ctx: its leaving must not fail the others.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ReadTimeout)
		defer cancel()
		at := time.Now().UnixNano()
		s, err := d.store.SKU(rctx, id)
		if errors.Is(err, ErrSKUNotFound) {
			d.unknown.Add(id, time.Now().Add(d.cfg.UnknownSKUTTL).UnixNano())
			return nil, err
		}
		if err != nil {
			return nil, unavailable(err)
		}
		return d.learn(s, at), nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*skuEntry), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}

func (d *Directory) knownMissing(id int64) bool {
	until, ok := d.unknown.Get(id)
	if !ok {
		return false
	}
	if time.Now().UnixNano() < until {
		return true
	}
	d.unknown.Remove(id)
	return false
}

// learn records s as read by a read begun at (unix nanos) and returns its
// entry, replacing that of an earlier SKU of the same id.
func (d *Directory) learn(s SKU, at int64) *skuEntry {
	d.unknown.Remove(s.ID)
	fresh := &skuEntry{ref: RefOf(s)}
	e, ok, _ := d.known.PeekOrAdd(s.ID, fresh)
	if !ok || e.ref != fresh.ref {
		d.known.Add(s.ID, fresh)
		e = fresh
	}
	e.observe(s, at)
	return e
}

// Forget drops id after the database said it has no such SKU (recreated
// or restored under us).
func (d *Directory) Forget(id int64) {
	d.known.Remove(id)
}

// peek returns the entry of a known SKU without any I/O, or nil.
func (d *Directory) peek(id int64) *skuEntry {
	e, _ := d.known.Peek(id)
	return e
}

func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
