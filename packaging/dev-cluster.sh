#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for docsync's tests, benchmarks and demo. Never touches a system
# cluster or the system's PostgreSQL install.
#
#   dev-cluster.sh start [--no-install]   create and start a cluster; prints its directory
#   dev-cluster.sh env [DIR]              print the client settings (PGHOST, PGPORT, PGUSER, PGDATABASE)
#   dev-cluster.sh install [DIR]          (re)install the extension built in this checkout into it
#   dev-cluster.sh stop [DIR]             stop it and remove its directory
#   dev-cluster.sh standby DIR            create and start a hot standby streaming from DIR; prints its directory
#   dev-cluster.sh promote DIR            promote the standby in DIR to a primary
#   dev-cluster.sh ctl DIR start|CMD…     start the server, or run pg_ctl CMD… on it as the server's user
#
# DIR defaults to $DOCSYNC_CLUSTER_DIR; `start` listens on $DOCSYNC_CLUSTER_PORT when set (refused
# when something listens there), else on a free port. The cluster lives in a temporary directory owned by the
# postgres OS user (the server refuses to run as root). It runs from a private copy of the server's
# install tree, into which the extension is installed with `make install DESTDIR=…`, so clusters of
# several checkouts never share an installed extension. The server listens on its own socket
# directory and on 127.0.0.1 at a free port, with wal_level = logical, and lists docsync in
# output_plugin_libraries when the server has that setting (15.19 and later).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(dirname "$here")
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
server_user=postgres

die() { echo "dev-cluster: $*" >&2; exit 1; }

as_server() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$server_user" -- "$@"; else "$@"; fi
}

cluster_dir() {
  local dir=${1:-${DOCSYNC_CLUSTER_DIR:-}}
  [ -n "$dir" ] || die "no cluster directory: pass it, or set DOCSYNC_CLUSTER_DIR"
  [ -f "$dir/cluster.env" ] || die "$dir is not a docsync dev cluster (no cluster.env)"
  echo "$dir"
}

# A port nobody listens on, below the kernel's ephemeral range (32768 and up), where a client
# connection's own end could take it between this check and the server's bind.
free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  die "found no free TCP port on 127.0.0.1"
}

# Copies the server's bin, lib and share trees under $1 keeping their relative layout: PostgreSQL
# locates its share and library directories relative to its own executable.
stage_server() {
  local root=$1 d
  for d in "$("$PG_CONFIG" --bindir)" "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)"; do
    mkdir -p "$root$(dirname "$d")"
    cp -a "$d" "$root$d"
  done
}

install_extension() {
  local dir=$1
  make -s -C "$top" PG_CONFIG="$PG_CONFIG" >/dev/null
  make -s -C "$top" PG_CONFIG="$PG_CONFIG" install WORKER=no DESTDIR="$dir/root" >/dev/null
  chmod -R a+rX "$dir/root"
}

bin() { echo "$1/root$("$PG_CONFIG" --bindir)"; }

start_server() {
  local dir=$1
  as_server "$(bin "$dir")/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
    { tail -n 20 "$dir/server.log" >&2; die "the server in $dir did not start"; }
}

# The status directory: any test's worker writes there (mode 1777), and the server, owning it, may
# remove any file in it (docsync.forget_slot), as a status directory the README sets up allows.
status_dir() {
  mkdir -p "$1/status" && chmod 1777 "$1/status"
  if [ "$(id -u)" -eq 0 ]; then chown "$server_user" "$1/status"; fi
}

new_cluster_dir() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/docsync-pg.XXXXXX")
  chmod 755 "$dir"
  mkdir -p "$dir/socket"
  echo "$dir"
}

# Until the cluster runs, a failed step (the extension does not build, initdb fails, the server does
# not start) removes the half-made directory; call kept once it runs.
removed_on_failure() { trap "rm -rf '$1'" EXIT; }
kept() { trap - EXIT; }

cmd_start() {
  local install=1 dir port
  [ "${1:-}" = "--no-install" ] && install=0
  dir=$(new_cluster_dir)
  removed_on_failure "$dir"
  stage_server "$dir/root"
  [ $install -eq 1 ] && install_extension "$dir"
  [ "$(id -u)" -eq 0 ] && chown -R "$server_user" "$dir/socket" && chown "$server_user" "$dir"
  as_server "$(bin "$dir")/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  if [ -n "${DOCSYNC_CLUSTER_PORT:-}" ]; then
    port=$DOCSYNC_CLUSTER_PORT
    [[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] ||
      die "DOCSYNC_CLUSTER_PORT=$port is not a TCP port (1 to 65535)"
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      die "DOCSYNC_CLUSTER_PORT=$port: something already listens on 127.0.0.1:$port; choose another port, or unset it for a free one"
    fi
  else
    port=$(free_port)
  fi
  {
    echo "listen_addresses = '127.0.0.1'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir/socket'"
    echo "wal_level = logical"
    echo "max_replication_slots = 20"
    echo "max_wal_senders = 20"
    echo "max_connections = 100"
    echo "fsync = off"
    echo "shared_preload_libraries = 'pg_stat_statements'"
    echo "log_line_prefix = '%m [%p] %q%a '"
    echo "docsync.status_dir = '$dir/status'"
    if as_server "$(bin "$dir")/postgres" --describe-config 2>/dev/null | grep -c '^output_plugin_libraries' >/dev/null; then
      echo "output_plugin_libraries = 'pgoutput, test_decoding, wal2json, docsync'"
    fi
  } >>"$dir/data/postgresql.conf"
  echo "host replication all 127.0.0.1/32 trust" >>"$dir/data/pg_hba.conf"
  status_dir "$dir"
  cat >"$dir/cluster.env" <<ENV
export PGHOST='$dir/socket'
export PGPORT='$port'
export PGUSER='postgres'
export PGDATABASE='postgres'
export DOCSYNC_CLUSTER_DIR='$dir'
export DOCSYNC_STATUS_DIR='$dir/status'
export DOCSYNC_PG_BINDIR='$(bin "$dir")'
ENV
  start_server "$dir"
  kept
  echo "$dir"
}

cmd_standby() {
  local primary dir port
  primary=$(cluster_dir "${1:-}")
  # shellcheck disable=SC1091
  port=$(. "$primary/cluster.env"; echo "$PGPORT")
  dir=$(new_cluster_dir)
  removed_on_failure "$dir"
  cp -a "$primary/root" "$dir/root"
  [ "$(id -u)" -eq 0 ] && chown -R "$server_user" "$dir/socket" && chown "$server_user" "$dir"
  as_server "$(bin "$dir")/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$dir/data" -R -X stream --checkpoint=fast >"$dir/basebackup.log" 2>&1 ||
    { cat "$dir/basebackup.log" >&2; die "pg_basebackup from $primary failed"; }
  port=$(free_port)
  {
    echo "port = $port"
    echo "unix_socket_directories = '$dir/socket'"
    echo "hot_standby = on"
    echo "docsync.status_dir = '$dir/status'"
  } >>"$dir/data/postgresql.conf"
  status_dir "$dir"
  sed -e "s|^export PGHOST=.*|export PGHOST='$dir/socket'|" -e "s|^export PGPORT=.*|export PGPORT='$port'|" \
      -e "s|$primary|$dir|g" "$primary/cluster.env" >"$dir/cluster.env"
  start_server "$dir"
  kept
  echo "$dir"
}

# pg_ctl on the cluster as the server's user: start (with the cluster's log file), or any other
# pg_ctl command and options, e.g. stop -m immediate.
cmd_ctl() {
  local dir
  dir=$(cluster_dir "${1:-}")
  shift
  case "${1:-}" in
    start) start_server "$dir" ;;
    *) as_server "$(bin "$dir")/pg_ctl" -D "$dir/data" -w -t 60 "$@" >/dev/null ;;
  esac
}

cmd_promote() {
  local dir
  dir=$(cluster_dir "${1:-}")
  as_server "$(bin "$dir")/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
}

cmd_stop() {
  local dir
  dir=$(cluster_dir "${1:-}")
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_server "$(bin "$dir")/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  env) cat "$(cluster_dir "${2:-}")/cluster.env" ;;
  install) install_extension "$(cluster_dir "${2:-}")" ;;
  standby) cmd_standby "${2:-}" ;;
  promote) cmd_promote "${2:-}" ;;
  ctl) shift; cmd_ctl "$@" ;;
  stop) cmd_stop "${2:-}" ;;
  *) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
