#!/usr/bin/env bash
# Makes sure what the tests need is installed and running on loopback:
# MariaDB (127.0.0.1:3306, root without password), Redis (127.0.0.1:6379),
# k6 and ZooKeeper (Debian's package: the jars and a JRE; the tests start
# their own servers from them). Installs with apt-get / go install when missing and running as
# root; starts stopped servers. Idempotent and bounded in time.
set -euo pipefail

K6_VERSION=${K6_VERSION:-v1.8.1}
MYSQL_HOST=${MYSQL_HOST:-127.0.0.1}
say() { printf 'deps: %s\n' "$*"; }

apt_updated=
apt_install() {
  if [ "$(id -u)" != 0 ]; then
    say "need $* but not root: install it yourself"; exit 1
  fi
  if [ -z "$apt_updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  say "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # wait_for SECONDS CMD...: run CMD until it succeeds, at most SECONDS
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

mysql_ok() { mariadb -h "$MYSQL_HOST" -P 3306 -uroot -e 'SELECT 1' >/dev/null 2>&1; }

# MariaDB
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server mariadb-client
if ! mysql_ok; then
  if ! mariadb-admin ping >/dev/null 2>&1; then
    say "starting MariaDB"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    wait_for 60 mariadb-admin ping || { say "MariaDB did not start"; exit 1; }
  fi
  if ! mysql_ok; then
    # A fresh Debian install lets root in through the socket only.
    say "allowing root over TCP without a password (test machine)"
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD(''); FLUSH PRIVILEGES;"
  fi
  wait_for 30 mysql_ok || { say "cannot log in to MariaDB at $MYSQL_HOST:3306 as root"; exit 1; }
fi
# The suite runs packages in parallel, each with its own pools.
mariadb -h "$MYSQL_HOST" -uroot -e 'SET GLOBAL max_connections = GREATEST(@@max_connections, 1000)' || true

# Redis
command -v redis-server >/dev/null 2>&1 || apt_install redis-server
command -v redis-cli >/dev/null 2>&1 || apt_install redis-tools
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  say "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  wait_for 20 redis-cli -h 127.0.0.1 -p 6379 ping || { say "Redis did not start"; exit 1; }
fi

# ZooKeeper: only installed, never started here (tests run their own).
[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || apt_install zookeeper

# k6
gobin=$(go env GOBIN); [ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if ! command -v k6 >/dev/null 2>&1 && [ ! -x "$gobin/k6" ]; then
  say "installing k6 $K6_VERSION (go install; takes a few minutes)"
  go install "go.k6.io/k6@$K6_VERSION"
fi
say "MariaDB, Redis, k6 and ZooKeeper are ready"
