# shellcheck shell=bash
# A throwaway cluster of the test's own, for the scenarios that stop, copy, restore or replace its
# data directory: started with the extension installed and its environment exported before
# worker_env.bash (sourced here) works in it, and stopped at exit, also when the test fails.
# Sets `top` (the source tree) and `cluster` (its directory); ctl ARGS runs pg_ctl on it.
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
cluster=$("$top/packaging/dev-cluster.sh" start --no-install)
stop_cluster() { "$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true; }
trap stop_cluster EXIT
"$top/packaging/dev-cluster.sh" install "$cluster" >/dev/null
# shellcheck disable=SC1091
. "$cluster/cluster.env"
# shellcheck source=worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/worker_env.bash"
cleanup_hooks+=(stop_cluster)
ctl() { "$top/packaging/dev-cluster.sh" ctl "$cluster" "$@"; }
