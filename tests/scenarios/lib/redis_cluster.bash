# A private Redis Cluster for the scenarios: six redis-servers on loopback (each port and its
# cluster bus port + 10000 free), appendonly with an fsync per write, made into 3 masters with one
# replica each by `redis-cli --cluster create`. A failed master's replica is promoted after
# cluster-node-timeout (2 s); cluster-require-full-coverage is off, so the other masters keep
# serving while one of them is down. Sourced after the caller has set `tmp` and defined `fail`; the
# caller's cleanup must call stop_redis_cluster.

command -v redis-server >/dev/null || fail "redis-server is not installed (bash packaging/deps.sh)"
read -r -a rc_ports <<<"$(python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
ports = []
while len(ports) < 6:
    # p in 10000-19999 and its bus port in 20000-29999, below the ephemeral range (32768 and up); no
    # node port of one cluster is another's bus port (scenarios and the C++ fixtures run side by side)
    p = random.randrange(10000, 20000)
    if p not in ports and free(p) and free(p + 10000):
        ports.append(p)
print(" ".join(map(str, ports)))
PY
)"
declare -A rc_pids=()

# rcn PORT ARGS...: redis-cli on one node.
rcn() { local p=$1; shift; redis-cli -p "$p" "$@"; }
# start_redis_node PORT: starts (or restarts, with its data directory and nodes.conf) one node.
start_redis_node() {
  local p=$1
  mkdir -p "$tmp/rc/$p"
  redis-server --port "$p" --bind 127.0.0.1 --dir "$tmp/rc/$p" --save '' --appendonly yes --appendfsync always \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --cluster-require-full-coverage no --repl-diskless-sync-delay 0 --daemonize no >>"$tmp/rc/$p.log" 2>&1 &
  rc_pids[$p]=$!
  for _ in $(seq 1 100); do [ "$(rcn "$p" PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done
  fail "redis-server did not start on port $p: $(tail -n 5 "$tmp/rc/$p.log")"
}
# kill_redis_node PORT: kill -9.
kill_redis_node() {
  local p=$1
  [ -n "${rc_pids[$p]:-}" ] || return 0
  kill -9 "${rc_pids[$p]}" 2>/dev/null || true
  wait "${rc_pids[$p]}" 2>/dev/null || true
  rc_pids[$p]=
}
stop_redis_cluster() { local p; for p in "${rc_ports[@]}"; do kill_redis_node "$p"; done; }
# alive_node: a port whose node answers.
alive_node() {
  local p
  for p in "${rc_ports[@]}"; do [ -n "${rc_pids[$p]:-}" ] && [ "$(rcn "$p" PING 2>/dev/null)" = PONG ] && { echo "$p"; return 0; }; done
  fail "no Redis Cluster node answers"
}
# cluster_nodes: CLUSTER NODES as a live node sees it.
cluster_nodes() { rcn "$(alive_node)" CLUSTER NODES; }
# masters: the ports of the masters serving slots (not failed).
masters() { cluster_nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && NF > 8 { split($2, a, "[:@]"); print a[2] }'; }
# node_id PORT
node_id() { rcn "$1" CLUSTER MYID; }
# owner_of_slot SLOT: the port of the master serving SLOT, as a live node sees it.
owner_of_slot() {
  cluster_nodes | awk -v s="$1" '$3 ~ /master/ {
      split($2, a, "[:@]")
      for (i = 9; i <= NF; i++) { n = split($i, r, "-"); lo = r[1]; hi = (n > 1) ? r[2] : r[1]
        if ($i !~ /^\[/ && s >= lo + 0 && s <= hi + 0) { print a[2]; exit } } }'
}
key_slot() { rcn "$(alive_node)" CLUSTER KEYSLOT "$1"; }
# cluster_settled: every live node says cluster_state:ok and sees 3 masters with one replica each,
# and every replica has synced with its master (only a synced replica can be promoted).
cluster_settled() {
  local p
  for p in "${rc_ports[@]}"; do
    [ -n "${rc_pids[$p]:-}" ] || continue
    rcn "$p" CLUSTER INFO | grep -q 'cluster_state:ok' || return 1
    if rcn "$p" INFO replication | grep -q '^role:slave'; then
      rcn "$p" INFO replication | grep -q '^master_link_status:up' || return 1
    fi
    [ "$(rcn "$p" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ && NF > 8' | wc -l)" = 3 ] || return 1
    [ "$(rcn "$p" CLUSTER NODES | awk '$3 ~ /slave/ && $3 !~ /fail/' | wc -l)" = 3 ] || return 1
  done
}
wait_cluster_settled() {
  local deadline=$((SECONDS + ${1:-30}))
  until cluster_settled; do
    [ $SECONDS -lt $deadline ] || fail "the Redis Cluster did not settle in ${1:-30} s: $(cluster_nodes)"
    sleep 0.2
  done
}
start_redis_cluster() {
  local p args=()
  for p in "${rc_ports[@]}"; do start_redis_node "$p"; args+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${args[@]}" --cluster-replicas 1 --cluster-yes >"$tmp/rc/create.log" 2>&1 ||
    fail "redis-cli --cluster create failed: $(tail -n 5 "$tmp/rc/create.log")"
  wait_cluster_settled 30
}
redis_cluster_url() { echo "redis-cluster://127.0.0.1:${rc_ports[0]},127.0.0.1:${rc_ports[1]},127.0.0.1:${rc_ports[2]}"; }
# cluster_docs FILE: every {db:*} value each master retains (its own keys only), one envelope a line.
cluster_docs() {
  : >"$1"
  local p keys
  for p in $(masters); do
    keys=$(rcn "$p" --scan --pattern '{db:*') || fail "SCAN on $p failed"
    [ -z "$keys" ] && continue
    # shellcheck disable=SC2001 # one GET a key, read by redis-cli from standard input
    echo "$keys" | sed 's/^/GET /' | rcn "$p" --raw | grep -v '^$' >>"$1"
  done
}
