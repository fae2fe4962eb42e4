package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock"
)

// wait counts an Obtain of key starting (+1) or answered (-1).
func (z *Client) wait(key string, d int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if n := z.waiting[key] + d; n > 0 {
		z.waiting[key] = n
	} else {
		delete(z.waiting, key)
	}
}

// Inspect returns key's lock as the ensemble knows it, its lowest node the
// holder, in two requests, never creating or deleting a node. Waiters
// counts this client's unanswered Obtains of key, the holder's among them.
// It returns an error wrapping lock.ErrUnavailable when ZooKeeper does not
// answer within OpTimeout.
func (z *Client) Inspect(ctx context.Context, key string) (lock.State, error) {
	var st lock.State
	z.mu.Lock()
	st.Waiters = z.waiting[key]
	z.mu.Unlock()
	if st := z.conn.State(); st != zk.StateHasSession {
		return lock.State{}, fmt.Errorf("%w: zookeeper session %v", lock.ErrUnavailable, st)
	}
	dir := z.o.Root + "/" + url.PathEscape(key)
	for range 4 { // the holder released between our two requests: read again
		children, err := call(ctx, z, func() ([]string, error) { c, _, err := z.conn.Children(dir); return c, err })
		if errors.Is(err, zk.ErrNoNode) || err == nil && len(children) == 0 {
			return st, nil
		}
		if err != nil {
			return lock.State{}, err
		}
		lowest := slices.MinFunc(children, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
		type node struct {
			data []byte
			st   *zk.Stat
		}
		n, err := call(ctx, z, func() (n node, err error) { n.data, n.st, err = z.conn.Get(dir + "/" + lowest); return n, err })
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return lock.State{}, err
		}
		st.Held, st.Renewed = true, true
		st.Owner = string(n.data)
		st.Token = lowest[:min(strings.LastIndexByte(lowest, '-'), lock.TokenPrefixLen)]
		st.Fence = z.o.FenceBase + n.st.Czxid
		st.Since = time.UnixMilli(n.st.Ctime)
		st.Queued = len(children) - 1
		return st, nil
	}
	return st, nil
}

// Keys returns up to limit keys that have a node under Root: held, waited
// for, or just released (the server deletes an empty key's node soon
// after). One request.
func (z *Client) Keys(ctx context.Context, limit int) ([]string, error) {
	children, err := call(ctx, z, func() ([]string, error) { c, _, err := z.conn.Children(z.o.Root); return c, err })
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, min(len(children), limit))
	for _, c := range children[:min(len(children), limit)] {
		if k, err := url.PathUnescape(c); err == nil {
			keys = append(keys, k)
		}
	}
	return keys, nil
}
