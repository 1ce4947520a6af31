// The doctest entry point of the integration test binary. These tests need a running server: the
// libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE) of a cluster from packaging/dev-cluster.sh.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
