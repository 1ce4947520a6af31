// What a client can make the worker keep or spend for channels that name no doc is bounded
// (docs/design.md, "Key identity" and the worker's bounds): a padded bpchar[] key is refused before
// any compute, an over-long channel is refused unread and logged by a prefix, the refusal memories
// are bounded in bytes and forget the oldest first, the server key checks a liveness poll causes
// take a per-second budget, and a retained channel the server check refuses expires.
#include <doctest/doctest.h>

#include "engine/key_text.hpp"
#include "engine/refused_names.hpp"
#include "engine_harness.hpp"
#include "log_capture.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

// a key type the worker cannot check (time), beside a bpchar[] and a bpchar one
const char* kBoundsDefinitions = R"({"generation": 1,
 "queries": [{"name": "slot", "sql": "SELECT doc FROM slots WHERE at = $1", "params": ["at"],
              "search_path": "public", "key_types": ["time"]},
             {"name": "codes", "sql": "SELECT doc FROM shipments WHERE codes = $1", "params": ["codes"],
              "search_path": "public", "key_types": ["_bpchar"]},
             {"name": "country", "sql": "SELECT doc FROM countries WHERE code = $1", "params": ["code"],
              "search_path": "public", "key_types": ["bpchar"]}],
 "watches": []})";

}  // namespace

TEST_CASE("a padded bpchar[] key is refused by the key check, naming the trimmed spelling") {
    CHECK(check_key_text("_bpchar", "{FR,DE}").ok);
    CHECK(check_key_text("_bpchar", "{\"a b\",NULL}").ok);
    for (const char* padded : {"{\"FR \",DE}", "{\"FR \",\"DE \"}", "{\"FR\",DE}"}) {
        KeyCheck check = check_key_text("_bpchar", padded);
        CHECK_MESSAGE(!check.ok, padded);
        CHECK(check.canonical == std::optional<std::string>("{FR,DE}"));
    }
    // a form trim_bpchar_array cannot read is left to the server check
    CHECK(check_key_text("_bpchar", "{ FR,DE}").ok);
    KeyCheck named = check_channel_key("codes", {"_bpchar"}, {std::string("{\"FR \",DE}")});
    CHECK(named.problem.find("the doc's channel is \"db:codes:{FR,DE}\"") != std::string::npos);
    // the engine computes nothing for it, and asks the server nothing
    Harness h;
    h.engine.load_definitions(parse_definitions(kBoundsDefinitions));
    h.engine.warm("db:codes:{\"FR \",DE}");
    h.engine.sync_live({"db:codes:{\"FR \",DE}"}, true);
    h.drain();
    CHECK(h.runner.doc_calls.empty());
    CHECK(h.runner.print_calls.empty());
    CHECK(h.engine.stats().refused_channels == 2);
}

TEST_CASE("at a --live all start, a retained channel the server check refuses is handed to the sink to expire") {
    EngineOptions options = test_options();
    options.live_all = true;
    Harness h(options);
    h.engine.stop();
    h.engine.load_definitions(parse_definitions(kBoundsDefinitions));
    h.runner.printed_keys["12:34"] = "12:34:00";
    h.runner.rows["db:slot:12%3A34%3A00"] = R"({"v":1})";
    h.runner.rows["db:slot:12%3A34"] = R"({"v":1})";
    h.publisher.retained = {"db:slot:12%3A34%3A00", "db:slot:12%3A34"};
    h.engine.start(0);
    CHECK(h.publisher.orphans.empty());  // both pass key_text: time is the server's to check
    h.engine.recompute_all_live(RecomputeReason::Startup, false);  // the start's recompute
    h.drain();
    // the refused one expires, once; the canonical one is computed and kept
    CHECK(h.publisher.orphans == std::vector<std::string>{"db:slot:12%3A34"});
    CHECK(h.publisher.count("db:slot:12%3A34") == 0);
    CHECK(h.publisher.count("db:slot:12%3A34%3A00") == 1);
    h.engine.warm("db:slot:12%3A34");
    h.drain();
    CHECK(h.publisher.orphans.size() == 1);
}

TEST_CASE("the refused-channel memory forgets the oldest first and is bounded in bytes") {
    RefusedNames names(3, 10);
    names.insert_evicting("b");
    names.insert_evicting("c");
    names.insert_evicting("d");
    names.insert_evicting("a");  // the smallest, but the newest: "b", the oldest, goes
    CHECK_FALSE(names.contains("b"));
    CHECK(names.contains("a"));
    CHECK(names.contains("c"));
    names.insert_evicting("0123456789");  // ten bytes: everything older goes
    CHECK(names.size() == 1);
    CHECK(names.bytes() == 10);
    names.insert_evicting("01234567890");  // past the byte bound: not remembered
    CHECK(names.contains("0123456789"));
    CHECK_FALSE(names.insert_if_room("x"));
    names.erase("0123456789");
    CHECK(names.insert_if_room("x"));
    CHECK(names.bytes() == 1);
}

TEST_CASE("server key checks for channels only a liveness poll names take --key-check-rate per second") {
    LogCapture log;
    EngineOptions options = test_options();
    options.key_check_rate = 10;
    Harness h(options);
    h.engine.load_definitions(parse_definitions(kBoundsDefinitions));
    std::vector<std::string> aliases;
    for (int i = 0; i < 100; ++i) {
        std::string value = "1:" + std::to_string(i);
        h.runner.printed_keys[value] = value + ":00";  // PostgreSQL spells each otherwise
        aliases.push_back(build_channel("slot", {value}));
    }
    for (int poll = 0; poll < 5; ++poll) {  // five polls within one second: ten checks in all
        h.engine.sync_live(aliases, true);
        h.drain();
        h.clock.advance(std::chrono::milliseconds(100));
    }
    CHECK(h.runner.print_calls.size() == 10);
    CHECK(log.count("--key-check-rate (10 per second) is spent") == 1);
    for (int second = 0; second < 20; ++second) {
        h.clock.advance(std::chrono::seconds(1));
        h.engine.sync_live(aliases, true);
        h.drain();
    }
    // each alias checked once, then refused at once while remembered: no more round trips
    CHECK(h.runner.print_calls.size() == 100);
    CHECK(h.runner.doc_calls.empty());
    CHECK(log.count("--key-check-rate") == 1);  // logged once a minute at most
}

TEST_CASE("6000 aliases a poll lists, each refused by the server once, cost no round trip again") {
    EngineOptions options = test_options();
    options.key_check_rate = 0;  // no budget: what is remembered alone keeps the checks from coming back
    Harness h(options);
    h.engine.load_definitions(parse_definitions(kBoundsDefinitions));
    std::vector<std::string> aliases;
    for (int i = 0; i < 6000; ++i) {
        std::string value = "2:" + std::to_string(i);
        h.runner.printed_keys[value] = value + ":00";
        aliases.push_back(build_channel("slot", {value}));
    }
    h.engine.sync_live(aliases, true);
    h.drain();
    REQUIRE(h.runner.print_calls.size() == 6000);
    for (int poll = 0; poll < 3; ++poll) {
        h.clock.advance(std::chrono::seconds(1));
        h.engine.sync_live(aliases, true);
        h.drain();
    }
    CHECK(h.runner.print_calls.size() == 6000);
}

TEST_CASE("a channel longer than 1024 bytes is refused unread, logged by a prefix and its length") {
    LogCapture log;
    Harness h;
    h.engine.load_definitions(parse_definitions(kBoundsDefinitions));
    for (int i = 0; i < 50; ++i) {
        std::string huge = "db:country:FR" + std::to_string(i) + std::string(256 << 10, ' ');
        h.engine.warm(huge);
        h.engine.warm(huge);  // logged once
    }
    std::string long_ok = "db:country:" + std::string(kMaxChannelBytes - 11, 'x');
    h.runner.rows[long_ok] = R"({"v":1})";
    h.engine.warm(long_ok);
    h.drain();
    CHECK(h.publisher.count(long_ok) == 1);  // 1024 bytes: a channel like any other
    CHECK(log.count("longer than 1024 bytes") == 50);
    CHECK(log.count("(262158 bytes)") == 10);
    CHECK(log.text().size() < 50 * 512);
    CHECK(h.engine.stats().refused_channels == 100);
}
