// A portable install's runner returns each row as its record's text (record_out); the worker reads
// the fields back as record_in does (executor/runner.hpp).
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "executor/runner.hpp"

using namespace docsync;
using Fields = std::vector<std::optional<std::string>>;

TEST_CASE("a record's text reads back field by field: NULL, empty, quoted, escaped") {
    CHECK(runner::record_fields("(1,abc)") == Fields{"1", "abc"});
    CHECK(runner::record_fields("(,)") == Fields{std::nullopt, std::nullopt});
    CHECK(runner::record_fields("(\"\",)") == Fields{"", std::nullopt});
    CHECK(runner::record_fields("()") == Fields{std::nullopt});
    // record_out doubles every quote and backslash, and quotes a value holding one, a comma, a
    // parenthesis or whitespace
    CHECK(runner::record_fields(R"x(("{""a"": ""x\\y""}",12))x") == Fields{R"({"a": "x\y"})", "12"});
    CHECK(runner::record_fields(R"x(("a, (b)",""""))x") == Fields{"a, (b)", "\""});
    CHECK(runner::record_fields(R"x(("line
two",x))x") == Fields{"line\ntwo", "x"});
    for (const char* bad : {"", "(", "1,2", "(\"a)", "(a)b", "(a\\"})
        CHECK_FALSE(runner::record_fields(bad));
}

TEST_CASE("a runner's params are the statement and one text[] literal of its values") {
    auto params = runner::call_params("SELECT $1, $2", {std::string("a\"b\\c"), std::nullopt});
    REQUIRE(params.size() == 2);
    CHECK(params[0] == std::optional<std::string>("SELECT $1, $2"));
    CHECK(params[1] == std::optional<std::string>(R"({"a\"b\\c",NULL})"));
    CHECK(runner::call_params("SELECT 1", {})[1] == std::optional<std::string>("{}"));
    CHECK(runner::call("docsync_reader_a\"b") ==
          R"(SELECT docsync_row FROM docsync_run."docsync_reader_a""b"($1, $2::pg_catalog.text[]) AS docsync_row)");
}
