# The browser tests' tools, for the gateway's scenarios: Chromium (skips the scenario when it is
# missing, unless CI is set: then fails), node and npm, and tests/browser/node_modules filled by
# tests/browser/install.sh (`npm ci` once per package-lock.json, from the npm registry; it downloads
# no browser). Sourced after the caller has set `top`; sets browser_dir and chromium.
# browser_npm_ci needs `fail`.
browser_dir=$top/tests/browser
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: no Chromium at $chromium (apt-get install chromium, or set CHROMIUM), and CI is set" >&2
    exit 1
  fi
  echo "SKIP: no Chromium at $chromium (apt-get install chromium, or set CHROMIUM); with CI set this fails"
  exit 0
fi
for tool in node npm openssl curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed" >&2; exit 1; }
done

# browser_npm_ci: tests/browser/node_modules as package-lock.json names it (tests/browser/install.sh:
# once per lock, one install at a time, each attempt bounded and retried).
browser_npm_ci() {
  bash "$browser_dir/install.sh" || fail "tests/browser/install.sh failed (above)"
}
