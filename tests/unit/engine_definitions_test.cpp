// parse_definitions (contract B, docs/design.md), plugin_tables (contract A) and parse_channel.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "engine/channel.hpp"
#include "engine/definitions.hpp"

using namespace docsync;

namespace {

const char* kContractB = R"({"generation": 7,
 "queries": [{"name": "order", "sql": "SELECT 1 WHERE $1::int > 0", "params": ["order_id"],
              "search_path": "public"}],
 "watches": [{"query": "order", "relid": 16384, "schema": "public", "table": "orders",
              "columns": [{"name": "id", "attnum": 1}],
              "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null},
             {"query": "order", "relid": 16400, "schema": "public", "table": "products",
              "columns": [], "keys_sql": "SELECT DISTINCT order_id FROM order_items WHERE product_id = $1",
              "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false, "read_columns": null},
             {"query": "order", "relid": 16390, "schema": "public", "table": "order_items",
              "columns": [{"name": "order_id", "attnum": 3}],
              "keys_sql": null, "keys_args": [], "allow_broadcast": true, "broadcast": false, "read_columns": null}]})";

std::string error_of(const std::string& json) {
    try {
        parse_definitions(json);
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("contract B's document parses into queries and watches") {
    Definitions d = parse_definitions(kContractB);
    CHECK(d.generation == 7);
    REQUIRE(d.queries.size() == 1);
    CHECK(d.queries[0].name == "order");
    CHECK(d.queries[0].params == std::vector<std::string>{"order_id"});
    CHECK(d.queries[0].search_path == "public");
    REQUIRE(d.watches.size() == 3);
    CHECK(d.watches[0].relid == 16384);
    CHECK_FALSE(d.watches[0].reverse());
    CHECK(d.watches[0].columns.at(0).attnum == 1);
    CHECK(d.watches[1].reverse());
    CHECK(d.watches[1].keys_args.at(0).name == "id");
    CHECK(d.watches[2].allow_broadcast);
    CHECK(d.find_query("order") == &d.queries[0]);
    CHECK(d.find_query("nope") == nullptr);
}

TEST_CASE("a query's refusal and fingerprint are read when present, empty when null or absent") {
    Definitions d = parse_definitions(R"({"generation": 1, "queries": [
        {"name": "a", "sql": "SELECT 1", "params": [], "search_path": null,
         "refused": "its definer alice no longer exists", "fingerprint": "0cc175b9c0f1b6a831c399e269772661"},
        {"name": "b", "sql": "SELECT 1", "params": [], "search_path": null, "refused": null, "fingerprint": null},
        {"name": "c", "sql": "SELECT 1", "params": [], "search_path": null}], "watches": []})");
    CHECK(d.queries[0].refused == "its definer alice no longer exists");
    CHECK(d.queries[0].fingerprint == "0cc175b9c0f1b6a831c399e269772661");
    CHECK(d.queries[1].refused.empty());
    CHECK(d.queries[2].fingerprint.empty());
    CHECK(error_of(R"({"generation": 1, "queries": [{"name": "a", "sql": "SELECT 1", "params": [],
        "search_path": null, "refused": 1}], "watches": []})").find("\"refused\" must be a string or null") !=
          std::string::npos);
    // Definitions nested absurdly deep are an error, not a stack overflow.
    CHECK(error_of("{\"generation\": " + std::string(100000, '[') + std::string(100000, ']') + "}")
              .find("\"generation\" must be") != std::string::npos);
}

TEST_CASE("the reader roles a query and a keys query run as are read when present, empty otherwise") {
    Definitions d = parse_definitions(R"J({"generation": 1, "queries": [
        {"name": "a", "sql": "SELECT to_jsonb($1::int)", "params": ["id"], "search_path": "app, pg_temp",
         "reader_role": "docsync_reader_alice"},
        {"name": "b", "sql": "SELECT 1", "params": [], "search_path": null, "reader_role": null}],
      "watches": [
        {"query": "a", "relid": 16384, "schema": "app", "table": "t", "columns": [],
         "keys_sql": "SELECT id FROM t WHERE id = $1", "keys_reader_role": "docsync_reader_bob",
         "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false, "read_columns": null}]})J");
    CHECK(d.queries[0].reader_role == "docsync_reader_alice");
    CHECK(d.queries[1].reader_role.empty());
    REQUIRE(d.watches.size() == 1);
    CHECK(d.watches[0].keys_reader_role == "docsync_reader_bob");
    CHECK(error_of(R"({"generation": 1, "queries": [{"name": "a", "sql": "SELECT 1", "params": [],
        "search_path": null, "reader_role": 7}], "watches": []})").find("\"reader_role\" must be a string or null") !=
          std::string::npos);
}

TEST_CASE("a keys query runs under its watch's search_path, never its doc query's") {
    const char* doc = R"J({"generation": 1, "queries": [
        {"name": "a", "sql": "SELECT to_jsonb($1::int)", "params": ["id"], "search_path": "m, pg_temp"}],
      "watches": [
        {"query": "a", "relid": 16384, "schema": "app", "table": "t", "columns": [],
         "keys_sql": "SELECT code_of($1)", "keys_search_path": "vs, pg_temp",
         "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false, "read_columns": null},
        {"query": "a", "relid": 16385, "schema": "app", "table": "u", "columns": [],
         "keys_sql": "SELECT code_of($1)", "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false, "read_columns": null}]})J";
    Definitions d = parse_definitions(doc);
    REQUIRE(d.watches.size() == 2);
    CHECK(d.watches[0].keys_search_path == "vs, pg_temp");
    // without one, pg_catalog alone: never the pool session's path, nor the doc query's
    CHECK(d.watches[1].keys_search_path == "pg_catalog, pg_temp");
}

TEST_CASE("watches that do not resolve are read for the log, never as watches") {
    Definitions d = parse_definitions(R"({"generation": 1, "queries": [
        {"name": "r", "sql": "SELECT 1", "params": ["id"], "search_path": null}], "watches": [],
        "unresolved": [{"query": "r", "id": 7, "problem": "table shop.r1 does not exist: run …"}]})");
    CHECK(d.watches.empty());
    REQUIRE(d.unresolved.size() == 1);
    CHECK(d.unresolved[0] == "watch 7 of query \"r\": table shop.r1 does not exist: run …");
    CHECK(parse_definitions(R"({"generation":1,"queries":[],"watches":[]})").unresolved.empty());
    CHECK(error_of(R"({"generation":1,"queries":[],"watches":[],"unresolved":[{"query":"r","problem":"x"}]})")
              .find("\"id\"") != std::string::npos);
}

TEST_CASE("queries that read a table no watch covers are read for the log") {
    Definitions d = parse_definitions(R"({"generation": 1, "queries": [], "watches": [],
        "uncovered": [{"query": "order", "message": "doc query \"order\" reads public.order_items, which no watch covers: …"}]})");
    REQUIRE(d.uncovered.size() == 1);
    CHECK(d.uncovered[0] == "doc query \"order\" reads public.order_items, which no watch covers: …");
    CHECK(parse_definitions(R"({"generation":1,"queries":[],"watches":[]})").uncovered.empty());
    CHECK(error_of(R"({"generation":1,"queries":[],"watches":[],"uncovered":[{"query":"order"}]})")
              .find("\"message\"") != std::string::npos);
    CHECK(error_of(R"({"generation":1,"queries":[],"watches":[],"uncovered":{}})").find("\"uncovered\" must be an array") !=
          std::string::npos);
}

TEST_CASE("the tables option lists each watched relation once with the union of its columns") {
    Definitions d = parse_definitions(kContractB);
    CHECK(plugin_tables(d) == "16384(1),16390(3),16400(1)");
    Definitions empty = parse_definitions(R"({"generation":1,"queries":[],"watches":[]})");
    CHECK(plugin_tables(empty).empty());
}

TEST_CASE("malformed definitions are refused with an error naming the problem") {
    CHECK(error_of("not json").find("malformed worker definitions") != std::string::npos);
    CHECK(error_of("[]").find("must be an object") != std::string::npos);
    CHECK(error_of(R"({"queries":[],"watches":[]})").find("\"generation\"") != std::string::npos);
    CHECK(error_of(R"({"generation":-1,"queries":[],"watches":[]})").find("generation") != std::string::npos);
    CHECK(error_of(R"({"generation":1,"queries":[{"name":"a","sql":"x","params":[1],"search_path":""}],"watches":[]})")
              .find("params") != std::string::npos);
    auto unknown_query = error_of(R"({"generation":1,"queries":[],"watches":[{"query":"ghost","relid":1,
        "schema":"s","table":"t","columns":[],"keys_sql":null,"keys_args":[],"allow_broadcast":false,"broadcast":false,"read_columns":null}]})");
    CHECK(unknown_query.find("watches[0]") != std::string::npos);
    CHECK(unknown_query.find("\"ghost\"") != std::string::npos);
    auto wrong_count = error_of(R"({"generation":1,"queries":[{"name":"a","sql":"x","params":["p","q"],
        "search_path":"public"}],"watches":[{"query":"a","relid":5,"schema":"s","table":"t",
        "columns":[{"name":"id","attnum":1}],"keys_sql":null,"keys_args":[],"allow_broadcast":false,"broadcast":false,"read_columns":null}]})");
    CHECK(wrong_count.find("needs 2 columns") != std::string::npos);
    auto duplicate = error_of(R"({"generation":1,"queries":[{"name":"a","sql":"x","params":[],"search_path":""},
        {"name":"a","sql":"y","params":[],"search_path":""}],"watches":[]})");
    CHECK(duplicate.find("defined twice") != std::string::npos);
    auto bad_attnum = error_of(R"({"generation":1,"queries":[{"name":"a","sql":"x","params":["p"],
        "search_path":"public"}],"watches":[{"query":"a","relid":5,"schema":"s","table":"t",
        "columns":[{"name":"id","attnum":0}],"keys_sql":null,"keys_args":[],"allow_broadcast":false,"broadcast":false,"read_columns":null}]})");
    CHECK(bad_attnum.find("attnum") != std::string::npos);
}

TEST_CASE("parse_channel inverts build_channel and refuses what build_channel never writes") {
    const SqlArgs cases[] = {{"42"}, {"a:b", "c%d"}, {std::nullopt}, {""}, {"", std::nullopt, "x"},
                             {std::string("tab\there\x7f")}, {"%00"}, {}};
    for (const auto& values : cases) {
        ParsedChannel parsed;
        std::string channel = build_channel("q.x-1", values);
        REQUIRE_MESSAGE(parse_channel(channel, parsed), channel);
        CHECK(parsed.query == "q.x-1");
        CHECK(parsed.values == values);
    }
    ParsedChannel parsed;
    CHECK_FALSE(parse_channel("order:42", parsed));
    CHECK_FALSE(parse_channel("db::42", parsed));
    CHECK_FALSE(parse_channel("db:order:%4", parsed));
    CHECK_FALSE(parse_channel("db:order:%41", parsed));   // 'A' is never escaped
    CHECK_FALSE(parse_channel("db:order:a%00", parsed));  // NUL only spells a whole NULL segment
    CHECK_FALSE(parse_channel(std::string("db:order:a\nb"), parsed));
}

TEST_CASE("a query whose text, or a keys query of its watches, is over 1 MiB is refused and not kept") {
    std::string comment = "-- " + std::string(kMaxQueryTextBytes, 'x') + "\n";
    std::string doc = std::string(kContractB);
    auto with = [&](const std::string& from, const std::string& to) {
        std::string out = doc;
        out.replace(out.find(from), from.size(), to);
        return out;
    };
    Definitions long_sql = parse_definitions(with("\"sql\": \"SELECT 1", "\"sql\": \"" + comment.substr(0, comment.size() - 1) + "\\nSELECT 1"));
    REQUIRE(long_sql.queries.size() == 1);
    CHECK(long_sql.queries[0].refused.find("its text holds 1048606 bytes, more than docsync-worker computes (1048576)") !=
          std::string::npos);
    CHECK(long_sql.queries[0].sql.size() < 100);
    Definitions long_keys = parse_definitions(
        with("\"keys_sql\": \"SELECT DISTINCT", "\"keys_sql\": \"" + comment.substr(0, comment.size() - 1) + "\\nSELECT DISTINCT"));
    CHECK(long_keys.queries[0].refused.find("the keys query of its watch of public.products holds") != std::string::npos);
    for (const auto& w : long_keys.watches)
        if (w.keys_sql) CHECK(w.keys_sql->size() < 100);
    CHECK(parse_definitions(kContractB).queries[0].refused.empty());
}
