// The JSON config file: syntax errors with line and column, JSON types per setting, duplicates.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "config/settings.hpp"

using namespace docsync;

TEST_CASE("config values become setting text by JSON type") {
    auto values = parse_config_text(R"({"pool": 4, "max-doc-bytes": "1MB", "create-slot": false, "slot": "s"})", "x.json");
    REQUIRE(values.size() == 4);
    CHECK(values[0] == std::pair<std::string, std::string>{"pool", "4"});
    CHECK(values[1] == std::pair<std::string, std::string>{"max-doc-bytes", "1MB"});
    CHECK(values[2] == std::pair<std::string, std::string>{"create-slot", "false"});
    CHECK(values[3] == std::pair<std::string, std::string>{"slot", "s"});
    CHECK(parse_config_text("{}", "x.json").empty());
    CHECK(parse_config_text(" \n{ }\n\n", "x.json").empty());
}

TEST_CASE("a syntax error names the line and column") {
    CHECK_THROWS_WITH_AS(parse_config_text("{\n  \"pool\": 4\n  \"slot\": \"s\"\n}", "/etc/d.json"),
                         "config file \"/etc/d.json\": invalid JSON at line 3 column 3 (Missing a comma or '}' after "
                         "an object member.); fix the syntax",
                         SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text("", "d.json"), doctest::Contains("invalid JSON at line 1 column 1"), SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text("{} {}", "d.json"), doctest::Contains("text after the JSON object"), SettingError);
}

TEST_CASE("the wrong JSON type for a setting is refused with the expected type") {
    CHECK_THROWS_WITH_AS(parse_config_text("[1]", "d.json"), doctest::Contains("not a JSON object"), SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"statement-timeout": 5})", "d.json"),
                         doctest::Contains("\"statement-timeout\": expected a duration string with a unit"), SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"create-slot": "yes"})", "d.json"),
                         doctest::Contains("\"create-slot\": expected true or false"), SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"pool": -1})", "d.json"), doctest::Contains("\"pool\": expected a whole number"),
                         SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"max-doc-bytes": 1.5})", "d.json"),
                         doctest::Contains("expected a size such as \"1GB\""), SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"dsn": null})", "d.json"), doctest::Contains("\"dsn\": expected a string"),
                         SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"slot": "a\u0000b"})", "d.json"), doctest::Contains("NUL"), SettingError);
}

TEST_CASE("a key given twice and the config key itself are refused") {
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"pool": 1, "pool": 2})", "d.json"),
                         "config file \"d.json\": \"pool\" is given twice; keep one", SettingError);
    CHECK_THROWS_WITH_AS(parse_config_text(R"({"config": "other.json"})", "d.json"),
                         doctest::Contains("\"config\" cannot be set in a config file; give it with --config"),
                         SettingError);
}

TEST_CASE("deeply nested JSON is an error, not a stack overflow") {
    // Brackets inside strings do not count.
    CHECK(parse_config_text(R"({"slot": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"})", "d.json").size() == 1);
    std::string deep = "{\"slot\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
    CHECK_THROWS_WITH_AS(parse_config_text(deep, "d.json"), doctest::Contains("nested deeper than 32 levels; a config file is one object of settings"), SettingError);
}

TEST_CASE("the sample config file shipped in the packages is valid") {
    std::vector<std::string> args{"docsync-worker", "--config", DOCSYNC_SOURCE_DIR "/packaging/docsync.json.example"};
    std::vector<const char*> argv;
    for (auto& a : args) argv.push_back(a.c_str());
    const char* envp[] = {nullptr};
    auto parsed = parse_settings(static_cast<int>(argv.size()), argv.data(), envp);
    REQUIRE_MESSAGE(parsed.run, parsed.error);
    CHECK(parsed.settings.dsn.find("user=docsync_repl") != std::string::npos);
    CHECK(parsed.settings.pool_dsn.find("user=docsync_reader") != std::string::npos);
    CHECK(parsed.settings.max_retained_wal == 1ull << 30);
}
