package app

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// newClusterClient returns go-redis's Cluster client with one addition:
// it re-reads the slot map as soon as a node fails to answer.
//
// go-redis reloads the slot map on MOVED and ASK, and otherwise every
// ClusterStateReloadInterval (60s by default). A master that dies answers
// nothing, so no MOVED ever comes: after the cluster has promoted its
// replica, the client would go on dialling the dead address for the
// slots it served until the interval ran out, and every SKU there would
// sell on the database's guard alone (slower, and with the lock's
// fallback) for up to a minute instead of the seconds of the election.
// Reloading on a failed answer follows the promotion within one reload
// (go-redis coalesces them, at most one per 200ms).
func newClusterClient(opts *redis.ClusterOptions) *redis.ClusterClient {
	cc := redis.NewClusterClient(opts)
	reload := reloadOnFailure{cc: cc}
	// Node clients see every failure, including those of the pipelines the
	// lock sends to a slot's master directly (lock.min_replicas).
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(reload) })
	return cc
}

// reloadOnFailure is a go-redis hook that asks the Cluster client to
// reload its slot map after a command a node did not serve.
type reloadOnFailure struct{ cc *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// The reload's own CLUSTER SLOTS on a dead node must not ask for
		// another reload: that would poll the cluster while the node is down.
		if cmd.Name() != "cluster" && nodeFailed(ctx, err) {
			h.cc.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if nodeFailed(ctx, err) {
			h.cc.ReloadState(ctx)
		}
		return err
	}
}

// nodeFailed reports whether err says the node did not serve the command:
// no answer at all (refused, reset, timed out) or a cluster that is not
// serving the slot (CLUSTERDOWN, TRYAGAIN). A reply such as a script error
// or redis.Nil is an answer; the caller's own cancelled context is not the
// node's fault.
func nodeFailed(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	return redis.IsClusterDownError(err) || redis.IsTryAgainError(err)
}
