// Watches that name the columns their query reads (read_columns) and broadcast watches: what reaches
// the docs, what the plugin's `tables` option asks for, and how contract B spells them.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "engine/channel.hpp"
#include "engine_harness.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

// "order" reads orders (id, status: not note), order_items (order_id, qty: not id) through direct
// watches, products (id, name) through a reverse index, and every column of audit, which has no key
// path: a broadcast watch. "user" watches orders too, with no read_columns (every column).
const char* kReadDefinitions = R"({"generation": 4,
 "queries": [{"name": "order", "sql": "SELECT doc FROM orders WHERE id = $1", "params": ["order_id"],
              "search_path": "public"},
             {"name": "user", "sql": "SELECT doc FROM users WHERE id = $1", "params": ["user_id"],
              "search_path": "public"}],
 "watches": [{"query": "order", "relid": 16384, "schema": "public", "table": "orders",
              "columns": [{"name": "id", "attnum": 1}], "keys_sql": null, "keys_args": [],
              "allow_broadcast": false, "broadcast": false,
              "read_columns": [{"name": "id", "attnum": 1}, {"name": "status", "attnum": 2}]},
             {"query": "order", "relid": 16390, "schema": "public", "table": "order_items",
              "columns": [{"name": "order_id", "attnum": 2}], "keys_sql": null, "keys_args": [],
              "allow_broadcast": false, "broadcast": false,
              "read_columns": [{"name": "qty", "attnum": 3}]},
             {"query": "order", "relid": 16400, "schema": "public", "table": "products",
              "columns": [], "keys_sql": "SELECT DISTINCT order_id FROM order_items WHERE product_id = $1",
              "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false,
              "read_columns": [{"name": "id", "attnum": 1}, {"name": "name", "attnum": 2}]},
             {"query": "order", "relid": 16410, "schema": "public", "table": "audit",
              "columns": [], "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": true,
              "read_columns": null},
             {"query": "user", "relid": 16384, "schema": "public", "table": "orders",
              "columns": [{"name": "note", "attnum": 3}], "keys_sql": null, "keys_args": [],
              "allow_broadcast": true, "broadcast": false, "read_columns": null}]})";

constexpr Oid kAudit = 16410;

struct ReadHarness : Harness {
    ReadHarness() {
        engine.load_definitions(parse_definitions(kReadDefinitions));
        engine.on_relation(relation(kOrders, "public", "orders", {{1, "id"}, {2, "status"}, {3, "note"}}));
        engine.on_relation(relation(kItems, "public", "order_items", {{1, "id"}, {2, "order_id"}, {3, "qty"}}));
        engine.on_relation(relation(kProducts, "public", "products", {{1, "id"}, {2, "name"}, {3, "stock"}}));
        engine.on_relation(relation(kAudit, "public", "audit", {{1, "id"}, {2, "what"}}));
        engine.sync_live({"db:order:1", "db:order:2", "db:user:hi", "db:user:x"}, true);
        drain();
        runner.doc_calls.clear();
        runner.keys_calls.clear();
    }

    // The channels computed and the keys lookups run for one transaction of `changes`.
    std::set<std::string> computed_after(const std::vector<ChangeRecord>& changes, std::uint64_t ticket) {
        runner.doc_calls.clear();
        txn(changes, ticket);
        drain();
        CHECK(is_complete(ticket));
        std::set<std::string> out;
        for (const auto& c : runner.doc_calls) out.insert(build_channel(c.query, c.args));
        return out;
    }
};

ChangeRecord update(Oid relid, std::vector<Value> new_values, std::vector<Value> old_values) {
    return ChangeRecord{ChangeOp::Update, relid, std::move(new_values), std::move(old_values)};
}

}  // namespace

TEST_CASE("an UPDATE of columns a watch's query does not read never reaches its docs") {
    ReadHarness h;
    // orders.note changed, id and status SAME: "order" reads neither, "user" (all columns) does.
    CHECK(h.computed_after({update(kOrders, {text("1"), text("new"), text("hi")}, {same(), same(), text("x")})}, 1) ==
          std::set<std::string>{"db:user:hi", "db:user:x"});
    // order_items.id changed (SAME order_id and qty): not read.
    CHECK(h.computed_after({update(kItems, {text("9"), text("1"), text("4")}, {text("8"), same(), same()})}, 2).empty());
    // products.stock changed: no keys lookup at all.
    h.runner.keys_calls.clear();
    CHECK(h.computed_after({update(kProducts, {text("7"), text("pen"), text("3")}, {same(), same(), text("4")})}, 3)
              .empty());
    CHECK(h.runner.keys_calls.empty());
}

TEST_CASE("an UPDATE that changes a column the query reads reaches the docs as before") {
    ReadHarness h;
    // orders.status changed: the order's doc, and "user" (all columns) for its note.
    CHECK(h.computed_after({update(kOrders, {text("1"), text("paid"), text("hi")}, {same(), text("new"), same()})}, 1) ==
          std::set<std::string>{"db:order:1", "db:user:hi"});
    // order_items.qty changed.
    CHECK(h.computed_after({update(kItems, {text("9"), text("2"), text("5")}, {same(), same(), text("4")})}, 2) ==
          std::set<std::string>{"db:order:2"});
    // The mapping column moved the row, every other column SAME: both docs.
    CHECK(h.computed_after({update(kItems, {text("9"), text("2"), text("5")}, {same(), text("1"), same()})}, 3) ==
          std::set<std::string>{"db:order:1", "db:order:2"});
    // INSERT and DELETE always reach the docs, whatever they hold.
    CHECK(h.computed_after({ChangeRecord{ChangeOp::Insert, kItems, {text("9"), text("1"), text("5")}, {}}}, 4) ==
          std::set<std::string>{"db:order:1"});
    CHECK(h.computed_after({ChangeRecord{ChangeOp::Delete, kItems, {}, {text("9"), text("2"), unknown()}}}, 5) ==
          std::set<std::string>{"db:order:2"});
}

TEST_CASE("a read column logged UNKNOWN may have changed; an unchanged out-of-line value has not") {
    ReadHarness h;
    // qty not logged in the old tuple (outside the replica identity): it may have changed.
    CHECK(h.computed_after({update(kItems, {text("9"), text("2"), text("5")}, {same(), same(), unknown()})}, 1) ==
          std::set<std::string>{"db:order:2"});
    // qty an unchanged TOAST value, its old value not logged: unchanged, nothing to do.
    CHECK(h.computed_after({update(kItems, {text("9"), text("2"), toast()}, {text("8"), same(), unknown()})}, 2).empty());
    // A read column the relation does not have (dropped, or not sent): never skipped.
    h.engine.on_relation(relation(kItems, "public", "order_items", {{1, "id"}, {2, "order_id"}}));
    CHECK(h.computed_after({update(kItems, {text("9"), text("2")}, {text("8"), same()})}, 3) ==
          std::set<std::string>{"db:order:2"});
}

TEST_CASE("a broadcast watch recomputes every live doc of its query on every change of its table") {
    ReadHarness h;
    const std::set<std::string> all_orders{"db:order:1", "db:order:2"};
    auto broadcasts = h.engine.stats().broadcasts;
    CHECK(h.computed_after({ChangeRecord{ChangeOp::Insert, kAudit, {text("1"), text("x")}, {}}}, 1) == all_orders);
    CHECK(h.computed_after({update(kAudit, {text("1"), text("y")}, {same(), unknown()})}, 2) == all_orders);
    CHECK(h.computed_after({ChangeRecord{ChangeOp::Delete, kAudit, {}, {text("1"), unknown()}}}, 3) == all_orders);
    h.runner.doc_calls.clear();
    BeginRecord b{h.next_xid++, 0x9000, 0};
    h.engine.on_begin(b);
    h.engine.on_truncate(TruncateRecord{false, false, {kAudit}});
    h.engine.on_commit(CommitRecord{0x9000, 0x9030}, 4);
    h.drain();
    CHECK(h.runner.doc_calls.size() == 2);
    CHECK(h.is_complete(4));
    CHECK(h.engine.stats().broadcasts == broadcasts + 4);
    // An UPDATE that leaves every column it reads unchanged is skipped, broadcast or not.
    Definitions d = parse_definitions(kReadDefinitions);
    d.watches[3].read_columns = std::vector<WatchColumn>{{"what", 2}};
    d.generation = 5;
    h.engine.load_definitions(std::move(d));
    h.drain();
    CHECK(h.computed_after({update(kAudit, {text("2"), text("y")}, {text("1"), same()})}, 5).empty());
    CHECK(h.computed_after({update(kAudit, {text("1"), text("z")}, {same(), text("y")})}, 6) == all_orders);
}

TEST_CASE("the tables option adds each watch's read columns; a watch reading every column adds none") {
    Definitions d = parse_definitions(kReadDefinitions);
    // orders: order's id, status and user's note; order_items: order_id and qty; products: id, name;
    // audit: no column named, so every column.
    CHECK(plugin_tables(d) == "16384(1,2,3),16390(2,3),16400(1,2),16410");
    d.watches[0].read_columns.reset();
    CHECK(plugin_tables(d) == "16384(1,3),16390(2,3),16400(1,2),16410");
}

TEST_CASE("contract B: broadcast and read_columns are required, typed and consistent") {
    auto error_of = [](const std::string& watch) {
        std::string json = R"({"generation": 1, "queries": [{"name": "q", "sql": "SELECT 1 WHERE $1::int > 0",
            "params": ["id"], "search_path": null}], "watches": [{"query": "q", "relid": 16384, "schema": "s",
            "table": "t", )" + watch + "}]}";
        try {
            parse_definitions(json);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    const std::string direct = R"("columns": [{"name": "id", "attnum": 1}], "keys_sql": null, "keys_args": [],
        "allow_broadcast": false, )";
    CHECK(error_of(direct + R"("broadcast": false, "read_columns": null)").empty());
    CHECK(error_of(direct + R"("broadcast": false, "read_columns": [])").empty());
    CHECK(error_of(direct + R"("read_columns": null)").find("missing field \"broadcast\"") != std::string::npos);
    CHECK(error_of(direct + R"("broadcast": false)").find("missing field \"read_columns\"") != std::string::npos);
    CHECK(error_of(direct + R"("broadcast": 0, "read_columns": null)").find("\"broadcast\" must be a boolean") !=
          std::string::npos);
    CHECK(error_of(direct + R"("broadcast": false, "read_columns": "id")").find("\"read_columns\" must be an array or null") !=
          std::string::npos);
    CHECK(error_of(direct + R"("broadcast": false, "read_columns": [{"name": "id", "attnum": 0}])")
              .find("read_columns[0]: \"attnum\" must be a positive column number") != std::string::npos);
    CHECK(error_of(direct + R"("broadcast": true, "read_columns": null)").find("a broadcast watch must have empty \"columns\"") !=
          std::string::npos);
    CHECK(error_of(R"("columns": [], "keys_sql": "SELECT 1", "keys_args": [{"name": "id", "attnum": 1}],
        "allow_broadcast": false, "broadcast": true, "read_columns": null)")
              .find("a broadcast watch must have no \"keys_sql\"") != std::string::npos);
    // a broadcast watch needs no column per param
    std::string ok = R"("columns": [], "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": true,
        "read_columns": [{"name": "v", "attnum": 2}])";
    CHECK(error_of(ok).empty());
}
