#!/usr/bin/env bash
# Runs a command beside a throwaway MariaDB and redis-server of its own:
# a private data directory, socket and loopback port each, stopped and
# deleted when the command ends, whatever its outcome. The command finds
# them in SECKILL_TEST_MYSQL_DSN and SECKILL_TEST_REDIS_ADDR (read by
# internal/testenv). When the caller has set one of these already, that
# server is used as it is and none is started in its place.
#
# The servers keep their defaults (max_connections 151, as a stock
# install): the suite must fit in them. Nothing here connects to, starts
# or configures any other server.
#
#   scripts/with-test-servers.sh go test ./repository/
set -euo pipefail

say() { printf 'test-servers: %s\n' "$*" >&2; }

if [ $# -eq 0 ]; then
  echo "usage: $0 command [arg...]" >&2
  exit 2
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/seckill-test.XXXXXX")
mysql_pid=
redis_pid=

# stop PID SECONDS: asks the process to exit, kills it past SECONDS.
stop() {
  local pid=$1 deadline=$((SECONDS + $2))
  kill "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  if [ -n "$redis_pid" ]; then stop "$redis_pid" 10; fi
  if [ -n "$mysql_pid" ]; then stop "$mysql_pid" 30; fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_up PID SECONDS CMD...: runs CMD until it succeeds; fails when PID
# has exited or SECONDS have passed.
wait_up() {
  local pid=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || return 1
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# free_port prints a loopback port that nothing answers on, below the
# kernel's ephemeral range so that no outgoing connection holds it.
free_port() {
  local lo=32768 hi p
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  local span=$((lo > 11000 ? lo - 10000 : 20000))
  for _ in $(seq 100); do
    p=$((10000 + (RANDOM * 32768 + RANDOM) % span))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  say "no free port found"
  return 1
}

# mariadbd refuses to run as root unless told to; as anyone else --user
# only draws a warning, so it is passed to root alone.
as_user=()
if [ "$(id -u)" = 0 ]; then as_user=(--user=root); fi

bin() { # bin NAME: NAME on PATH or in /usr/sbin (not on a user's PATH)
  command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || {
    say "$1 not found (scripts/deps.sh installs it)"
    return 1
  }
}

start_mariadb() {
  local mariadbd install client data=$dir/mariadb port
  mariadbd=$(bin mariadbd) && install=$(bin mariadb-install-db) && client=$(bin mariadb) || return 1
  say "creating a throwaway MariaDB in $data"
  # Its own tmpdir: bootstraps running at once in a shared /tmp collide on
  # their temporary tables ("Unknown table 'mysql.tmp_user_sys'").
  mkdir -p "$dir/tmp"
  if ! "$install" --no-defaults --datadir="$data" --tmpdir="$dir/tmp" "${as_user[@]}" \
    --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
    >"$dir/mariadb-install.log" 2>&1; then
    say "mariadb-install-db failed:"
    tail -n 30 "$dir/mariadb-install.log" >&2
    return 1
  fi
  # Another process may take the port between the probe and the bind.
  for _ in 1 2 3; do
    port=$(free_port) || return 1
    rm -f "$dir/mariadb.err"
    # utf8mb4 as Debian's packaged configuration has it.
    "$mariadbd" --no-defaults --datadir="$data" --tmpdir="$dir/tmp" "${as_user[@]}" \
      --bind-address=127.0.0.1 --port="$port" --socket="$dir/mariadb.sock" \
      --pid-file="$dir/mariadb.pid" --log-error="$dir/mariadb.err" --skip-name-resolve \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci >>"$dir/mariadb.out" 2>&1 &
    mysql_pid=$!
    if wait_up "$mysql_pid" 120 "$client" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -uroot -e 'SELECT 1'; then
      export SECKILL_TEST_MYSQL_DSN="root@tcp(127.0.0.1:$port)/"
      # Tests may create users on this server only: it is the run's own.
      export SECKILL_TEST_MYSQL_THROWAWAY=1
      say "MariaDB on 127.0.0.1:$port, max_connections $("$client" --no-defaults --protocol=tcp \
        -h 127.0.0.1 -P "$port" -uroot -N -e 'SELECT @@max_connections')"
      return 0
    fi
    stop "$mysql_pid" 30
    mysql_pid=
    grep -q 'Address already in use' "$dir/mariadb.err" 2>/dev/null || break
  done
  say "MariaDB did not start; its log:"
  tail -n 30 "$dir/mariadb.err" >&2 || true
  return 1
}

start_redis() {
  local server cli port
  server=$(bin redis-server) && cli=$(bin redis-cli) || return 1
  mkdir -p "$dir/redis"
  for _ in 1 2 3; do
    port=$(free_port) || return 1
    rm -f "$dir/redis.log"
    "$server" --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
      --dir "$dir/redis" --logfile "$dir/redis.log" >/dev/null 2>&1 &
    redis_pid=$!
    if wait_up "$redis_pid" 30 "$cli" -h 127.0.0.1 -p "$port" ping; then
      export SECKILL_TEST_REDIS_ADDR="127.0.0.1:$port"
      say "Redis on $SECKILL_TEST_REDIS_ADDR"
      return 0
    fi
    stop "$redis_pid" 10
    redis_pid=
    grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null || break
  done
  say "Redis did not start; its log:"
  tail -n 30 "$dir/redis.log" >&2 || true
  return 1
}

if [ -n "${SECKILL_TEST_MYSQL_DSN:-}" ]; then
  say "MariaDB: SECKILL_TEST_MYSQL_DSN is set, using that server"
else
  start_mariadb
fi
if [ -n "${SECKILL_TEST_REDIS_ADDR:-}" ]; then
  say "Redis: SECKILL_TEST_REDIS_ADDR=$SECKILL_TEST_REDIS_ADDR is set, using that server"
else
  start_redis
fi

set +e
"$@"
exit $?
