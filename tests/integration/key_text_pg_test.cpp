// Canonical key text (engine/key_text.hpp) against the server itself: for every type the worker
// checks, each spelling of a set of values (extremes, signs, zeros, case, braces, separators, BC,
// infinity, fractions) is read by PostgreSQL with the settings every worker connection pins; what
// it prints must be accepted as canonical, any other spelling it reads must be refused naming
// exactly what it prints, and a spelling it refuses must be refused too. A disagreement would
// refuse a real doc's channel, or let an alias through.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "engine/key_text.hpp"
#include "executor_support.hpp"

using namespace docsync;
using namespace docsync::test;

TEST_CASE("canonical key text is what PostgreSQL prints, for every checked type") {
    pg::Connection db = admin();
    sql1(db, "SET TimeZone = 'UTC'");
    sql1(db, "SET DateStyle = 'ISO, MDY'");
    std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"int2", {"0", "-0", "+0", "00", "1", "01", "+1", " 1", "1 ", "-1", "32767", "32768", "-32768", "-32769", "1.0", "abc", ""}},
        {"int4", {"0", "7", "007", "+7", "-7", "2147483647", "2147483648", "-2147483648", " -5 ", "1e3", "0x10", "--1"}},
        {"int8", {"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                  "+42", "0042", "42"}},
        {"oid", {"0", "1", "01", "4294967295", "4294967296", "-1", "-2147483648", " 12"}},
        {"bool", {"t", "f", "true", "TRUE", "yes", "y", "on", "off", "of", "o", "1", "0", "no", " t ", "maybe", ""}},
        {"uuid", {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
                  "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc999c0b4ef8bb6d6bb9bd380a11",
                  "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "x"}},
        {"name", {"x", std::string(63, 'n'), std::string(64, 'n'), std::string(62, 'n') + "é"}},
        {"date", {"2026-02-28", "2026-2-28", " 2026-02-28", "2024-02-29", "2025-02-29", "0099-01-01", "0044-03-15 BC",
                  "10000-01-01", "infinity", "-infinity", "Feb 28 2026", "20260228"}},
        {"timestamp", {"2026-02-28 12:34:56", "2026-02-28 12:34:56.5", "2026-02-28 12:34:56.500",
                       "2026-02-28 12:34:56.000", "2026-02-28T12:34:56", "2026-02-28 24:00:00", "2026-02-28 12:34",
                       "2026-02-28 12:34:56.123456", "0044-03-15 10:00:00 BC", "infinity"}},
        {"timestamptz", {"2026-02-28 12:34:56+00", "2026-02-28T12:34:56Z", "2026-02-28 12:34:56+00:00",
                         "2026-02-28 12:34:56+02", "2026-02-28 12:34:56", "2026-02-28 12:34:56.250+00",
                         "2026-02-28 12:34:56.25+00", "-infinity"}},
        {"inet", {"10.0.0.1", "10.0.0.1/32", "10.0.0.1/8", "10.0.0.0/8", "010.0.0.1", "10.0.0", "10.0.0.256", " 10.0.0.1",
                  "::1", "0:0::1", "0:0:0:0:0:0:0:1", "::1/128", "::1/64", "::", "::/0", "1::", "1:0:0:1::", "1:0:0:1:0:0:0:1",
                  "1::1:0:0:1", "2001:DB8::1", "2001:db8:0:0:1:0:0:1", "::ffff:1.2.3.4", "::FFFF:102:304", "::1.2.3.4",
                  "::0.0.0.1", "::ffff:0:0", "::ffff", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:::2", ":1::", "fe80::1%eth0",
                  "10.0.0.1/33", "::1/129", "10.0.0.1/08", "1:2:3:4:5:6:1.2.3.4", "", "x"}},
        {"cidr", {"10.0.0.0/8", "10.0.0.0", "10.0.0.0/32", "10/8", "10.1.0.0/16", "10.1.0.1/16", "::/0", "::", "2001:db8::/32",
                  "2001:DB8::/32", "2001:db8:0::/32", "2001:db8::1/32", "0.0.0.0/0"}},
        {"macaddr", {"08:00:2b:01:02:03", "08:00:2B:01:02:03", "08-00-2b-01-02-03", "08002b:010203", "08002b-010203",
                     "0800.2b01.0203", "0800-2b01-0203", "08002b010203", "8:0:2b:1:2:3", "08:00:2b:01:02", "08:00:2b:01:02:03:04", ""}},
        {"macaddr8", {"08:00:2b:01:02:03:04:05", "08-00-2b-01-02-03-04-05", "08002b0102030405", "0800.2b01.0203.0405",
                      "08:00:2b:01:02:03", "08:00:2B:FF:FE:01:02:03", "08002b:0102030405", "08:00:2b:01:02:03:04"}},
        {"bit", {"101", "B101", "b101", "X5", "x0f", "", "102", " 101", "X"}},
        {"bit(3)", {"101", "B101", "1010", "10", "x5"}},
        {"bit(4)", {"0101", "X5", "x5", "B0101", "101"}},
        {"varbit", {"1", "0001", "B1", "XF", "", "12"}},
        {"varbit(4)", {"1", "0001", "B1", "XF", "X1F", "10101"}},
        {"int4range", {"[1,3)", "[1,2]", "(0,3)", "(0,2]", "[ 1,3)", "[\"1\",3)", " [1,3) ", "empty", "EMPTY", "[3,3)", "(3,3]",
                       "[3,3]", "[3,2]", "(,3)", "[,3)", "(,3]", "[1,)", "[1,]", "(,)", "[,]", "[-0,+5)", "[01,3)",
                       "[2147483646,2147483647]", "(2147483647,)", "[-2147483648,0)", "[-2147483649,0)", "[1,3", "1,3", "[a,3)",
                       "[1,2,3)", "[1,3)x", "[ 1 , 3 )"}},
        {"int8range", {"[1,3)", "[1,2]", "(,9223372036854775807)", "[9223372036854775806,9223372036854775807]",
                       "[-9223372036854775808,0)", "(-9223372036854775808,0)", "empty"}},
    };
    int checked = 0;
    for (const auto& one_case : cases) {
        const std::string& type = one_case.first;  // named, not bound: doctest's INFO captures it
        for (const auto& text : one_case.second) {
            std::string quoted;
            for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
            std::optional<std::string> printed;
            try {
                // a cast to bit is to bit(1); a bit param reads any length, as the quoted name does
                std::string cast = type.starts_with("varbit(") ? "bit varying" + type.substr(6) : type == "bit" ? "\"bit\"" : type;
                printed = sql1(db, "SELECT '" + quoted + "'::" + cast);  // its output function's text
            } catch (const Error&) {
                printed.reset();
            }
            KeyCheck check = check_key_text(type, text);
            INFO(type, " '", text, "' -> ", printed.value_or("(refused)"), ": ", check.problem);
            if (!printed) {
                CHECK_FALSE(check.ok);
                continue;
            }
            CHECK(check_key_text(type, *printed).ok);
            CHECK(check.ok == (text == *printed));
            if (!check.ok && check.problem.find("spelled \"") != std::string::npos)
                CHECK(check.problem.find("spelled \"" + *printed + "\"") != std::string::npos);
            ++checked;
        }
    }
    CHECK(checked > 60);
}

TEST_CASE("a width-less bpchar key: its canonical text is the server's equal value, selecting the same rows") {
    // A char(n) column's param is typed bpchar without the width. Its output prints trailing spaces
    // as read, but they are no part of the value: the canonical text is what a cast to text gives,
    // equal to every spelling the check refuses, and selecting the same char(3) rows as a param.
    pg::Connection db = admin();
    auto with = [&](const std::string& sql, const std::string& param) {
        auto r = db.exec(sql, pg::Params{param}, pg::deadline_in(std::chrono::seconds(60)));
        return std::string(r.get(0, 0));
    };
    sql1(db, "CREATE TEMP TABLE bpchar_keys (code char(3) PRIMARY KEY, n int)");
    sql1(db, "INSERT INTO bpchar_keys VALUES ('FR', 1), ('', 2), (E'F\\t', 3), ('é', 4)");
    const std::vector<std::string> spellings = {"FR", "FR ", "FR  ", "FR     ", " FR", "", " ", "   ", "F\t", "F\t ",
                                                "F\xc2\xa0", "F\xc2\xa0 ", "\xc3\xa9", "\xc3\xa9  ", "a:b %", "a:b % "};
    for (const auto& text : spellings) {
        std::string quoted;
        for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
        std::string as_text = sql1(db, "SELECT '" + quoted + "'::bpchar::text");
        KeyCheck check = check_key_text("bpchar", text);
        INFO("'", text, "' -> '", as_text, "': ", check.problem);
        CHECK(check.ok == (text == as_text));
        std::string canonical = check.ok ? text : check.canonical.value_or("?");
        CHECK(canonical == as_text);
        CHECK(check_key_text("bpchar", canonical).ok);
        // one value: equal as bpchar, and the same row (or none) for the spelling and its canonical text
        CHECK(with("SELECT '" + quoted + "'::bpchar = $1::bpchar", canonical) == "t");
        CHECK(sql1(db, "SELECT coalesce(max(n), 0)::text FROM bpchar_keys WHERE code = '" + quoted + "'::bpchar") ==
              with("SELECT coalesce(max(n), 0)::text FROM bpchar_keys WHERE code = $1", canonical));
    }
    // a tab or a no-break space is a character: not equal to the value without it
    CHECK(sql1(db, "SELECT E'FR\\t'::bpchar = 'FR'::bpchar") == "f");
    CHECK(sql1(db, "SELECT 'FR\xc2\xa0'::bpchar = 'FR'::bpchar") == "f");
}

TEST_CASE("a bpchar[] key: the server check and a key read from data agree on trimmed elements") {
    // bpchar[] is spelled-checked by the server (Executor::print_keys prints $n::text[], its elements
    // cut of their trailing spaces); a key read from data (a char(3)[] column, printed padded) is
    // put in the same form by canonical_key, equal to it as a bpchar[] and selecting the same rows.
    pg::Connection db = admin();
    for (const char* setting : {"SET client_encoding = 'UTF8'", "SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, MDY'"})
        sql1(db, setting);
    Executor executor(executor_options());
    DocQuery query;
    query.name = "codes";
    query.sql = "SELECT pg_catalog.to_jsonb($1::pg_catalog.bpchar[])";
    query.params = {"codes"};
    query.key_types = {"_bpchar"};
    query.search_path = "pg_catalog";
    const std::vector<std::string> arrays = {
        "{FR,DE}", "{\"FR \",\"DE  \"}", "{\"FR \",NULL}", "{\"NULL \"}", "{\"   \",\"\"}", "{\" F \",\"a b \"}",
        "{\"F\t \"}", "{\"a,b \",\"q\\\" \",\"s\\\\ \",\"{x} \"}", "{{\"a \",b},{c,\"d \"}}", "[0:1]={\"a \",b}", "{}",
        "{\"\xc3\xa9 \"}", "{ \"FR \" , DE }"};
    for (const auto& text : arrays) {
        auto with = [&](const std::string& sql) {
            auto r = db.exec(sql, pg::Params{text}, pg::deadline_in(std::chrono::seconds(60)));
            return std::string(r.get(0, 0));
        };
        std::string printed = with("SELECT $1::pg_catalog.bpchar[]::pg_catalog.text");  // as a change prints it
        std::string trimmed = with("SELECT $1::pg_catalog.bpchar[]::pg_catalog.text[]::pg_catalog.text");
        INFO("'", text, "' prints '", printed, "', trimmed '", trimmed, "'");
        CHECK(*canonical_key({"_bpchar"}, {printed})[0] == trimmed);
        // the worker's own check (and the gateway's) refuses a spelling it can rewrite, naming
        // exactly what the server prints; the rest it leaves to the server
        KeyCheck local = check_key_text("_bpchar", text);
        if (!local.ok) CHECK(local.canonical == std::optional<std::string>(trimmed));
        if (text == trimmed) CHECK(local.ok);
        KeyPrintOutcome server = executor.print_keys(query, {text});
        REQUIRE(server.kind == OutcomeKind::Ok);
        CHECK(server.printed == SqlArgs{trimmed});
        CHECK(executor.print_keys(query, {trimmed}).printed == SqlArgs{trimmed});  // the channel is accepted
        auto same = db.exec("SELECT $1::pg_catalog.bpchar[] = $2::pg_catalog.bpchar[]", pg::Params{text, trimmed},
                            pg::deadline_in(std::chrono::seconds(60)));
        CHECK(std::string(same.get(0, 0)) == "t");
    }
}

TEST_CASE("a composite key with a char(3) attribute: the server check spells it padded, as a change prints it") {
    // The attribute keeps its width, so PostgreSQL pads it on input: (FR,1) is printed ("FR ",1),
    // the one spelling the server check accepts, and the one a change of such a column prints.
    pg::Connection db = admin();
    sql1(db, "DROP TYPE IF EXISTS docsync_test_code_pair");
    sql1(db, "CREATE TYPE docsync_test_code_pair AS (code char(3), n int)");
    Executor executor(executor_options());
    DocQuery query;
    query.name = "pair";
    query.sql = "SELECT pg_catalog.to_jsonb($1::public.docsync_test_code_pair)";
    query.params = {"p"};
    query.key_types = {""};  // outside pg_catalog: spell-checked by the server
    query.search_path = "public";
    for (std::string text : {"(FR,1)", "(\"FR \",1)", "(\"FR  \",1)", "( FR,1)"}) {
        INFO(text);
        KeyPrintOutcome server = executor.print_keys(query, {text});
        REQUIRE(server.kind == OutcomeKind::Ok);
        std::string want = text == "( FR,1)" ? "(\" FR\",1)" : "(\"FR \",1)";
        CHECK(server.printed == SqlArgs{want});
        CHECK(canonical_key(query.key_types, {want}) == SqlArgs{want});  // a change's key stays as printed
    }
    sql1(db, "DROP TYPE docsync_test_code_pair");
}
