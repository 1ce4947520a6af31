// The worker's decoder against golden bytes captured from the real plugin (tests/wire_golden.txt,
// produced by tests/wire_golden.sh): every line's binary record decodes, in order with one Decoder,
// to the record the plugin's text format describes on the same line (rendered by ../wire_text.hpp).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../wire_text.hpp"

using namespace docsync;

using docsync_test::from_hex;
using docsync_test::TextRenderer;

TEST_CASE("golden bytes from the plugin decode to what its text format says, every record type and kind") {
    std::ifstream in(std::string(DOCSYNC_SOURCE_DIR) + "/tests/wire_golden.txt");
    REQUIRE_MESSAGE(in.good(), "tests/wire_golden.txt is produced from the real plugin by tests/wire_golden.sh");
    Decoder decoder;
    TextRenderer renderer;
    std::string line;
    int lines = 0;
    std::map<std::size_t, int> seen;  // record variant index → count
    bool kinds[5] = {};
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto tab = line.find('\t');
        REQUIRE(tab != std::string::npos);
        auto bytes = from_hex(line.substr(0, tab));
        Record record = decoder.decode(bytes);
        CHECK(renderer.render(record) == line.substr(tab + 1));
        seen[record.index()]++;
        if (auto* c = std::get_if<ChangeRecord>(&record)) {
            for (const auto* values : {&c->new_values, &c->old_values})
                for (const auto& v : *values) {
                    if (v.kind == ValueKind::Null) kinds[0] = true;
                    if (v.kind == ValueKind::Text) kinds[1] = true;
                    if (v.kind == ValueKind::Toast) kinds[2] = true;
                    if (v.kind == ValueKind::Same) kinds[3] = true;
                    if (v.kind == ValueKind::Unknown) kinds[4] = true;
                }
        }
        if (auto* c = std::get_if<CommitRecord>(&record)) CHECK(c->end_lsn > c->commit_lsn);
        ++lines;
    }
    CHECK(lines > 0);
    CHECK(seen.size() == std::variant_size_v<Record>);  // every record type occurs
    for (bool k : kinds) CHECK(k);                     // and every value kind
}

TEST_CASE("every truncation of every golden record is a clean DecodeError") {
    std::ifstream in(std::string(DOCSYNC_SOURCE_DIR) + "/tests/wire_golden.txt");
    REQUIRE(in.good());
    Decoder decoder;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto bytes = from_hex(line.substr(0, line.find('\t')));
        for (std::size_t n = 0; n < bytes.size(); ++n) {
            std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
            CHECK_THROWS_AS(decoder.decode(cut), DecodeError);
        }
        decoder.decode(bytes);  // keeps the RELATION state for later lines
    }
}
