#!/usr/bin/env bash
# Local servers for the tests marked `services`: PostgreSQL (Dagster's instance storage), Redis
# (the Celery broker) and moto_server (an S3-compatible object store), all on loopback, with
# their data, sockets and logs under one folder. Installs what is missing (Debian packages for
# PostgreSQL and Redis, the venv's moto from PyPI through scripts/setup.sh --test).
#
#   scripts/services.sh start    start what is not running (idempotent); prints the env file
#   scripts/services.sh env      print the env file (export NM_TEST_PG_URL=... etc.)
#   scripts/services.sh status   exit 0 when all three answer
#   scripts/services.sh stop     stop them and remove their folder
#
# Folder: $NM_SERVICES_DIR, default /tmp/nm-services-<uid>-<checksum of this checkout's path>
# (one set of servers per checkout; ports are picked free at start and kept in the env file).
# Anything that cannot start fails this script loudly, with the end of the server's log.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${NM_SERVICES_DIR:-/tmp/nm-services-$(id -u)-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)}"
ENV_FILE="$DIR/services.env"
VENV_BIN="${NM_SERVICES_VENV:-$REPO/.venv}/bin"
PG_USER_NAME=nm            # database superuser of the test cluster (trust auth on loopback only)
WAIT_S=${NM_SERVICES_WAIT_S:-60}

log() { echo "services: $*" >&2; }
die() { echo "services: ERROR: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    die "need root (or sudo) to run: $*"; fi
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* by hand"
  log "installing Debian packages: $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

pg_bin() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$found" ] || [ ! -x "$found/initdb" ]; then
    apt_install postgresql
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  fi
  [ -n "$found" ] && [ -x "$found/initdb" ] || die "PostgreSQL server binaries not found after install"
  echo "$found"
}

redis_bin() {
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  command -v redis-server || die "redis-server not found after install"
}

# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (the
# Debian package's), created if missing.
pg_run() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

load_env() { if [ -f "$ENV_FILE" ]; then . "$ENV_FILE"; fi; }

py_check() {  # py_check <python expression that raises unless the server answers>
  "$VENV_BIN/python" -c "$1" >/dev/null 2>&1
}

pg_up() {
  [ -n "${NM_TEST_PG_PORT:-}" ] && py_check "import psycopg2; psycopg2.connect(host='127.0.0.1', port=$NM_TEST_PG_PORT, user='$PG_USER_NAME', dbname='postgres', connect_timeout=2).close()"
}
redis_up() {
  [ -n "${NM_TEST_REDIS_URL:-}" ] && py_check "import redis; redis.Redis.from_url('$NM_TEST_REDIS_URL', socket_timeout=2).ping()"
}
s3_up() {
  [ -n "${NM_TEST_S3_ENDPOINT:-}" ] && py_check "import urllib.request; urllib.request.urlopen('$NM_TEST_S3_ENDPOINT', timeout=2)"
}

wait_for() {  # wait_for <name> <check function> <log file>
  local deadline=$((SECONDS + WAIT_S))
  until "$2"; do
    if [ $SECONDS -ge $deadline ]; then
      tail -n 30 "$3" >&2 2>/dev/null || true
      die "$1 did not answer within ${WAIT_S}s (log: $3)"
    fi
    sleep 0.3
  done
}

write_env() {
  cat >"$ENV_FILE.tmp" <<EOF
export NM_SERVICES_DIR='$DIR'
export NM_TEST_PG_PORT='$NM_TEST_PG_PORT'
export NM_TEST_PG_URL='postgresql://$PG_USER_NAME@127.0.0.1:$NM_TEST_PG_PORT/postgres'
export NM_TEST_REDIS_URL='$NM_TEST_REDIS_URL'
export NM_TEST_S3_ENDPOINT='$NM_TEST_S3_ENDPOINT'
EOF
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

start_pg() {
  local bin data="$DIR/pg/data" sock="$DIR/pg/socket"
  bin=$(pg_bin)
  if pg_up; then log "PostgreSQL already running on port $NM_TEST_PG_PORT"; return; fi
  mkdir -p "$DIR/pg"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    chown postgres "$DIR/pg"
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    pg_run "$bin/initdb" -D "$data" -U "$PG_USER_NAME" --auth=trust -E UTF8 --locale=C.UTF-8 >"$DIR/pg/initdb.log" 2>&1 \
      || pg_run "$bin/initdb" -D "$data" -U "$PG_USER_NAME" --auth=trust -E UTF8 >"$DIR/pg/initdb.log" 2>&1 \
      || { cat "$DIR/pg/initdb.log" >&2; die "initdb failed"; }
  fi
  pg_run mkdir -p "$sock"
  NM_TEST_PG_PORT=$(free_port)
  # A throwaway test cluster: durability off (faster), loopback only.
  pg_run "$bin/pg_ctl" -D "$data" -l "$DIR/pg/server.log" -w -t "$WAIT_S" start -o \
    "-p $NM_TEST_PG_PORT -k $sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    >&2 || { tail -n 30 "$DIR/pg/server.log" >&2 || true; die "PostgreSQL did not start"; }
  wait_for PostgreSQL pg_up "$DIR/pg/server.log"
  log "PostgreSQL on 127.0.0.1:$NM_TEST_PG_PORT (data $data)"
}

start_redis() {
  local bin
  bin=$(redis_bin)
  if redis_up; then log "Redis already running ($NM_TEST_REDIS_URL)"; return; fi
  mkdir -p "$DIR/redis"
  local port
  port=$(free_port)
  "$bin" --port "$port" --bind 127.0.0.1 --daemonize yes --pidfile "$DIR/redis/redis.pid" \
    --logfile "$DIR/redis/server.log" --dir "$DIR/redis" --save '' --appendonly no \
    || die "redis-server did not start"
  NM_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
  wait_for Redis redis_up "$DIR/redis/server.log"
  log "Redis on $NM_TEST_REDIS_URL"
}

start_s3() {
  [ -x "$VENV_BIN/moto_server" ] || die "$VENV_BIN/moto_server not found: run scripts/setup.sh --test first"
  if s3_up; then log "moto_server already running ($NM_TEST_S3_ENDPOINT)"; return; fi
  mkdir -p "$DIR/s3"
  local port
  port=$(free_port)
  nohup "$VENV_BIN/moto_server" -H 127.0.0.1 -p "$port" >"$DIR/s3/server.log" 2>&1 &
  echo $! >"$DIR/s3/moto.pid"
  NM_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
  wait_for moto_server s3_up "$DIR/s3/server.log"
  log "S3-compatible server (moto) on $NM_TEST_S3_ENDPOINT"
}

stop_all() {
  load_env
  if [ -f "$DIR/pg/data/postmaster.pid" ]; then
    pg_run "$(pg_bin)/pg_ctl" -D "$DIR/pg/data" -m fast -w -t 30 stop >&2 || true
  fi
  for pidfile in "$DIR/redis/redis.pid" "$DIR/s3/moto.pid"; do
    if [ -f "$pidfile" ]; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  case "$DIR" in /|"") die "refusing to remove '$DIR'";; esac
  rm -rf "$DIR"
  log "stopped (removed $DIR)"
}

cmd="${1:-start}"
case "$cmd" in
  start)
    mkdir -p "$DIR"
    chmod 755 "$DIR"  # the postgres user must reach its data folder
    load_env
    start_pg
    start_redis
    start_s3
    write_env
    echo "$ENV_FILE"
    ;;
  env)
    [ -f "$ENV_FILE" ] || die "not started ($ENV_FILE missing): scripts/services.sh start"
    cat "$ENV_FILE"
    ;;
  status)
    load_env
    pg_up && redis_up && s3_up
    ;;
  stop)
    stop_all
    ;;
  *)
    die "usage: scripts/services.sh start|env|status|stop"
    ;;
esac
