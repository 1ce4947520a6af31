#!/usr/bin/env bash
# The main job on the embedded default: a throwaway cluster, the extension, a small shop schema with
# doc queries, the worker with the stdout sink and a scripted workload whose docs change as it runs.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
bash packaging/deps.sh
echo "docsync demo: the worker does not stream yet in this version, so there is no demo to run." >&2
exit 1
