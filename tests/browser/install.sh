#!/usr/bin/env bash
# Fills tests/browser/node_modules as package-lock.json names it (`npm ci`, from the npm registry;
# it downloads no browser), once per package-lock.json: a stamp of the lock's checksum marks a
# finished install. One install at a time (flock): the gateway's scenarios may call it together.
# Each attempt is bounded (a fetch that stalls is retried, an attempt that stalls is killed), and a
# failed attempt is tried again up to three times, so that a registry that stalls for a while costs
# minutes, not the test's whole timeout. Output: one line, or the last attempt's log on failure.
#   tests/browser/install.sh        (packaging/run-tests.sh runs it before the build's end)
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stamp=$dir/node_modules/.docsync-lock-sum
attempts=${DOCSYNC_NPM_ATTEMPTS:-3}
attempt_seconds=${DOCSYNC_NPM_ATTEMPT_SECONDS:-120}
for tool in node npm flock timeout; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool is not installed (bash packaging/deps.sh installs what the tests need)" >&2; exit 1; }
done

exec 9>"$dir/.install.lock"
flock 9
lock_sum=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$lock_sum" ]; then
  echo "tests/browser/node_modules: current"
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for attempt in $(seq 1 "$attempts"); do
  start=$(date +%s)
  if timeout --kill-after=10 "$attempt_seconds" npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error \
      --fetch-timeout=30000 --fetch-retries=3 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=20000 \
      >"$log" 2>&1; then
    echo "$lock_sum" >"$stamp"
    echo "tests/browser/node_modules: npm ci took $(($(date +%s) - start)) s (attempt $attempt of $attempts)"
    exit 0
  else
    code=$?
  fi
  if [ $code -eq 124 ] || [ $code -eq 137 ]; then
    echo "npm ci: attempt $attempt of $attempts stalled for ${attempt_seconds} s and was stopped" >&2
  else
    echo "npm ci: attempt $attempt of $attempts failed (exit $code) after $(($(date +%s) - start)) s" >&2
  fi
done
tail -n 20 "$log" >&2
echo "FAIL: npm ci --prefix tests/browser did not finish in $attempts attempts (the last one's log is" \
  "above). Check that this machine reaches the npm registry ($(npm config get registry)), or set npm's" \
  "registry to a mirror that it reaches, then run tests/browser/install.sh again." >&2
exit 1
