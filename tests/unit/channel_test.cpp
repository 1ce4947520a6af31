// Channel naming against the shared vectors (tests/channel_vectors.tsv), and its injectivity.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/channel.hpp"

using docsync::build_channel;
using docsync::SqlArgs;

TEST_CASE("channels match the shared test vectors") {
    std::ifstream in(DOCSYNC_SOURCE_DIR "/tests/channel_vectors.tsv");
    REQUIRE(in.good());
    std::string line;
    int checked = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        auto tab1 = line.find('\t');
        auto tab2 = line.find('\t', tab1 + 1);
        REQUIRE(tab2 != std::string::npos);
        std::string query = line.substr(0, tab1);
        std::string values_json = line.substr(tab1 + 1, tab2 - tab1 - 1);
        std::string expected = line.substr(tab2 + 1);
        rapidjson::Document doc;
        doc.Parse(values_json.c_str());
        REQUIRE_MESSAGE(doc.IsArray(), values_json);
        SqlArgs values;
        for (const auto& v : doc.GetArray())
            values.push_back(v.IsNull() ? std::nullopt : std::optional<std::string>(v.GetString()));
        CHECK_MESSAGE(build_channel(query, values) == expected, values_json);
        ++checked;
    }
    CHECK(checked >= 10);
}

TEST_CASE("different values never share a channel") {
    const SqlArgs cases[] = {
        {"a:b"}, {"a", "b"}, {std::nullopt}, {""}, {"%00"}, {"%"}, {"%25"}, {"a", ""}, {"a:"}, {":", ""},
        {"", ":"}, {std::nullopt, std::nullopt}, {"", ""}, {}, {std::string("\x01", 1)}, {"%01"},
    };
    std::set<std::string> seen;
    for (const auto& values : cases) CHECK(seen.insert(build_channel("q", values)).second);
}

// Values built to collide: every sequence of up to three of these atoms (the separator, the escape
// character, escapes spelled out, NULL, empty, control bytes) names a different doc, so each must
// get its own channel, and parse_channel must give the values back. regress/sql/20_sqlapi_channel.sql
// checks the same set through docsync.channel().
TEST_CASE("values crafted to collide never share a channel") {
    const std::optional<std::string> atoms[] = {
        std::nullopt, "", ":", "%", "%3A", "%00", "%25", "a", "a:", ":a", std::string("\x01", 1), "\n", "%0A",
    };
    std::vector<SqlArgs> all{{}};
    for (std::size_t length = 1, from = 0; length <= 3; ++length) {
        std::size_t to = all.size();
        for (std::size_t i = from; i < to; ++i)
            for (const auto& atom : atoms) {
                SqlArgs next = all[i];
                next.push_back(atom);
                all.push_back(std::move(next));
            }
        from = to;
    }
    std::set<std::string> seen;
    for (const auto& values : all) {
        std::string channel = build_channel("q", values);
        CHECK_MESSAGE(seen.insert(channel).second, channel);
        docsync::ParsedChannel parsed;
        REQUIRE_MESSAGE(docsync::parse_channel(channel, parsed), channel);
        CHECK(parsed.query == "q");
        CHECK(parsed.values == values);
    }
    CHECK(seen.size() == 1 + 13 + 13 * 13 + 13 * 13 * 13);
}
