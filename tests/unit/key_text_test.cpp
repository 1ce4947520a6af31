// Canonical key text (engine/key_text.hpp): one doc, one channel. Each spelling PostgreSQL reads as
// the same value but prints otherwise is refused, naming the canonical one; a key that is not of its
// type is refused too; and the engine computes and keeps nothing for either, whichever way the
// channel arrives (warm, touch, a liveness poll).
#include <doctest/doctest.h>

#include "engine/key_text.hpp"
#include "engine_harness.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

// The canonical spelling check_key_text names for `text`, or "" when it accepts it, or "?" when it
// refuses it without naming one.
std::string named(std::string_view type, std::string_view text) {
    KeyCheck check = check_key_text(type, text);
    if (check.ok) return "";
    auto open = check.problem.find("spelled \"");
    if (open == std::string::npos) return "?";
    open += 9;
    return check.problem.substr(open, check.problem.find('"', open) - open);
}

}  // namespace

TEST_CASE("integers: one spelling per value, as PostgreSQL prints it") {
    for (auto t : {"int2", "int4", "int8"}) {
        CHECK(named(t, "1") == "");
        CHECK(named(t, "0") == "");
        CHECK(named(t, "-7") == "");
        CHECK(named(t, "01") == "1");
        CHECK(named(t, "001") == "1");
        CHECK(named(t, "+1") == "1");
        CHECK(named(t, " 1") == "1");
        CHECK(named(t, "1 ") == "1");
        CHECK(named(t, "-0") == "0");
        CHECK(named(t, "+000") == "0");
        CHECK(named(t, "abc") == "?");
        CHECK(named(t, "") == "?");
        CHECK(named(t, "1.0") == "?");
        CHECK(named(t, "1e3") == "?");
        CHECK(named(t, "--1") == "?");
    }
    CHECK(named("int2", "32767") == "");
    CHECK(named("int2", "32768") == "?");
    CHECK(named("int2", "-32768") == "");
    CHECK(named("int4", "2147483648") == "?");
    CHECK(named("int4", "-2147483648") == "");
    CHECK(named("int8", "9223372036854775807") == "");
    CHECK(named("int8", "-9223372036854775808") == "");
    CHECK(named("int8", "9223372036854775808") == "?");
    CHECK(named("int8", "99999999999999999999999") == "?");
    CHECK(check_key_text("int4", "abc").problem == "not a valid int4");
    CHECK(check_key_text("int4", "01").problem == "not in canonical form: the same value is spelled \"1\"");
    CHECK(named("oid", "4294967295") == "");
    CHECK(named("oid", "-1") == "4294967295");
    CHECK(named("oid", "4294967296") == "?");
}

TEST_CASE("bool, uuid, name, date and timestamps: the form PostgreSQL prints") {
    CHECK(named("bool", "t") == "");
    CHECK(named("bool", "f") == "");
    for (auto s : {"true", "TRUE", "y", "yes", "on", "1", " t"}) CHECK(named("bool", s) == "t");
    for (auto s : {"false", "n", "no", "off", "of", "0", "F"}) CHECK(named("bool", s) == "f");
    CHECK(named("bool", "o") == "?");
    CHECK(named("bool", "maybe") == "?");

    CHECK(named("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11") == "");
    CHECK(named("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11") == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    CHECK(named("uuid", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}") == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    CHECK(named("uuid", "a0eebc999c0b4ef8bb6d6bb9bd380a11") == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    CHECK(named("uuid", "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11") == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    CHECK(named("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1") == "?");
    CHECK(named("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-") == "?");

    CHECK(named("text", " 01 ") == "");
    CHECK(named("varchar", "+1") == "");
    CHECK(named("name", std::string(63, 'n')) == "");
    CHECK(named("name", std::string(64, 'n')) == std::string(63, 'n'));

    CHECK(named("date", "2026-02-28") == "");
    CHECK(named("date", "2024-02-29") == "");
    CHECK(named("date", "0044-03-15 BC") == "");
    CHECK(named("date", "infinity") == "");
    CHECK(named("date", "2026-2-28") == "?");
    CHECK(named("date", "2026-02-30") == "?");
    CHECK(named("date", "2025-02-29") == "?");
    CHECK(named("date", "Feb 28 2026") == "?");
    CHECK(named("date", " 2026-02-28") == "2026-02-28");

    CHECK(named("timestamp", "2026-02-28 12:34:56") == "");
    CHECK(named("timestamp", "2026-02-28 12:34:56.5") == "");
    CHECK(named("timestamp", "2026-02-28 12:34:56.500") == "2026-02-28 12:34:56.5");
    CHECK(named("timestamp", "2026-02-28 12:34:56.000") == "2026-02-28 12:34:56");
    CHECK(named("timestamp", "2026-02-28T12:34:56") == "2026-02-28 12:34:56");
    CHECK(named("timestamp", "2026-02-28 24:00:00") == "?");
    CHECK(named("timestamptz", "2026-02-28 12:34:56+00") == "");
    CHECK(named("timestamptz", "2026-02-28T12:34:56Z") == "2026-02-28 12:34:56+00");
    CHECK(named("timestamptz", "2026-02-28 12:34:56+00:00") == "2026-02-28 12:34:56+00");
    CHECK(named("timestamptz", "2026-02-28 12:34:56+02") == "?");
    CHECK(named("timestamptz", "2026-02-28 12:34:56") == "?");

    // types not checked: taken as written
    CHECK(named("", "anything") == "");
    CHECK(named("tsrange", "[2026-01-01,2026-01-02)") == "");
    CHECK(named("inet", "10.0.0.1/32") == "10.0.0.1");  // checked now: the same value printed
}

TEST_CASE("check_key names the param, passes NULL, and checks nothing without key types") {
    CHECK(check_key({"int4", "text"}, {std::string("1"), std::string("x")}).ok);
    CHECK(check_key({"int4"}, {std::nullopt}).ok);
    CHECK(check_key({}, {std::string("01")}).ok);
    KeyCheck bad = check_key({"text", "int8"}, {std::string("a"), std::string("+5")});
    CHECK_FALSE(bad.ok);
    CHECK(bad.problem == "param 2 (int8): not in canonical form: the same value is spelled \"5\"");
}

namespace {

const char* kTypedDefinitions = R"({"generation": 4,
 "queries": [{"name": "order", "sql": "SELECT doc FROM orders WHERE id = $1", "params": ["order_id"],
              "search_path": "public", "key_types": ["int4"]},
             {"name": "user", "sql": "SELECT doc FROM users WHERE id = $1", "params": ["user_id"],
              "search_path": "public", "key_types": ["uuid"]}],
 "watches": [{"query": "order", "relid": 16384, "schema": "public", "table": "orders",
              "columns": [{"name": "id", "attnum": 1}],
              "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null}]})";

}  // namespace

TEST_CASE("warm, touch and liveness polls with a non-canonical or foreign key compute and keep nothing") {
    Harness h;
    h.engine.load_definitions(parse_definitions(kTypedDefinitions));
    h.runner.rows["db:order:1"] = R"({"id":1})";
    std::vector<std::string> aliases = {"db:order:01", "db:order:001", "db:order:+1", "db:order: 1",
                                        "db:order:1 ", "db:order:-0", "db:order:abc", "db:order:99999999999",
                                        "db:user:A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"};
    for (const auto& channel : aliases) {
        h.engine.warm(channel);
        h.engine.touch(channel);
    }
    for (int poll = 0; poll < 3; ++poll) {
        std::vector<std::string> listed = aliases;
        listed.push_back("db:order:1");
        h.engine.sync_live(listed, true);
        h.drain();
    }
    // only the canonical channel was computed, once, and is the only doc kept
    CHECK(h.runner.doc_calls.size() == 1);
    CHECK(h.publisher.count("db:order:1") == 1);
    for (const auto& channel : aliases) CHECK_MESSAGE(h.publisher.count(channel) == 0, channel);
    auto stats = h.engine.stats();
    CHECK(stats.live_docs == 1);
    CHECK(stats.refused_channels >= aliases.size() * 2);
    // a change to order 1 reaches its one channel
    h.txn({update_order_status("1")}, 1);
    h.drain();
    CHECK(h.publisher.count("db:order:1") == 2);
}

TEST_CASE("at start, retained channels that name no doc are handed to the sink to expire, not made live") {
    EngineOptions options = test_options();
    options.live_all = true;
    Harness h(options);
    h.engine.stop();
    h.engine.load_definitions(parse_definitions(kTypedDefinitions));
    h.publisher.retained = {"db:order:1", "db:order:01", "db:nosuch:1", "db:order:1:2", "db:order:+2", "db:order:2"};
    h.engine.start(0);
    CHECK(h.publisher.orphans == std::vector<std::string>{"db:order:01", "db:nosuch:1", "db:order:1:2", "db:order:+2"});
    CHECK(h.engine.stats().live_docs == 2);
}

TEST_CASE("keys PostgreSQL cannot read are refused: dates and timestamps out of range, text not UTF-8") {
    // the ends of each type's range (PostgreSQL's datatype/timestamp.h) and one past them
    CHECK(check_key_text("timestamp", "294276-12-31 23:59:59.999999").ok);
    CHECK_FALSE(check_key_text("timestamp", "294277-01-01 00:00:00").ok);
    CHECK_FALSE(check_key_text("timestamptz", "294277-01-01 00:00:00+00").ok);
    CHECK_FALSE(check_key_text("timestamptz", "294277-01-01T00:00:00Z").ok);
    CHECK(check_key_text("timestamp", "4714-11-24 00:00:00 BC").ok);
    CHECK_FALSE(check_key_text("timestamp", "4714-11-23 00:00:00 BC").ok);
    CHECK_FALSE(check_key_text("timestamp", "4715-01-01 00:00:00 BC").ok);
    CHECK(check_key_text("date", "5874897-12-31").ok);
    CHECK_FALSE(check_key_text("date", "5874898-01-01").ok);
    CHECK(check_key_text("date", "4714-11-24 BC").ok);
    CHECK_FALSE(check_key_text("date", "4714-11-23 BC").ok);
    CHECK(check_key_text("date", "2026-01-01").ok);
    KeyCheck far = check_key_text("date", "5874898-01-01");
    CHECK(far.problem.find("out of range") != std::string::npos);
    // not UTF-8: refused whatever the type, a checked one, a string type or one docsync does not know
    for (std::string bad : {std::string("\xc3\x28"), std::string("a\xff"), std::string("\xed\xa0\x80"),
                            std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80"), std::string("\xe2\x82")}) {
        CHECK_FALSE(check_key_text("text", bad).ok);
        CHECK_FALSE(check_key_text("varchar", bad).ok);
        CHECK_FALSE(check_key_text("", bad).ok);
        CHECK_FALSE(check_key({}, {bad}).ok);
    }
    CHECK(check_key_text("text", "h\xc3\xa9llo \xf0\x9f\x98\x80").ok);
}

TEST_CASE("a refusal names the doc's channel escaped as a channel, not the bare value") {
    KeyCheck t = check_channel_key("byat", {"timestamp"}, {std::string("2026-01-01T00:00:00")});
    CHECK_FALSE(t.ok);
    CHECK(t.problem.find("the doc's channel is \"db:byat:2026-01-01 00%3A00%3A00\"") != std::string::npos);
    KeyCheck two = check_channel_key("pair", {"int4", "int4"}, {std::string("01"), std::string("2")});
    CHECK(two.problem.find("\"db:pair:1:2\"") != std::string::npos);
    // another value not canonical either: no channel is named that would be refused in turn
    KeyCheck both = check_channel_key("pair", {"int4", "int4"}, {std::string("01"), std::string("02")});
    CHECK_FALSE(both.ok);
    CHECK(both.problem.find("db:pair") == std::string::npos);
    CHECK(check_channel_key("byat", {"timestamp"}, {std::string("2026-01-01 00:00:00")}).ok);
}

TEST_CASE("a domain over a sized type is checked at its size: varchar(n), bpchar(n), timestamp(p)") {
    // PostgreSQL reads 'abc ' and 'abc  ' as the varchar(3) 'abc'
    CHECK(named("varchar(3)", "abc") == "");
    CHECK(named("varchar(3)", "ab") == "");
    CHECK(named("varchar(3)", "abc ") == "abc");
    CHECK(named("varchar(3)", "abc  ") == "abc");
    CHECK(named("varchar(3)", "abcd") == "?");
    CHECK(named("varchar(2)", "\xc3\xa9\xc3\xa9 ") == "\xc3\xa9\xc3\xa9");  // characters, not bytes
    // a bpchar prints padded to its size
    CHECK(named("bpchar(3)", "abc") == "");
    CHECK(named("bpchar(3)", "ab") == "ab ");
    CHECK(named("bpchar(3)", "abc ") == "abc");
    CHECK(named("bpchar(3)", "abcd") == "?");
    // a timestamp(0) keeps no fraction
    CHECK(named("timestamp(0)", "2026-01-01 00:00:00") == "");
    CHECK(named("timestamp(0)", "2026-01-01 00:00:00.5") == "?");
    CHECK(named("timestamptz(2)", "2026-01-01 00:00:00.25+00") == "");
    CHECK(named("timestamptz(2)", "2026-01-01 00:00:00.125+00") == "?");
    CHECK(named("timestamp(3)", "2026-01-01T00:00:00") == "2026-01-01 00:00:00");
}

TEST_CASE("network addresses, bit strings and integer ranges: the form PostgreSQL prints") {
    // inet: /32 (/128) left out, IPv6 in lower case with the longest run of zero groups as ::
    CHECK(named("inet", "10.0.0.1") == "");
    CHECK(named("inet", "10.0.0.1/32") == "10.0.0.1");
    CHECK(named("inet", "10.0.0.1/8") == "");
    CHECK(named("inet", "::1") == "");
    CHECK(named("inet", "0:0::1") == "::1");
    CHECK(named("inet", "0:0:0:0:0:0:0:1/128") == "::1");
    CHECK(named("inet", "2001:DB8::1") == "2001:db8::1");
    CHECK(named("inet", "1:0:0:1:0:0:0:1") == "1:0:0:1::1");
    CHECK(named("inet", "::FFFF:102:304") == "::ffff:1.2.3.4");
    CHECK(named("inet", "010.0.0.1") == "?");
    CHECK(named("inet", "fe80::1%eth0") == "?");
    // cidr: always /n, host bits zero
    CHECK(named("cidr", "10.0.0.0/8") == "");
    CHECK(named("cidr", "10.0.0.0") == "10.0.0.0/32");
    CHECK(named("cidr", "10.0.0.1/8") == "?");
    CHECK(named("cidr", "2001:DB8::/32") == "2001:db8::/32");
    // macaddr, macaddr8: lower-case, colons
    CHECK(named("macaddr", "08:00:2b:01:02:03") == "");
    CHECK(named("macaddr", "08-00-2B-01-02-03") == "08:00:2b:01:02:03");
    CHECK(named("macaddr", "0800.2b01.0203") == "08:00:2b:01:02:03");
    CHECK(named("macaddr8", "08:00:2b:01:02:03") == "08:00:2b:ff:fe:01:02:03");
    // bit strings: 0s and 1s, B and X spellings named; a bit(n) holds exactly n
    CHECK(named("bit", "101") == "");
    CHECK(named("bit", "B101") == "101");
    CHECK(named("bit(4)", "X5") == "0101");
    CHECK(named("bit(4)", "101") == "?");
    CHECK(named("varbit(4)", "XF") == "1111");
    CHECK(named("varbit(4)", "X1F") == "?");
    // integer ranges: [lower,upper), empty
    CHECK(named("int4range", "[1,3)") == "");
    CHECK(named("int4range", "[1,2]") == "[1,3)");
    CHECK(named("int4range", "(0,3)") == "[1,3)");
    CHECK(named("int4range", "[3,3)") == "empty");
    CHECK(named("int4range", "EMPTY") == "empty");
    CHECK(named("int4range", "[,3]") == "(,4)");
    CHECK(named("int4range", "[3,2]") == "?");
    CHECK(named("int8range", "[1,2]") == "[1,3)");
    // the gateway's check is this one: a refusal names the doc's one channel
    KeyCheck ip = check_channel_key("host", {"inet"}, {std::string("0:0::1")});
    CHECK_FALSE(ip.ok);
    CHECK(ip.problem.find("the doc's channel is \"db:host:%3A%3A1\"") != std::string::npos);
}

TEST_CASE("a char(n) key without its width (bpchar): trailing spaces are no part of it") {
    // 'FR', 'FR ' and 'FR  ' are one bpchar (its equality ignores trailing spaces): one spelling
    CHECK(key_type_checked("bpchar"));  // decided here, no round trip to the server
    CHECK(named("bpchar", "FR") == "");
    CHECK(named("bpchar", "FR ") == "FR");
    CHECK(named("bpchar", "FR     ") == "FR");
    CHECK(named("bpchar", " FR") == "");  // leading spaces are part of the value
    CHECK(named("bpchar", "F R") == "");
    // blanks alone are the empty value; NULL is no value at all
    CHECK(named("bpchar", "") == "");
    CHECK(named("bpchar", " ") == "");
    CHECK(check_key_text("bpchar", "   ").canonical == std::optional<std::string>(""));
    CHECK(check_key({"bpchar"}, {std::nullopt}).ok);
    // only U+0020 pads: a tab, a newline, a no-break space, an ideographic space are characters
    for (std::string other : {"\t", "\n", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x83"}) {
        CHECK_MESSAGE(named("bpchar", "FR" + other) == "", other);
        CHECK_MESSAGE(named("bpchar", "FR" + other + " ") == "FR" + other, other);
    }
    // Unicode and very long values: characters kept, spaces cut, no size limit
    CHECK(named("bpchar", "\xc3\xa9t\xc3\xa9 ") == "\xc3\xa9t\xc3\xa9");
    std::string long_value(100000, 'x');
    CHECK(named("bpchar", long_value) == "");
    CHECK(check_key_text("bpchar", long_value + std::string(50000, ' ')).canonical == long_value);
    CHECK(named("bpchar", "FR \xff") == "?");  // not UTF-8
    // the refusal says why and names the doc's channel, escaped
    KeyCheck c = check_channel_key("country", {"bpchar"}, {std::string("FR ")});
    CHECK_FALSE(c.ok);
    CHECK(c.problem.find("trailing spaces") != std::string::npos);
    CHECK(c.problem.find("the doc's channel is \"db:country:FR\"") != std::string::npos);
    KeyCheck colon = check_channel_key("country", {"bpchar"}, {std::string("F:R% ")});
    CHECK(colon.problem.find("the doc's channel is \"db:country:F%3AR%25\"") != std::string::npos);
    // a domain over char(n) keeps its padded form
    CHECK(named("bpchar(3)", "FR") == "FR ");
    CHECK(named("bpchar(3)", "FR ") == "");
}

TEST_CASE("canonical_key: a key read from data is spelled as its channel") {
    std::vector<std::string> types = {"bpchar", "bpchar(5)", "int4", "text", "time"};
    SqlArgs read = {std::string("FR "), std::string("FR"), std::string("7"), std::string("a "), std::string("12:00")};
    SqlArgs want = {std::string("FR"), std::string("FR   "), std::string("7"), std::string("a "), std::string("12:00")};
    CHECK(canonical_key(types, read) == want);
    CHECK(canonical_key(types, {std::nullopt, std::nullopt}) == SqlArgs{std::nullopt, std::nullopt});
    CHECK(canonical_key({}, {std::string("FR ")}) == SqlArgs{std::string("FR ")});  // no key types: as read
    // a value without a canonical spelling stays as read (and is refused as a channel)
    CHECK(canonical_key({"bpchar(2)"}, {std::string("FRA")}) == SqlArgs{std::string("FRA")});
}

TEST_CASE("canonical_key: a bpchar[] read from data has its elements' trailing spaces cut, quoted as PostgreSQL quotes") {
    auto trimmed = [](const std::string& printed) { return *canonical_key({"_bpchar"}, {printed})[0]; };
    CHECK(trimmed("{FR,DE}") == "{FR,DE}");
    CHECK(trimmed("{\"FR \",\"DE  \"}") == "{FR,DE}");
    CHECK(trimmed("{\"FR \",NULL}") == "{FR,NULL}");
    CHECK(trimmed("{\"NULL \",\"null\"}") == "{\"NULL\",\"null\"}");  // still no SQL NULL
    CHECK(trimmed("{\"   \",\"\"}") == "{\"\",\"\"}");                // blanks alone: the empty value
    CHECK(trimmed("{\" F \",\"a b \"}") == "{\" F\",\"a b\"}");          // a space inside stays quoted
    CHECK(trimmed("{\"F\t \"}") == "{\"F\t\"}");                         // a tab is a character
    CHECK(trimmed("{\"a,b \",\"q\\\" \",\"s\\\\ \",\"{x} \"}") == "{\"a,b\",\"q\\\"\",\"s\\\\\",\"{x}\"}");
    CHECK(trimmed("{{\"a \",b},{c,\"d \"}}") == "{{a,b},{c,d}}");
    CHECK(trimmed("[0:1]={\"a \",b}") == "[0:1]={a,b}");
    CHECK(trimmed("{}") == "{}");
    CHECK(trimmed("{\"\xc3\xa9 \"}") == "{\xc3\xa9}");
    // not array_out's form: left as read, for the server check to judge
    for (std::string odd : {"FR ", "{", "{a", "{\"a}", "{a,}", "{a}x", "{ a}", "[0:1]{a}", "{a b}"})
        CHECK_MESSAGE(trimmed(odd) == odd, odd);
}

namespace {

constexpr Oid kCountries = 16600, kCities = 16610;

const char* kCountryDefinitions = R"({"generation": 5,
 "queries": [{"name": "country", "sql": "SELECT doc FROM countries WHERE code = $1", "params": ["code"],
              "search_path": "public", "key_types": ["bpchar"]}],
 "watches": [{"query": "country", "relid": 16600, "schema": "public", "table": "countries",
              "columns": [{"name": "code", "attnum": 1}],
              "keys_sql": null, "keys_args": [], "allow_broadcast": false, "broadcast": false, "read_columns": null},
             {"query": "country", "relid": 16610, "schema": "public", "table": "cities",
              "columns": [], "keys_sql": "SELECT country FROM cities WHERE id = $1",
              "keys_args": [{"name": "id", "attnum": 1}], "allow_broadcast": false, "broadcast": false, "read_columns": null}]})";

}  // namespace

TEST_CASE("a char(3) key printed padded by a change or a keys query names the doc's one channel") {
    EngineOptions options = test_options();
    options.live_all = true;
    Harness h(options);
    h.engine.load_definitions(parse_definitions(kCountryDefinitions));
    h.engine.on_relation(relation(kCountries, "public", "countries", {{1, "code"}, {2, "n"}}));
    h.engine.on_relation(relation(kCities, "public", "cities", {{1, "id"}, {2, "country"}}));
    h.runner.rows["db:country:FR"] = R"({"n":1})";
    h.runner.rows["db:country:FR "] = R"({"n":1})";
    h.runner.keys[{std::string("9")}] = {{std::string("FR ")}};
    // a char(3) column prints 'FR' as 'FR ', before and after an UPDATE that keeps the key
    h.txn({ChangeRecord{ChangeOp::Update, kCountries, {text("FR "), text("2")}, {same(), text("1")}}}, 1);
    h.drain();
    CHECK(h.publisher.count("db:country:FR") == 1);
    CHECK(h.publisher.count("db:country:FR ") == 0);
    // a city's keys query returns the country padded too
    h.txn({ChangeRecord{ChangeOp::Insert, kCities, {text("9"), text("FR ")}, {}}}, 2);
    h.drain();
    CHECK(h.publisher.count("db:country:FR") == 2);
    CHECK(h.publisher.count("db:country:FR ") == 0);
    CHECK(h.engine.stats().live_docs == 1);
    CHECK(h.engine.stats().refused_channels == 0);
    // a client asking for the padded spelling is refused; the doc stays one
    h.engine.warm("db:country:FR  ");
    h.engine.warm("db:country:FR%20");  // no escape build_channel writes: no channel at all
    h.drain();
    CHECK(h.publisher.count("db:country:FR  ") == 0);
    CHECK(h.publisher.count("db:country:FR%20") == 0);
    CHECK(h.runner.doc_calls.size() == 2);
    CHECK(h.engine.stats().refused_channels == 1);
}

TEST_CASE("at start, a retained padded char(n) channel names no doc") {
    EngineOptions options = test_options();
    options.live_all = true;
    Harness h(options);
    h.engine.stop();
    h.engine.load_definitions(parse_definitions(kCountryDefinitions));
    h.publisher.retained = {"db:country:FR", "db:country:FR ", "db:country:   ", "db:country:"};
    h.engine.start(0);
    CHECK(h.publisher.orphans == std::vector<std::string>{"db:country:FR ", "db:country:   "});
    CHECK(h.engine.stats().live_docs == 2);
}
