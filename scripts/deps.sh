#!/usr/bin/env bash
# Installs what the tests and benchmarks run, when it is missing, and says
# what and why before it does: MariaDB's server and client binaries and
# Redis (make test runs private servers of them, scripts/with-test-servers.sh),
# ZooKeeper's jars and a JRE (the tests start their own ensembles) with
# apt-get, and k6 with go install. It never starts, stops, logs in to or
# configures a server. Idempotent.
set -euo pipefail

K6_VERSION=${K6_VERSION:-v1.8.1}
say() { printf 'deps: %s\n' "$*"; }

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

pkgs=()
need() { # need PACKAGE WHY
  say "will install $1: $2"
  pkgs+=("$1")
}

# The -core packages hold the binaries alone: no system service that would
# start on install and that the tests would not use.
have mariadbd && have mariadb-install-db ||
  need mariadb-server-core "mariadbd and mariadb-install-db, for the tests' throwaway MariaDB"
have mariadb || need mariadb-client-core "the mariadb client, to tell when that MariaDB is up"
have redis-server || need redis-server "redis-server, which the tests start privately"
have redis-cli || need redis-tools "redis-cli, to tell when a private Redis is up"
{ [ -f /usr/share/java/zookeeper.jar ] && have java; } ||
  need zookeeper "ZooKeeper's jars and a JRE, for the tests' private ensembles"

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
k6=
have k6 || [ -x "$gobin/k6" ] || {
  say "will install k6 $K6_VERSION into $gobin with go install (a few minutes): the load tests drive it"
  k6=1
}

if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    say "not root: install these yourself: apt-get install ${pkgs[*]}"
    exit 1
  fi
  say "apt-get install ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
if [ -n "$k6" ]; then
  go install "go.k6.io/k6@$K6_VERSION"
fi
say "MariaDB, Redis, ZooKeeper and k6 are installed"
