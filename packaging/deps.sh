#!/usr/bin/env bash
# The one place that names every Debian package docsync needs to build, run, test and package.
# Installs the missing ones (as root, with apt-get); does nothing when all are present.
#   packaging/deps.sh          install what is missing
#   packaging/deps.sh --list   print the package names
set -euo pipefail

PACKAGES=(
  # build: extension
  postgresql-15 postgresql-server-dev-15 make
  # build: worker and gateway
  cmake g++ pkg-config libpq-dev rapidjson-dev libboost-dev libhiredis-dev libjwt-dev
  # tests: unit framework, fuzzing (clang + libFuzzer), a real Redis, process tools, JSON and script tools
  doctest-dev clang libclang-rt-14-dev redis-server procps util-linux jq python3
  # tests: a second JSON Patch implementation for the patch core's differential test (header only)
  nlohmann-json3-dev
  # tests: promtool checks the /metrics output and the alert rules (the service is not used)
  prometheus
  # tests and demo.sh --browser: the gateway in headless Chromium (tests/browser: node --test, and
  # puppeteer-core fetched by npm ci), tokens minted with openssl, HTTP with curl
  chromium nodejs npm openssl curl
  # benchmarks: peer plugins and tools
  postgresql-15-wal2json
  # packaging
  debhelper dpkg-dev fakeroot build-essential
)

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

# A name counts as present when its package is installed, or when an installed package provides it
# (a nodejs from another archive bundles npm and conflicts with Debian's).
provided=
installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' && return 0
  [ -n "$provided" ] || provided=$(dpkg-query -W -f='${Status}\t${Provides}\n' 2>/dev/null |
    sed -n 's/^install ok installed\t//p' | tr ',' '\n' | sed 's/(.*)//; s/[[:space:]]//g' | sort -u)
  grep -qxF "$1" <<<"$provided"
}

# postgresql-15 is also upgraded when older than 15.19, the first release with output_plugin_libraries.
missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done
pg_version=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
if [ -n "$pg_version" ] && dpkg --compare-versions "$pg_version" lt 15.19; then
  missing+=(postgresql-15 postgresql-server-dev-15 postgresql-client-15)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "docsync: missing Debian packages: ${missing[*]}" >&2
  echo "docsync: run as root, or install them with: apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "docsync: installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A mirror that stalls is given up on after 60 s and asked again, three times, rather than holding
# the run (apt's own default waits far longer on a silent connection).
apt_net=(-o Acquire::Retries=3 -o Acquire::http::Timeout=60 -o Acquire::https::Timeout=60)
apt-get "${apt_net[@]}" update -qq
apt-get "${apt_net[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
