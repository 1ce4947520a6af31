#!/usr/bin/env bash
# Runs every docsync test on this machine, as root or as a user who can install nothing new:
#   packaging/run-tests.sh          the CI suite: extension + worker built with ASan+UBSan, a throwaway
#                                   cluster, `make installcheck` (regress/), `ctest` (unit,
#                                   integration and scenario), each fuzz target for a short bounded time
#   packaging/run-tests.sh --full   also the long suites: the `long` ctest scripts (the long fault
#                                   runs, the Debian package build), each fuzz target for 600 s, then
#                                   packaging/full-suites.sh: the regress suite with the server under
#                                   valgrind and a ThreadSanitizer build running the unit and C++
#                                   integration tests (about an hour and a half in all)
# Installs the Debian packages it needs (packaging/deps.sh), stops the cluster it started even when a
# test fails, and exits non-zero on any failure.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top" || exit 1
full=0
case "${1:-}" in
  "") ;;
  --full) full=1 ;;
  *) echo "usage: packaging/run-tests.sh [--full]" >&2; exit 2 ;;
esac
export DOCSYNC_TEST_FULL=$full
jobs=$(nproc)
build=${DOCSYNC_BUILD_DIR:-$top/build/test}
start=$(date +%s)
failed=()

step() { printf '\n=== %s (at %d s)\n' "$*" $(($(date +%s) - start)); }

step "Debian packages"
bash packaging/deps.sh || exit 1
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

# The browser tests' npm packages (tests/browser/install.sh), fetched while the tree builds: the
# gateway's scenarios then start with them in place, and a registry that stalls is seen (and
# retried) here, not inside a scenario's timeout. A failure is shown; the scenarios try again.
browser_log=$(mktemp)
bash tests/browser/install.sh >"$browser_log" 2>&1 &
browser_pid=$!

step "build: extension (PGXS, warnings are errors)"
make -s clean >/dev/null 2>&1
make -s PG_CONFIG="$PG_CONFIG" WERROR=yes || exit 1

step "build: worker and tests (CMake, clang, ASan+UBSan, lock annotations checked)"
mkdir -p "$(dirname "$build")"
# -O0 -g1: sanitizer reports keep their stack traces, and the build (most of the suite's CPU on a
# 2-core machine) takes well under half the time of -O1; the tests mostly wait on the server.
# clang: it compiles this tree in half gcc's CPU time (2m44 against 5m49 on 2 cores), and its
# thread-safety analysis checks the lock annotations in the same compile (a violation fails the
# build). The packages' default build (gcc) stays covered by the Debian package scenario (--full)
# and by every developer build.
CC=clang CXX=clang++ cmake -S . -B "$build" -DDOCSYNC_SANITIZE=ON -DDOCSYNC_WERROR=ON -DDOCSYNC_THREAD_SAFETY=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" >"$build.cmake.log" 2>&1 ||
  { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j "$jobs" || exit 1

step "throwaway cluster"
cluster=$(packaging/dev-cluster.sh start) || exit 1
trap 'packaging/dev-cluster.sh stop "$cluster"' EXIT
trap 'exit 130' INT TERM
# shellcheck disable=SC1091
. "$cluster/cluster.env"
echo "cluster in $cluster, port $PGPORT"

step "pg_regress (make installcheck)"
if ! make installcheck PG_CONFIG="$PG_CONFIG"; then
  failed+=(regress)
  [ -f regress/regression.diffs ] && head -n 200 regress/regression.diffs
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The fuzz targets build with clang beside the tests, at the lowest CPU priority: most tests wait on
# the server, and the build takes only the CPU they leave (on 2 cores it is two minutes of CPU).
# The CI suite's short runs follow the build in the same way, one target at a time, while the tests
# go on; --full runs each target for 600 s after the tests, $jobs at a time.
fuzz_build="$build-fuzz"
fuzz_pid=
fuzz_seconds=$([ $full -eq 1 ] && echo 600 || echo 6)
# run_fuzz TARGET: runs one target on a copy of its corpus; its verdict goes to $fuzz_build/NAME.verdict.
run_fuzz() {
  local target=$1 name=${1##*/fuzz-} corpus
  corpus=$(mktemp -d)
  [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/"
  if "$target" -max_total_time="$fuzz_seconds" -print_final_stats=0 "$corpus" >"$fuzz_build/$name.log" 2>&1; then
    echo "ok ($(grep -c . "$fuzz_build/$name.log") log lines)" >"$fuzz_build/$name.verdict"
  else
    echo FAILED >"$fuzz_build/$name.verdict"
  fi
  rm -rf "$corpus"
}
if ls tests/fuzz/*.cpp >/dev/null 2>&1; then
  rm -f "$fuzz_build".built
  (renice -n 19 "$BASHPID" >/dev/null
   CC=clang CXX=clang++ cmake -S . -B "$fuzz_build" -DDOCSYNC_FUZZ=ON -DDOCSYNC_TESTS=OFF \
     >"$fuzz_build.cmake.log" 2>&1 &&
   cmake --build "$fuzz_build" -j "$jobs" \
     --target $(for f in tests/fuzz/*.cpp; do f=${f##*/}; echo "fuzz-${f%.cpp}"; done) \
     >"$fuzz_build.build.log" 2>&1 &&
   touch "$fuzz_build".built || exit 1
   if [ $full -eq 0 ]; then
     for target in "$fuzz_build"/fuzz-*; do run_fuzz "$target"; done
   fi) &
  fuzz_pid=$!
fi

step "browser tests' npm packages"
wait "$browser_pid" || echo "(the gateway's scenarios will try again, and fail if they cannot)" >>"$browser_log"
cat "$browser_log"
rm -f "$browser_log"

step "ctest"
# One run for every label, one test more than the cores at once: the tests that must run alone
# (those that count a worker's queries or bound a time a neighbour's CPU could stretch) are
# RUN_SERIAL; the integration tests and the scenarios that share the cluster above take turns
# (RESOURCE_LOCK); the rest (the unit tests, the gateway's, the scenarios with a cluster of their
# own) fill the slots. Most scenarios spend their time waiting on a server, a timeout or a fault, so
# a third slot keeps both cores busy. See CMakeLists.txt.
ctest_args=(--test-dir "$build" --output-on-failure --timeout 600 -j "$((jobs + 1))")
[ $full -eq 1 ] || ctest_args+=(--label-exclude long)
ctest "${ctest_args[@]}" -O "$build/ctest.log" || failed+=(ctest)

if [ -n "$fuzz_pid" ]; then
  step "fuzz targets (clang, libFuzzer, ${fuzz_seconds}s each)"
  if wait "$fuzz_pid" && [ -f "$fuzz_build".built ]; then
    if [ $full -eq 1 ]; then
      running=0
      for target in "$fuzz_build"/fuzz-*; do
        run_fuzz "$target" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
      done
      wait
    fi
    for target in "$fuzz_build"/fuzz-*; do
      name=${target##*/fuzz-}
      echo "fuzz $name: $(cat "$fuzz_build/$name.verdict" 2>/dev/null || echo 'FAILED (no verdict)')"
      if ! grep -q '^ok' "$fuzz_build/$name.verdict" 2>/dev/null; then
        tail -n 40 "$fuzz_build/$name.log" 2>/dev/null; failed+=("fuzz-$name")
      fi
    done
  else
    cat "$fuzz_build.cmake.log" "$fuzz_build.build.log" 2>/dev/null | tail -n 40
    failed+=(fuzz-build)
  fi
fi

if [ $full -eq 1 ]; then
  step "long suites (packaging/full-suites.sh: valgrind, ThreadSanitizer)"
  packaging/full-suites.sh "$build" || failed+=(long-suites)
fi

step "summary"
# The ten slowest tests of this run, from ctest's own lines ("  12/340 Test  #7: NAME ....  Passed  1.23 sec").
echo "ten slowest tests:"
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: (.*[^ ]) \.{2,}.* ([0-9]+\.[0-9]+) sec$/\2\t\1/p' \
  "$build/ctest.log" 2>/dev/null | sort -rn | head -n 10 |
  while IFS=$'\t' read -r seconds name; do printf '  %8s s  %s\n' "$seconds" "$name"; done
# The time of the tests that ran alone (RUN_SERIAL): both cores wait on one test for all of it.
ctest --test-dir "$build" --show-only=json-v1 2>/dev/null |
  jq -r '.tests[] | select(any(.properties[]?; .name == "RUN_SERIAL" and .value == true)) | .name' \
  >"$build/serial-tests.txt" 2>/dev/null
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: (.*[^ ]) \.{2,}.* ([0-9]+\.[0-9]+) sec$/\1\t\2/p' "$build/ctest.log" 2>/dev/null |
  awk -F'\t' -v list="$build/serial-tests.txt" 'BEGIN { while ((getline line < list) > 0) serial[line] = 1 }
    ($1 in serial) { n++; t += $2 } END { printf "serial tests (RUN_SERIAL, run alone): %d, %.0f s\n", n, t }'
echo "wall time: $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all suites passed"
