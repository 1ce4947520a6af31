#!/usr/bin/env bash
# The slow suites, run by `packaging/run-tests.sh --full` after the CI suite (which with --full has
# already run the long ctest scripts, tests/scenarios/*_long.sh: the long fault runs and the Debian
# package build, so they are not repeated here):
#   packaging/full-suites.sh [BUILD-DIR]
#   1. valgrind: the extension's regress suite once with the server under valgrind memcheck
#      (packaging/valgrind-regress.sh); memcheck errors in the docsync library fail it;
#   2. tsan: the worker and the gateway built with ThreadSanitizer (clang, -DDOCSYNC_TSAN=ON, in
#      BUILD-DIR-tsan, default build/test-tsan) running the unit tests, the C++ integration tests
#      (stream, executor, the engine on the real executor, the Redis sink) against a throwaway
#      cluster and the gateway's tests (the instrumented docsync-gateway exits 66 on a report), then
#      the instrumented docsync-worker through worker_hostile_sessions.sh and worker_hostile_names.sh
#      (a worker with a report exits 66 instead of 0 on SIGTERM); any ThreadSanitizer report fails it.
# DOCSYNC_FULL_SUITES=valgrind or =tsan runs one of them. Prints each suite's time; exits non-zero
# when one fails.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top" || exit 1
build=${1:-$top/build/test}
tsan_build="$build-tsan"
suites=${DOCSYNC_FULL_SUITES:-valgrind tsan}
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
failed=()

run_valgrind() {
  packaging/valgrind-regress.sh
}

run_tsan() {
  local cluster rc=0 t
  # clang: GCC refuses std::atomic_thread_fence (the status board's seqlock) under -fsanitize=thread.
  CC=clang CXX=clang++ cmake -S . -B "$tsan_build" -DDOCSYNC_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >"$tsan_build.cmake.log" 2>&1 ||
    { cat "$tsan_build.cmake.log"; return 1; }
  cmake --build "$tsan_build" -j "$(nproc)" --target docsync-worker docsync-unit-tests docsync-integration-tests \
    docsync-gateway docsync-gateway-tests \
    >"$tsan_build.build.log" 2>&1 || { tail -n 40 "$tsan_build.build.log"; return 1; }
  cluster=$(packaging/dev-cluster.sh start) || return 1
  # shellcheck disable=SC1091
  (. "$cluster/cluster.env"
   export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 history_size=4"
   for t in docsync-unit-tests docsync-integration-tests docsync-gateway-tests; do
     if "$tsan_build/$t" >"$tsan_build/$t.log" 2>&1; then
       echo "tsan $t: ok ($(grep -o 'test cases: *[0-9]*' "$tsan_build/$t.log" | tail -n 1))"
     else
       echo "tsan $t: FAILED ($(grep -c '^WARNING: ThreadSanitizer' "$tsan_build/$t.log") reports; log $tsan_build/$t.log)"
       grep -A 30 '^WARNING: ThreadSanitizer' "$tsan_build/$t.log" | head -n 120
       grep -B 2 -A 8 'ERROR:\|FAILED!' "$tsan_build/$t.log" | head -n 40
       rc=1
     fi
   done
   for t in worker_hostile_sessions worker_hostile_names; do
     if DOCSYNC_WORKER="$tsan_build/docsync-worker" bash "tests/scenarios/$t.sh" >"$tsan_build/$t.log" 2>&1; then
       echo "tsan $t: ok"
     else
       echo "tsan $t: FAILED (log $tsan_build/$t.log)"; tail -n 60 "$tsan_build/$t.log"; rc=1
     fi
   done
   exit $rc) || rc=1
  packaging/dev-cluster.sh stop "$cluster"
  return $rc
}

for suite in $suites; do
  printf '\n=== full suite: %s\n' "$suite"
  started=$(date +%s)
  if "run_$suite"; then result=passed; else result=FAILED; failed+=("$suite"); fi
  echo "full suite $suite: $result in $(( $(date +%s) - started ))s"
done
[ ${#failed[@]} -eq 0 ] || { echo "full suites FAILED: ${failed[*]}"; exit 1; }
