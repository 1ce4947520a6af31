// The worker's `tables` option (plugin_tables) against the plugin's own parser of it
// (plugin/tables_syntax.c): what the worker sends, the plugin reads back as the same relations and
// attnums. tests/fuzz/plugin_tables.cpp checks the same property on arbitrary watches.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/definitions.hpp"
#include "plugin/tables_syntax.h"

using namespace docsync;

namespace {

// One parsed entry in a printable form: "16384(1,3)", "schema.name(col)", "name".
struct Parsed {
    std::vector<std::string> entries;
    bool ok = false;
    std::size_t error_offset = 0;
    std::string expected;
};

std::string text_of(const DocsyncTablesIdent* ident) {
    std::string text(ident->len + 1, '\0');
    text.resize(docsync_tables_ident_text(ident, text.data()));
    return ident->quoted ? "\"" + text + "\"" : text;
}

void add_column(Parsed& p, const std::string& column) {
    std::string& e = p.entries.back();
    e += e.back() == ')' ? (e.pop_back(), "," + column + ")") : "(" + column + ")";
}

Parsed parse(const std::string& value) {
    static const DocsyncTablesVisitor visitor = {
        [](void* arg, std::uint32_t relid) { static_cast<Parsed*>(arg)->entries.push_back(std::to_string(relid)); },
        [](void* arg, const DocsyncTablesIdent* schema, const DocsyncTablesIdent* name) {
            static_cast<Parsed*>(arg)->entries.push_back((schema ? text_of(schema) + "." : "") + text_of(name));
        },
        [](void* arg, int attnum) { add_column(*static_cast<Parsed*>(arg), std::to_string(attnum)); },
        [](void* arg, const DocsyncTablesIdent* name) { add_column(*static_cast<Parsed*>(arg), text_of(name)); },
        nullptr,
    };
    Parsed p;
    DocsyncTablesError error{};
    p.ok = docsync_tables_parse(value.c_str(), &visitor, &p, &error);
    if (!p.ok) {
        p.error_offset = error.offset;
        p.expected = error.expected;
    }
    return p;
}

}  // namespace

TEST_CASE("the plugin parses the worker's tables option into the watched relids and attnums") {
    Definitions d = parse_definitions(R"({"generation": 3,
      "queries": [{"name": "a", "sql": "x", "params": ["p"], "search_path": "public"},
                  {"name": "b", "sql": "x", "params": [], "search_path": "public"}],
      "watches": [
        {"query": "a", "relid": 4294967295, "schema": "s", "table": "big", "columns": [{"name": "c", "attnum": 1600}],
         "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null},
        {"query": "a", "relid": 16390, "schema": "s", "table": "t", "columns": [{"name": "z", "attnum": 12}],
         "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null},
        {"query": "a", "relid": 16390, "schema": "s", "table": "t", "columns": [],
         "keys_sql": "SELECT 1 WHERE $1 = $2", "keys_args": [{"name": "y", "attnum": 2}, {"name": "z", "attnum": 12}],
         "allow_broadcast": false, "broadcast": false, "read_columns": null},
        {"query": "b", "relid": 16384, "schema": "s", "table": "u", "columns": [],
         "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null}]})");
    std::string tables = plugin_tables(d);
    Parsed p = parse(tables);
    REQUIRE_MESSAGE(p.ok, tables, " fails at ", p.error_offset, ": expected ", p.expected);
    CHECK(p.entries == std::vector<std::string>{"16384", "16390(2,12)", "4294967295(1600)"});
    CHECK(parse(plugin_tables(Definitions{})).entries.empty());
}

TEST_CASE("the tables grammar: the forms people write, and errors at the plugin's positions") {
    CHECK(parse("  PUBLIC . OPT_T ( ID , \"Quoted Col\" )  ").entries ==
          std::vector<std::string>{"PUBLIC.OPT_T(ID,\"Quoted Col\")"});
    CHECK(parse("\"a\"\"b\".c$1(_x, \"\"\"\"), 7(1)").entries ==
          std::vector<std::string>{"\"a\"b\".c$1(_x,\"\"\")", "7(1)"});
    CHECK(parse(" \t\n ").ok);
    // The offsets behind regress/expected/15_plugin_options.out's "at character N" (N = offset + 1).
    struct Case { const char* value; std::size_t offset; const char* expected; };
    for (const Case& c : {Case{"opt_t(", 6, "a column name"},
                          Case{"opt_t(id", 8, "\",\" or \")\" in a column list"},
                          Case{"opt_t id", 6, "\",\" between entries, or \"(\" before a column list"},
                          Case{"opt_t,", 6, "a relation OID or name"},
                          Case{"\"unterminated", 13, "a closing double quote"},
                          Case{"\"\"", 0, "a non-empty quoted identifier"},
                          Case{"a.b.c", 3, "\",\" between entries, or \"(\" before a column list"},
                          Case{"16384(id)", 6, "a column number (attnum, 1 or more) in an OID entry"},
                          Case{"16384(32768)", 6, "a column number (attnum, 1 or more) in an OID entry"},
                          Case{"0", 0, "a relation OID between 1 and 4294967295"},
                          Case{"4294967296", 0, "a relation OID between 1 and 4294967295"},
                          Case{"-1", 0, "a relation OID or name"}}) {
        Parsed p = parse(c.value);
        CHECK_MESSAGE(!p.ok, c.value);
        CHECK_MESSAGE(p.error_offset == c.offset, c.value);
        CHECK_MESSAGE(p.expected == c.expected, c.value);
    }
}
