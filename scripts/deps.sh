#!/usr/bin/env bash
# Installs what the tests and benchmarks run, when it is missing, and says
# what and why before it does: MariaDB's server and client binaries and
# Redis (make test runs private servers of them, scripts/with-test-servers.sh),
# nats-server (the order events' tests start their own, internal/testenv),
# ZooKeeper's jars and a JRE (the tests start their own ensembles) with
# apt-get, and k6 with go install. It never starts, stops, logs in to or
# configures a server. Idempotent.
#
#   scripts/deps.sh            what make test needs
#   scripts/deps.sh promtool   only promtool, for make lint: taken out of
#                              Debian's prometheus package into GOBIN
#                              rather than installing the package, whose
#                              service would start a Prometheus server
set -euo pipefail

K6_VERSION=${K6_VERSION:-v1.8.1}
say() { printf 'deps: %s\n' "$*"; }

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"

if [ "${1:-}" = promtool ]; then
  if have promtool || [ -x "$gobin/promtool" ]; then
    exit 0
  fi
  say "will put promtool into $gobin, from Debian's prometheus package (apt-get download): make lint checks the alert rules with it"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null); then
    if [ "$(id -u)" != 0 ]; then
      say "apt-get download prometheus failed; as root, apt-get update first, or install promtool yourself"
      exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null)
  fi
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p "$gobin"
  install -m 0755 "$tmp/x/usr/bin/promtool" "$gobin/promtool"
  say "$("$gobin/promtool" --version 2>&1 | head -1)"
  exit 0
fi

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
have nats-server || need nats-server "nats-server with JetStream, which the order events' tests start privately"
{ [ -f /usr/share/java/zookeeper.jar ] && have java; } ||
  need zookeeper "ZooKeeper's jars and a JRE, for the tests' private ensembles"

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
say "MariaDB, Redis, NATS, ZooKeeper and k6 are installed"
