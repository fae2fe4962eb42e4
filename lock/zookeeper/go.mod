module github.com/seckill/seckill/lock/zookeeper

go 1.26.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/seckill/seckill/lock v0.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-redsync/redsync/v4 v4.18.1 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// In this repository the client builds against the lock beside it; a
// module that requires this one gets the lock at the version above.
replace github.com/seckill/seckill/lock => ../
