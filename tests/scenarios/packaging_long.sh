#!/usr/bin/env bash
# The packages and `make install`: builds both Debian packages from a copy of the tree with
# dpkg-buildpackage -b -us -uc, checks their contents, installs them into a throwaway root with
# dpkg -x and runs the installed worker; then checks that `make install` honours DESTDIR and PREFIX.
set -euo pipefail
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -qE "$2" <<<"$1" || fail "$3"; }

echo "--- dpkg-buildpackage (a few minutes)"
"$top/packaging/build-debs.sh" "$tmp/debs" >/dev/null
ext=$(ls "$tmp"/debs/postgresql-15-docsync_*.deb)
wrk=$(ls "$tmp"/debs/docsync-worker_*.deb)
gwy=$(ls "$tmp"/debs/docsync-gateway_*.deb)

echo "--- postgresql-15-docsync contents"
contents=$(dpkg-deb -c "$ext")
has "$contents" "\./usr/lib/postgresql/15/lib/docsync\.so$" "extension library missing"
has "$contents" "\./usr/share/postgresql/15/extension/docsync\.control$" "control file missing"
has "$contents" "\./usr/share/postgresql/15/extension/docsync--0\.2\.sql$" "install script missing"
has "$contents" "\./usr/share/postgresql/15/extension/docsync--0\.1--0\.2\.sql$" "update script from 0.1 missing"
has "$contents" "\./usr/share/postgresql/15/extension/docsync--0\.1\.sql$" "install script of 0.1 missing"
! grep -q 'docsync-worker' <<<"$contents" || fail "the extension package holds the worker"
has "$(dpkg-deb -f "$ext" Depends)" "postgresql-15 \(>= 15\.19\)" "extension does not depend on postgresql-15 >= 15.19"

echo "--- docsync-worker contents"
contents=$(dpkg-deb -c "$wrk")
has "$contents" "^-rwxr-xr-x .* \./usr/bin/docsync-worker$" "worker binary missing or not executable"
has "$contents" "\./lib/systemd/system/docsync-worker\.service$" "systemd unit missing"
has "$contents" "\./usr/lib/sysusers\.d/docsync-worker\.conf$" "sysusers file missing"
has "$contents" "\./etc/default/docsync-worker$" "environment file missing"
has "$contents" "\./usr/share/doc/docsync-worker/examples/docsync\.json\.example$" "sample config missing"
! grep -q 'docsync\.so' <<<"$contents" || fail "the worker package holds the extension"
dpkg-deb -e "$wrk" "$tmp/control"
grep -q 'systemd-sysusers' "$tmp/control/postinst" || fail "postinst does not create the docsync user"
grep -q '^/etc/default/docsync-worker$' "$tmp/control/conffiles" || fail "/etc/default/docsync-worker is not a conffile"

echo "--- docsync-gateway contents"
contents=$(dpkg-deb -c "$gwy")
has "$contents" "^-rwxr-xr-x .* \./usr/bin/docsync-gateway$" "gateway binary missing or not executable"
has "$contents" "\./lib/systemd/system/docsync-gateway\.service$" "gateway systemd unit missing"
has "$contents" "\./usr/lib/sysusers\.d/docsync-gateway\.conf$" "gateway sysusers file missing"
has "$contents" "\./etc/default/docsync-gateway$" "gateway environment file missing"
has "$contents" "\./usr/share/doc/docsync-gateway/examples/docsync-gateway\.json\.example$" "gateway sample config missing"
! grep -qE 'docsync-worker|docsync\.so' <<<"$contents" || fail "the gateway package holds the worker or the extension"
grep -q 'docsync-gateway' <<<"$(dpkg-deb -c "$wrk")" && fail "the worker package holds the gateway"
depends=$(dpkg-deb -f "$gwy" Depends)
has "$depends" "libjwt" "the gateway does not depend on libjwt"
! grep -qE 'libpq|postgresql' <<<"$depends" || fail "the gateway depends on PostgreSQL: $depends"
rm -rf "$tmp/control"
dpkg-deb -e "$gwy" "$tmp/control"
grep -q 'systemd-sysusers' "$tmp/control/postinst" || fail "postinst does not create the docsync-gateway user"
grep -q '^/etc/default/docsync-gateway$' "$tmp/control/conffiles" || fail "/etc/default/docsync-gateway is not a conffile"

echo "--- installed into a throwaway root"
root=$tmp/root
dpkg -x "$ext" "$root"
dpkg -x "$wrk" "$root"
unit=$root/lib/systemd/system/docsync-worker.service
grep -qx 'User=docsync' "$unit" || fail "unit does not run as docsync"
grep -qx 'RuntimeDirectory=docsync' "$unit" || fail "unit has no RuntimeDirectory"
grep -qx 'RuntimeDirectoryPreserve=yes' "$unit" || fail "unit lets systemd empty /run/docsync on a stop or restart"
grep -qx 'EnvironmentFile=-/etc/default/docsync-worker' "$unit" || fail "unit has no EnvironmentFile"
grep -q '^ExecStart=/usr/bin/docsync-worker --config /etc/docsync/docsync.json --status-dir /run/docsync$' "$unit" ||
  fail "unit ExecStart is not the worker with --config and --status-dir /run/docsync"
grep -q '^u docsync ' "$root/usr/lib/sysusers.d/docsync-worker.conf" || fail "sysusers does not declare docsync"
[ "$("$root/usr/bin/docsync-worker" --version)" = 'docsync-worker 0.1.0' ] || fail "--version"
grep -q -- '--max-retained-wal SIZE' <<<"$("$root/usr/bin/docsync-worker" --help)" || fail "--help"
set +e
err=$("$root/usr/bin/docsync-worker" --config "$root/usr/share/doc/docsync-worker/examples/docsync.json.example" \
  --max-retained-wal 1XB 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 2 ] || fail "invalid setting exited $rc, not 2"
[ "$err" = 'docsync-worker: --max-retained-wal "1XB": unknown size unit "XB"; use B, kB, MB, GB or TB, e.g. 1GB or 512kB' ] ||
  fail "unexpected error line: $err"

dpkg -x "$gwy" "$root"
gunit=$root/lib/systemd/system/docsync-gateway.service
grep -qx 'User=docsync-gateway' "$gunit" || fail "gateway unit does not run as docsync-gateway"
grep -qx 'EnvironmentFile=-/etc/default/docsync-gateway' "$gunit" || fail "gateway unit has no EnvironmentFile"
grep -qx 'ExecStart=/usr/bin/docsync-gateway --config /etc/docsync/gateway.json' "$gunit" || fail "gateway unit ExecStart"
grep -qx 'LimitNOFILE=65536' "$gunit" || fail "gateway unit LimitNOFILE"
! grep -qi 'postgresql' <<<"$(grep -E '^(After|Wants|Requires)=' "$gunit")" || fail "the gateway unit waits for PostgreSQL"
grep -q '^u docsync-gateway ' "$root/usr/lib/sysusers.d/docsync-gateway.conf" || fail "sysusers does not declare docsync-gateway"
[ "$("$root/usr/bin/docsync-gateway" --version)" = 'docsync-gateway 0.1.0' ] || fail "gateway --version"
set +e
err=$("$root/usr/bin/docsync-gateway" --config "$root/usr/share/doc/docsync-gateway/examples/docsync-gateway.json.example" 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 2 ] || fail "the sample gateway config without its key file exited $rc, not 2"
grep -q '/etc/docsync/gateway.key' <<<"$err" || fail "unexpected error line: $err"
openssl rand -hex 32 >"$tmp/gateway.key"
sed -e "s|/etc/docsync/gateway.key|$tmp/gateway.key|" -e 's|127.0.0.1:8080|127.0.0.1:0|' \
  "$root/usr/share/doc/docsync-gateway/examples/docsync-gateway.json.example" >"$tmp/gateway.json"
"$root/usr/bin/docsync-gateway" --config "$tmp/gateway.json" --log-format text 2>"$tmp/gateway.log" &
gpid=$!
for _ in $(seq 1 50); do grep -q 'listening on' "$tmp/gateway.log" && break; sleep 0.1; done
kill -TERM $gpid
wait $gpid || fail "the installed gateway with the sample config did not exit 0 on SIGTERM: $(cat "$tmp/gateway.log")"
grep -q 'listening on 127.0.0.1:' "$tmp/gateway.log" || fail "the installed gateway did not start: $(cat "$tmp/gateway.log")"

echo "--- make install DESTDIR=… PREFIX=…"
mkdir "$tmp/src"
tar -C "$top" --exclude=./build --exclude=./.git --exclude=./.dev-cluster -cf - . | tar -C "$tmp/src" -xf -
make -s -C "$tmp/src" PG_CONFIG="$PG_CONFIG" >/dev/null
make -s -C "$tmp/src" PG_CONFIG="$PG_CONFIG" install DESTDIR="$tmp/dest" PREFIX=/opt/docsync >/dev/null
[ -x "$tmp/dest/opt/docsync/bin/docsync-worker" ] || fail "make install did not put the worker in PREFIX/bin"
[ -f "$tmp/dest$("$PG_CONFIG" --pkglibdir)/docsync.so" ] || fail "make install did not install the extension library"
[ -f "$tmp/dest$("$PG_CONFIG" --sharedir)/extension/docsync.control" ] || fail "make install did not install the control file"
[ "$("$tmp/dest/opt/docsync/bin/docsync-worker" --version)" = 'docsync-worker 0.1.0' ] || fail "installed worker --version"
[ -x "$tmp/dest/opt/docsync/bin/docsync-gateway" ] || fail "make install did not put the gateway in PREFIX/bin"
make -s -C "$tmp/src" PG_CONFIG="$PG_CONFIG" install WORKER=no DESTDIR="$tmp/dest2" >/dev/null
[ ! -e "$tmp/dest2/usr/local/bin/docsync-worker" ] || fail "WORKER=no installed the worker"
[ -f "$tmp/dest2$("$PG_CONFIG" --pkglibdir)/docsync.so" ] || fail "WORKER=no did not install the extension"
echo "packaging: ok"
