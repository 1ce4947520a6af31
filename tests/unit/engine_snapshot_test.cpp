// pg_current_snapshot() parsing and the committed-xid visibility test (invariant 3, docs/design.md).
#include <doctest/doctest.h>

#include "executor/snapshot.hpp"

using docsync::parse_snapshot;

TEST_CASE("a snapshot sees committed transactions below xmax that were not running") {
    auto s = parse_snapshot("100:110:104,102");
    REQUIRE(s);
    CHECK(s->xmin == 100);
    CHECK(s->xmax == 110);
    CHECK(s->sees_committed(50));
    CHECK(s->sees_committed(101));
    CHECK_FALSE(s->sees_committed(102));
    CHECK_FALSE(s->sees_committed(104));
    CHECK(s->sees_committed(109));
    CHECK_FALSE(s->sees_committed(110));
    CHECK_FALSE(s->sees_committed(5000));
    auto empty = parse_snapshot("4294967396:4294967396:");
    REQUIRE(empty);
    CHECK(empty->sees_committed(4294967395ull));
    CHECK_FALSE(empty->sees_committed(4294967396ull));
}

TEST_CASE("malformed snapshots are refused") {
    CHECK_FALSE(parse_snapshot(""));
    CHECK_FALSE(parse_snapshot("1:2"));
    CHECK_FALSE(parse_snapshot("a:2:"));
    CHECK_FALSE(parse_snapshot("3:2:"));
    CHECK_FALSE(parse_snapshot("1:5:2,"));
    CHECK_FALSE(parse_snapshot("1:5:2,,3"));
    CHECK_FALSE(parse_snapshot("1:5:-2"));
}
