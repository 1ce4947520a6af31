// The doctest entry point of the integration test binary. These tests need a running server: the
// libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE) of a cluster from packaging/dev-cluster.sh.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>

int main(int argc, char** argv) {
    // As in the programs' main(): a write to a socket or pipe the peer closed is an error, not the end.
    std::signal(SIGPIPE, SIG_IGN);
    return doctest::Context(argc, argv).run();
}
