// Channel naming against the shared vectors (tests/channel_vectors.tsv), and its injectivity.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <fstream>
#include <set>
#include <string>

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
