// The executor's checks of what it receives and runs: doc JSON validity at any nesting depth, and
// the SELECT-only first keyword of stored doc and keys queries.
#include <doctest/doctest.h>

#include <string>

#include "executor/json_check.hpp"

using docsync::looks_like_select;
using docsync::valid_json;

TEST_CASE("valid_json accepts one JSON value and refuses anything else") {
    CHECK(valid_json(R"({"a": [1, 2.5e3, "x", null, true]})"));
    CHECK(valid_json(" 42 \n"));
    CHECK_FALSE(valid_json(R"({"a": 1} {"b": 2})"));
    CHECK_FALSE(valid_json("{'a': 1}"));
    CHECK_FALSE(valid_json("\"\xff\""));  // not UTF-8
    CHECK_FALSE(valid_json(""));
}

TEST_CASE("a doc nested 400 000 levels deep is checked without exhausting the stack") {
    // A stored query returned this text and the recursive reader overflowed the worker's stack.
    std::string deep = std::string(400000, '[') + std::string(400000, ']');
    CHECK(valid_json(deep));
    CHECK_FALSE(valid_json(deep.substr(0, deep.size() - 1)));
    std::string objects;
    for (int i = 0; i < 200000; ++i) objects += "{\"a\":";
    objects += "1" + std::string(200000, '}');
    CHECK(valid_json(objects));
}

TEST_CASE("looks_like_select reads the first keyword past white space, comments and parentheses") {
    for (const char* sql : {"SELECT 1", "  select 1", "WITH x AS (SELECT 1) SELECT * FROM x", "VALUES (1)",
                            "TABLE t", "((SELECT 1))", "-- note\nSELECT 1", "/* a /* nested */ comment */ SELECT 1",
                            "\tSeLeCt 1"}) {
        CAPTURE(sql);
        CHECK(looks_like_select(sql));
    }
    for (const char* sql : {"COPY (SELECT 1) TO STDOUT", "DELETE FROM t RETURNING 1", "SET ROLE postgres",
                            "/* SELECT */ COPY t TO STDOUT", "-- SELECT\nCALL p()", "", "/* unterminated SELECT 1",
                            "SELECTED", "EXPLAIN SELECT 1", "DO $$BEGIN END$$"}) {
        CAPTURE(sql);
        CHECK_FALSE(looks_like_select(sql));
    }
}
