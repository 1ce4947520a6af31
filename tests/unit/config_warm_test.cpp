// The --warm channels checked against the definitions at start: each must name a defined doc query
// and give one value per param, or the worker refuses to start with the fix.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/warm.hpp"

using namespace docsync;

namespace {

Definitions two_queries() {
    Definitions d;
    DocQuery order;
    order.name = "order";
    order.params = {"order_id"};
    DocQuery line;
    line.name = "line";
    line.params = {"order_id", "line_no"};
    d.queries = {order, line};
    return d;
}

}  // namespace

TEST_CASE("channels of defined doc queries with one value per param pass") {
    CHECK_NOTHROW(check_warm({}, two_queries()));
    CHECK_NOTHROW(check_warm({}, Definitions{}));
    CHECK_NOTHROW(check_warm({"db:order:42", "db:line:42:1", "db:order:%00"}, two_queries()));
}

TEST_CASE("a channel naming no defined doc query lists the defined ones") {
    CHECK_THROWS_WITH_AS(check_warm({"db:order:1", "db:ordr:1"}, two_queries()),
                         "--warm \"db:ordr:1\": no doc query is named \"ordr\" (defined: order, line); fix the channel: "
                         "SELECT docsync.channel('<query>', '<value>') spells one",
                         Error);
    CHECK_THROWS_WITH_AS(check_warm({"db:order:1"}, Definitions{}),
                         "--warm \"db:order:1\": no doc query is named \"order\" (none is defined); fix the channel: "
                         "SELECT docsync.channel('<query>', '<value>') spells one",
                         Error);
}

TEST_CASE("a channel with the wrong number of values names the query's params") {
    CHECK_THROWS_WITH_AS(check_warm({"db:line:42"}, two_queries()),
                         "--warm \"db:line:42\": doc query \"line\" takes 2 value(s) (order_id, line_no), the channel "
                         "gives 1; fix the channel: SELECT docsync.channel('line', …) spells it",
                         Error);
    CHECK_THROWS_WITH_AS(check_warm({"db:order:1:2"}, two_queries()),
                         doctest::Contains("doc query \"order\" takes 1 value(s) (order_id), the channel gives 2"), Error);
}

TEST_CASE("a malformed channel is refused") {
    // The settings reader refuses these already; the check does not rely on it.
    CHECK_THROWS_WITH_AS(check_warm({"db:order:%zz"}, two_queries()), "--warm \"db:order:%zz\" is not a doc channel",
                         Error);
    CHECK_THROWS_WITH_AS(check_warm({"order:1"}, two_queries()), "--warm \"order:1\" is not a doc channel", Error);
}
