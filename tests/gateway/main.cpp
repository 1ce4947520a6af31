// The doctest entry point of the gateway's tests: docsync-gateway (the executable) against a real
// Redis, no PostgreSQL. Each case starts its own Redis and gateway on free ports, so the cases run
// beside one another and beside the unit tests.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>

int main(int argc, char** argv) {
    // As in the programs' main(): a write to a socket or pipe the peer closed is an error, not the end.
    std::signal(SIGPIPE, SIG_IGN);
    return doctest::Context(argc, argv).run();
}
