#!/usr/bin/env bash
# Patches in the browser client (docs/patches.md), in headless Chromium:
# - The property test: the patch core's test vectors (build/dev/patch_vectors: random edits of random
#   docs, numbers at the edges, unicode; several seeds, 1000 versions each per mode) applied by
#   docsync-client.js in the page give every next version (tests/browser/patch_vectors.test.js).
# - End to end over WebSocket and SSE: a real docsync-gateway (started and restarted by the test) and
#   a redis-server into which docs and patches are published as the worker publishes them; the
#   page's handler holds the right doc after each patch, across a gateway restart, a patch message
#   the page loses and a version never published, and patches are really used
#   (tests/browser/patches_e2e.test.js).
# No PostgreSQL and no worker: Redis is written here. Logs stay in
# $DOCSYNC_BUILD_DIR/scenario-output/gateway_patches/. Needs what tests/scenarios/gateway_browser.sh
# needs (node, npm, Chromium; without Chromium the scenario is skipped, unless CI is set).
set -euo pipefail
test_name=gateway_patches
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=${DOCSYNC_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
build=${DOCSYNC_BUILD_DIR:-$top/build/dev}
# shellcheck source=lib/browser.bash
. "$here/lib/browser.bash"
gateway_bin=$build/docsync-gateway
vectors_bin=$build/patch_vectors
for bin in "$gateway_bin" "$vectors_bin"; do
  [ -x "$bin" ] || { echo "FAIL: $bin is not built" >&2; exit 1; }
done
out=$build/scenario-output/$test_name
rm -rf "$out"
mkdir -p "$out"

tmp=$(mktemp -d)
fail() {
  echo "FAIL: $*" >&2
  if [ -s "$tmp/gateway.log" ]; then echo "--- gateway log (tail)" >&2; tail -n 30 "$tmp/gateway.log" >&2; fi
  exit 1
}
# shellcheck source=lib/redis_server.bash
. "$here/lib/redis_server.bash"
cleanup() {
  stop_redis
  cp "$tmp/gateway.log" "$tmp/redis.log" "$out/" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

browser_npm_ci
start_redis
secret_file=$tmp/jwt-secret
(umask 077; head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$secret_file"; echo >>"$secret_file")

echo "the property test: patch vectors applied in Chromium"
PATCH_VECTORS=$vectors_bin SEEDS=${SEEDS:-1,2,3,4} COUNT=${COUNT:-1000} CHROMIUM=$chromium \
  node --test --test-reporter=spec "$browser_dir/patch_vectors.test.js" >"$tmp/vectors.log" 2>&1 ||
  { cat "$tmp/vectors.log" >&2; fail "the patch vectors in Chromium"; }
grep -E '^chromium: ' "$tmp/vectors.log"

for transport in ws sse; do
  echo "patches end to end over $transport"
  GATEWAY_BIN=$gateway_bin REDIS_PORT=$redis_port JWT_SECRET_FILE=$secret_file TRANSPORT=$transport \
    GATEWAY_LOG=$tmp/gateway.log CHROMIUM=$chromium \
    node --test --test-reporter=spec "$browser_dir/patches_e2e.test.js" >"$tmp/e2e.log" 2>&1 ||
    { cat "$tmp/e2e.log" >&2; fail "patches end to end over $transport"; }
  grep -E '^(ws|sse): ' "$tmp/e2e.log"
done
echo ok
