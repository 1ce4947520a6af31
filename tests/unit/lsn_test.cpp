// WAL position formatting and doc version ordering.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "common/lsn.hpp"

using namespace docsync;

TEST_CASE("LSNs print and parse as PostgreSQL writes pg_lsn") {
    CHECK(format_lsn(0) == "0/0");
    CHECK(format_lsn(0x16B3F28) == "0/16B3F28");
    CHECK(format_lsn((Lsn{0x16} << 32) | 0xB374D848) == "16/B374D848");
    CHECK(parse_lsn("16/B374D848") == ((Lsn{0x16} << 32) | 0xB374D848));
    CHECK(parse_lsn("0/16b3f28") == Lsn{0x16B3F28});
    CHECK_FALSE(parse_lsn("").has_value());
    CHECK_FALSE(parse_lsn("16B374D848").has_value());
    CHECK_FALSE(parse_lsn("/1").has_value());
    CHECK_FALSE(parse_lsn("1/").has_value());
    CHECK_FALSE(parse_lsn("1/G").has_value());
    CHECK_FALSE(parse_lsn("123456789/0").has_value());
}

TEST_CASE("a newer generation wins over a larger LSN") {
    CHECK(DocVersion{2, 10} > DocVersion{1, 1000});
    CHECK(DocVersion{1, 11} > DocVersion{1, 10});
    CHECK(DocVersion{1, 10} == DocVersion{1, 10});
}

TEST_CASE("failures of the environment are transient (08, 40, 53, 57, 58, lock and idle timeouts), the rest permanent") {
    for (auto s : {"08006", "40001", "40P01", "53300", "57014", "57P01", "57P03", "58030", "55P03", "25P03", ""})
        CHECK(sqlstate_is_transient(s));
    for (auto s : {"42601", "22012", "25006", "55000", "P0001", "XX000", "0800"}) CHECK_FALSE(sqlstate_is_transient(s));
}
