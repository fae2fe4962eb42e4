package app

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// newClusterClient returns go-redis's Cluster client, reloading the slot
// map as soon as a node fails to answer. A dead master sends no MOVED:
// the client would otherwise dial it until ClusterStateReloadInterval ran
// out, its SKUs selling degraded meanwhile (docs/locking.md).
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

// nodeFailed reports whether the node did not serve the command: no
// answer, CLUSTERDOWN or TRYAGAIN. A reply (a script error, redis.Nil) or
// the caller's own cancellation is not a failure.
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
