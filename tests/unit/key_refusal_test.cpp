// Refused channels in the engine (docs/design.md, "one doc, one name, one answer"): a key
// PostgreSQL refuses as input for its type is a refused channel, not a failed doc; a key type that
// changes drops the channels no longer canonical; and the refusal log stays bounded however many
// channels a client subscribes to.
#include <doctest/doctest.h>

#include "engine/key_text.hpp"
#include "engine_harness.hpp"
#include "log_capture.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

std::string definitions(int generation, const char* key_type) {
    return std::string(R"({"generation": )") + std::to_string(generation) + R"(,
 "queries": [{"name": "byat", "sql": "SELECT doc FROM ev WHERE at = $1", "params": ["at"],
              "search_path": "public", "key_types": [")" + key_type + R"("]},
             {"name": "bys", "sql": "SELECT doc FROM ev WHERE s = $1", "params": ["s"],
              "search_path": "public", "key_types": ["citext"]},
             {"name": "order", "sql": "SELECT doc FROM orders WHERE id = $1", "params": ["order_id"],
              "search_path": "public", "key_types": ["int4"]}],
 "watches": []})";
}

}  // namespace

TEST_CASE("a key PostgreSQL refuses as input for its type is a refused channel: not retried, no failure") {
    Harness h;
    h.engine.load_definitions(parse_definitions(definitions(1, "timestamp")));
    // a type the worker does not check (citext): only the server knows the key is unreadable
    h.runner.invalid_keys["db:bys:x"] = "22021";
    h.runner.invalid_keys["db:bys:y"] = "22P02";
    h.runner.rows["db:bys:ok"] = R"({"s":"ok"})";
    for (int poll = 0; poll < 3; ++poll) {
        h.engine.warm("db:bys:x");
        h.engine.touch("db:bys:y");
        h.engine.sync_live({"db:bys:x", "db:bys:y", "db:bys:ok"}, true);
        h.drain();
        h.clock.advance(std::chrono::seconds(10));
    }
    std::size_t bad_calls = 0;
    for (const auto& call : h.runner.doc_calls)
        if (call.args.front() != std::optional<std::string>("ok")) ++bad_calls;
    CHECK(bad_calls == 2);  // each computed once, then refused at once
    CHECK(h.publisher.count("db:bys:ok") == 1);
    CHECK(h.publisher.count("db:bys:x") == 0);
    CHECK(h.publisher.count("db:bys:y") == 0);
    auto stats = h.engine.stats();
    CHECK(stats.permanent_failures == 0);
    CHECK(stats.live_docs == 1);
    CHECK(stats.refused_channels >= 2);
    // a query's own data error (division by zero) is still a failure of the doc
    h.runner.failing_docs.insert("db:bys:z");
    h.engine.warm("db:bys:z");
    h.drain();
    CHECK(h.engine.stats().permanent_failures == 1);
}

TEST_CASE("invalid input for a doc a change named is the data's failure: retried, and a later change recomputes it") {
    EngineOptions options = test_options();
    options.live_all = true;
    Harness h(options);
    // order 7's row holds a value its doc query cannot cast: the key came from the row, so the
    // error is not the key's
    h.runner.invalid_keys["db:order:7"] = "22P02";
    h.txn({insert_order("7")}, 1);
    h.drain();
    CHECK(h.engine.stats().permanent_failures == 1);
    CHECK(h.publisher.count("db:order:7") == 0);
    // the data is fixed; the next change to the order reaches its doc
    h.runner.invalid_keys.erase("db:order:7");
    h.runner.rows["db:order:7"] = R"({"id":7})";
    h.txn({update_order_status("7")}, 2);
    h.drain();
    CHECK(h.publisher.count("db:order:7") >= 1);
    // a channel refused as a subscriber's, then named by a change, is computed too
    h.runner.invalid_keys["db:order:8"] = "22P02";
    h.engine.warm("db:order:8");
    h.drain();
    CHECK(h.publisher.count("db:order:8") == 0);
    h.runner.invalid_keys.erase("db:order:8");
    h.runner.rows["db:order:8"] = R"({"id":8})";
    h.txn({insert_order("8")}, 3);
    h.drain();
    CHECK(h.publisher.count("db:order:8") == 1);
}

TEST_CASE("a key type that changes drops the live channels no longer canonical, and their copies expire") {
    Harness h;
    h.engine.load_definitions(parse_definitions(definitions(1, "timestamp")));
    const std::string old_spelling = "db:byat:2026-01-01 00%3A00%3A00";
    h.runner.rows[old_spelling] = R"({"v":1})";
    h.engine.sync_live({old_spelling}, true);
    h.drain();
    REQUIRE(h.publisher.count(old_spelling) == 1);
    std::size_t calls = h.runner.doc_calls.size();
    // ALTER COLUMN at TYPE timestamptz: the doc query's param is a timestamptz now
    h.engine.load_definitions(parse_definitions(definitions(2, "timestamptz")));
    h.drain();
    CHECK(h.runner.doc_calls.size() == calls);  // not recomputed under a name no change reaches
    // its retained copy is replaced by a tombstone, which expires
    REQUIRE(h.publisher.count(old_spelling) == 2);
    CHECK_FALSE(h.publisher.last(old_spelling)->doc.has_value());
    CHECK(h.publisher.orphans == std::vector<std::string>{old_spelling});
    CHECK(h.engine.stats().live_docs == 0);
    // the new spelling is the doc's channel
    const std::string new_spelling = "db:byat:2026-01-01 00%3A00%3A00+00";
    h.runner.rows[new_spelling] = R"({"v":1})";
    h.engine.sync_live({old_spelling, new_spelling}, true);
    h.drain();
    CHECK(h.publisher.count(new_spelling) == 1);
    CHECK(h.publisher.count(old_spelling) == 2);
    CHECK(h.engine.stats().live_docs == 1);
}

TEST_CASE("refusals are logged once per channel up to a bound, then summed up once a minute, never again per poll") {
    LogCapture log;
    Harness h;
    h.engine.load_definitions(parse_definitions(definitions(1, "timestamp")));
    std::vector<std::string> aliases;
    for (int i = 1; i <= 5000; ++i) aliases.push_back("db:order:0" + std::to_string(i));
    for (int poll = 0; poll < 5; ++poll) {
        h.engine.sync_live(aliases, true);
        h.clock.advance(std::chrono::seconds(1));
    }
    CHECK(log.count("refusing channel") == 4096);
    CHECK(log.count("not logged one by one") == 1);
    CHECK(h.engine.stats().refused_channels == 5 * 5000);
    h.clock.advance(std::chrono::seconds(61));
    h.engine.sync_live(aliases, true);
    CHECK(log.count("refusing channel") == 4096);
    CHECK(log.count("not logged one by one") == 2);
    CHECK(h.runner.doc_calls.empty());
}

TEST_CASE("a key of a type the worker cannot check is spelled-checked by the server once per channel") {
    EngineOptions options = test_options();
    options.live_all = true;
    Harness h(options);
    h.engine.load_definitions(parse_definitions(R"({"generation": 1,
 "queries": [{"name": "slot", "sql": "SELECT doc FROM slots WHERE at = $1", "params": ["at"],
              "search_path": "public", "key_types": ["time"]},
             {"name": "pair", "sql": "SELECT doc FROM pairs WHERE p = $1", "params": ["p"],
              "search_path": "public", "key_types": [""]},
             {"name": "order", "sql": "SELECT doc FROM orders WHERE id = $1", "params": ["order_id"],
              "search_path": "public", "key_types": ["int4"]}],
 "watches": []})"));
    // what PostgreSQL prints: a time with its seconds, a composite without needless quotes
    h.runner.printed_keys["12:34"] = "12:34:00";
    h.runner.printed_keys["(\"1\",2)"] = "(1,2)";
    h.runner.bad_key_values["(x"] = "22P02";
    h.runner.rows["db:slot:12%3A34%3A00"] = R"({"code":"FR"})";
    h.runner.rows["db:slot:12%3A34"] = R"({"code":"FR"})";
    h.runner.rows["db:pair:(1,2)"] = R"({"p":[1,2]})";
    h.runner.rows["db:pair:(\"1\",2)"] = R"({"p":[1,2]})";
    h.runner.rows["db:order:1"] = R"({"id":1})";
    LogCapture logs;
    for (int poll = 0; poll < 3; ++poll) {
        for (const char* channel : {"db:slot:12%3A34", "db:slot:12%3A34%3A00", "db:pair:(\"1\",2)", "db:pair:(1,2)",
                                    "db:pair:(x", "db:order:1"})
            h.engine.warm(channel);
        h.drain();
        h.clock.advance(std::chrono::seconds(10));
    }
    // the variant spellings compute nothing and are never published; the printed ones are
    for (const auto& call : h.runner.doc_calls) {
        std::string channel = build_channel(call.query, call.args);
        CHECK(channel != "db:slot:12%3A34");
        CHECK(channel != "db:pair:(\"1\",2)");
        CHECK(channel != "db:pair:(x");
    }
    CHECK(h.publisher.count("db:slot:12%3A34") == 0);
    CHECK(h.publisher.count("db:pair:(\"1\",2)") == 0);
    CHECK(h.publisher.count("db:pair:(x") == 0);
    CHECK(h.publisher.count("db:slot:12%3A34%3A00") >= 1);
    CHECK(h.publisher.count("db:pair:(1,2)") >= 1);
    CHECK(h.publisher.count("db:order:1") >= 1);
    // each channel asked once (a refused one is refused at once after), a checked type never
    std::map<std::string, int> asked;
    for (const auto& channel : h.runner.print_calls) ++asked[channel];
    CHECK(asked["db:slot:12%3A34"] == 1);
    CHECK(asked["db:slot:12%3A34%3A00"] == 1);
    CHECK(asked["db:pair:(\"1\",2)"] == 1);
    CHECK(asked["db:pair:(1,2)"] == 1);
    CHECK(asked["db:pair:(x"] == 1);
    CHECK(asked.count("db:order:1") == 0);
    // the refusal names the doc's one channel, as a key_text refusal does
    CHECK(logs.count("param 1 is not as PostgreSQL prints it; the doc's channel is") == 2);
    CHECK(logs.count("db:slot:12%3A34%3A00") >= 1);
    CHECK(logs.count("PostgreSQL refused its key") == 1);
    auto stats = h.engine.stats();
    CHECK(stats.permanent_failures == 0);
    CHECK(stats.refused_channels >= 3);
}

TEST_CASE("a server key check failing for another reason than the key leaves the compute to say what is wrong") {
    Harness h;
    h.engine.load_definitions(parse_definitions(R"({"generation": 1,
 "queries": [{"name": "slot", "sql": "SELECT doc FROM slots WHERE at = $1", "params": ["at"],
              "search_path": "public", "key_types": ["time"]}],
 "watches": []})"));
    h.runner.bad_key_values["12:00:00"] = "08006";  // the connection broke during the check
    h.runner.rows["db:slot:12%3A00%3A00"] = R"({"at":"12:00:00"})";
    h.engine.warm("db:slot:12%3A00%3A00");
    h.drain();
    CHECK(h.publisher.count("db:slot:12%3A00%3A00") == 1);  // computed, not refused
    CHECK(h.engine.stats().refused_channels == 0);
    // not marked as checked: asked again before the next compute, which it then passes
    h.runner.bad_key_values.clear();
    h.clock.advance(std::chrono::seconds(10));
    h.engine.warm("db:slot:12%3A00%3A00");
    h.drain();
    h.clock.advance(std::chrono::seconds(10));
    h.engine.warm("db:slot:12%3A00%3A00");
    h.drain();
    CHECK(h.runner.print_calls.size() == 2);
    CHECK(h.publisher.count("db:slot:12%3A00%3A00") == 3);
}
