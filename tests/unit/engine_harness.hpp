#pragma once
// The engine under test: the fakes of engine_fakes.hpp around an Engine with two doc queries
// ("order" with direct watches on orders and order_items and a reverse-index watch on products,
// and "user"), driven by hand: transactions in, run_once until idle.

#include <algorithm>
#include <mutex>

#include "engine/engine.hpp"
#include "engine_fakes.hpp"

namespace docsync::test {

using namespace std::chrono_literals;

constexpr Oid kOrders = 16384, kItems = 16390, kProducts = 16400, kQueryDefs = 16500;

inline const char* kDefinitions = R"({"generation": 3,
 "queries": [{"name": "order", "sql": "SELECT doc FROM orders WHERE id = $1", "params": ["order_id"],
              "search_path": "public"},
             {"name": "user", "sql": "SELECT doc FROM users WHERE id = $1", "params": ["user_id"],
              "search_path": "public"}],
 "watches": [{"query": "order", "relid": 16384, "schema": "public", "table": "orders",
              "columns": [{"name": "id", "attnum": 1}],
              "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null},
             {"query": "order", "relid": 16390, "schema": "public", "table": "order_items",
              "columns": [{"name": "order_id", "attnum": 2}],
              "keys_sql": null, "keys_args": [], "allow_broadcast": true, "broadcast": false, "read_columns": null},
             {"query": "order", "relid": 16400, "schema": "public", "table": "products",
              "columns": [], "keys_sql": "SELECT DISTINCT order_id FROM order_items WHERE product_id = $1",
              "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false, "read_columns": null}]})";

inline RelationRecord relation(Oid relid, std::string schema, std::string name, std::vector<std::pair<int, std::string>> cols) {
    RelationRecord r;
    r.relid = relid;
    r.schema = std::move(schema);
    r.name = std::move(name);
    for (auto& [attnum, col] : cols) r.columns.push_back({attnum, col, 25, attnum == 1, false});
    return r;
}

inline EngineOptions test_options() {
    EngineOptions options;
    options.min_round_interval = 0ms;  // pacing has its own test
    return options;
}

struct Harness {
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    std::vector<std::uint64_t> completed;
    std::mutex completed_mutex;
    Engine engine;
    std::uint64_t next_xid = 1000;
    Lsn next_lsn = 0x1000;

    explicit Harness(EngineOptions options = test_options())
        : engine(runner, publisher, clock, options, [this](std::uint64_t t) {
              std::lock_guard<std::mutex> lock(completed_mutex);
              completed.push_back(t);
          }) {
        engine.load_definitions(parse_definitions(kDefinitions));
        engine.on_relation(relation(kOrders, "public", "orders", {{1, "id"}, {2, "status"}}));
        engine.on_relation(relation(kItems, "public", "order_items", {{1, "id"}, {2, "order_id"}}));
        engine.on_relation(relation(kProducts, "public", "products", {{1, "id"}}));
        engine.on_relation(relation(kQueryDefs, "docsync", "query_defs", {{1, "name"}}));
        engine.start(0);
    }

    bool is_complete(std::uint64_t ticket) {
        std::lock_guard<std::mutex> lock(completed_mutex);
        return std::find(completed.begin(), completed.end(), ticket) != completed.end();
    }

    // One transaction of `changes`; returns its end LSN.
    Lsn txn(const std::vector<ChangeRecord>& changes, std::uint64_t ticket, bool* definitions = nullptr) {
        BeginRecord b;
        b.xid = next_xid++;
        b.commit_lsn = next_lsn;
        engine.on_begin(b);
        for (const auto& c : changes) engine.on_change(c);
        CommitRecord c{next_lsn, next_lsn + 0x30};
        next_lsn += 0x100;
        bool d = engine.on_commit(c, ticket);
        if (definitions) *definitions = d;
        return c.end_lsn;
    }

    int drain(int limit = 100000) {
        int n = 0;
        while (n < limit && engine.run_once()) ++n;
        return n;
    }
};

inline ChangeRecord insert_order(const std::string& id) {
    return ChangeRecord{ChangeOp::Insert, kOrders, {text(id), text("new")}, {}};
}
inline ChangeRecord update_order_status(const std::string& id) {  // key unchanged: old id SAME
    return ChangeRecord{ChangeOp::Update, kOrders, {text(id), text("paid")}, {same(), text("new")}};
}
inline ChangeRecord move_item(const std::string& from, const std::string& to) {
    return ChangeRecord{ChangeOp::Update, kItems, {text("1"), text(to)}, {same(), text(from)}};
}

}  // namespace docsync::test
