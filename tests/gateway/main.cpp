// The doctest entry point of the gateway's tests: docsync-gateway (the executable) against a real
// Redis, no PostgreSQL. Each case starts its own Redis and gateway on free ports, so the cases run
// beside one another and beside the unit tests.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
