#!/usr/bin/env bash
# The lock can be taken alone: a throwaway module outside the repository
# that imports only github.com/seckill/seckill/lock (replaced with this
# repository's lock/) builds, and its module graph (go list -m all) has
# none of the service's dependencies: no Gin, no GORM, no ZooKeeper, not
# the seckill module itself. The version it requires is the one the root
# go.mod requires and lock/CHANGELOG.md names last. Run by make test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
say() { printf 'lock-alone: %s\n' "$*"; }

version=$(sed -n 's/^## \(v[0-9][0-9.]*\).*/\1/p' "$root/lock/CHANGELOG.md" | head -1)
required=$(cd "$root" && "$GO" list -m -f '{{.Version}}' github.com/seckill/seckill/lock)
if [ -z "$version" ] || [ "$version" != "$required" ]; then
  say "lock/CHANGELOG.md's latest version is '$version' but go.mod requires the lock at '$required'"
  exit 1
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat >go.mod <<MOD
module example.com/uselock

go 1.26.0

require github.com/seckill/seckill/lock $version

replace github.com/seckill/seckill/lock => $root/lock
MOD
cat >main.go <<'SRC'
package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	l, err := lock.New(rdb).Obtain(context.Background(), "k")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(context.Background())
	fmt.Println(l.Fence())
}
SRC
export GOWORK=off GOFLAGS=-mod=mod
"$GO" mod tidy
"$GO" build -o /dev/null .
"$GO" list -m all >modules.txt
if bad=$(grep -E '^(github\.com/gin-gonic/|gorm\.io/|github\.com/go-zookeeper/|github\.com/seckill/seckill( |$)|github\.com/seckill/seckill/lock/zookeeper)' modules.txt); then
  say "a module importing only the lock has these in its graph:"
  printf '%s\n' "$bad"
  exit 1
fi
say "a module outside the repository imports lock $version alone: builds, $(wc -l <modules.txt) modules in its graph, no gin, gorm or zookeeper"
