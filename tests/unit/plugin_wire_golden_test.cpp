// The golden wire bytes (tests/wire_golden.txt, captured from the real plugin) decode, with the
// worker's decoder rendered by ../wire_text.hpp, to exactly the plugin's text-format lines; damaged
// records are refused.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../wire_text.hpp"
#include "docsync_wire.h"

using docsync::BeginRecord;
using docsync::CommitRecord;
using docsync::DecodeError;
using docsync::Decoder;
using docsync_test::from_hex;
using docsync_test::TextRenderer;

TEST_CASE("every golden record decodes to the plugin's own text line") {
    std::ifstream in(std::string(DOCSYNC_SOURCE_DIR) + "/tests/wire_golden.txt");
    REQUIRE(in.good());
    Decoder decoder;
    TextRenderer renderer;
    BeginRecord last_begin;
    std::set<char> types;
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        auto tab = line.find('\t');
        REQUIRE(tab != std::string::npos);
        auto bytes = from_hex(std::string_view(line).substr(0, tab));
        INFO("line " << lines + 1);
        auto record = decoder.decode(bytes);
        CHECK(renderer.render(record) == line.substr(tab + 1));
        types.insert(static_cast<char>(bytes.at(0)));
        if (auto* b = std::get_if<BeginRecord>(&record)) last_begin = *b;
        if (auto* c = std::get_if<CommitRecord>(&record)) {
            CHECK(bytes[0] == DOCSYNC_REC_COMMIT);
            CHECK(c->commit_lsn == last_begin.commit_lsn);
            CHECK(c->end_lsn > c->commit_lsn);
        }
        ++lines;
    }
    CHECK(lines > 40);
    CHECK(types == std::set<char>{'B', 'R', 'I', 'U', 'D', 'T', 'M', 'C'});
}

TEST_CASE("the golden file holds every value kind and column flag") {
    std::ifstream in(std::string(DOCSYNC_SOURCE_DIR) + "/tests/wire_golden.txt");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* needle : {"=NULL", "=TOAST", "=SAME", "=UNKNOWN", "='", " identity", " missing", " CASCADE",
                               " RESTART IDENTITY", "MESSAGE transactional", "MESSAGE nontransactional"})
        CHECK_MESSAGE(all.find(needle) != std::string::npos, needle);
}

TEST_CASE("damaged records are refused, never misread") {
    Decoder decoder;
    TextRenderer renderer;
    auto decode = [&](const std::vector<std::uint8_t>& bytes) { return renderer.render(decoder.decode(bytes)); };
    // RELATION 7 public.t 'd' (id int4 identity), then INSERT 7 (id '1')
    auto relation = from_hex("5207067075626c6963017464010102696417" "01");
    auto insert = from_hex("490701740131");
    CHECK(decode(relation) == "RELATION public.t replident d: id 23 identity");
    CHECK(decode(insert) == "INSERT public.t new(id='1')");
    for (std::size_t cut = 1; cut < insert.size(); ++cut)
        CHECK_THROWS_AS(decode({insert.begin(), insert.begin() + static_cast<std::ptrdiff_t>(cut)}), DecodeError);
    auto trailing = insert;
    trailing.push_back('x');
    CHECK_THROWS_AS(decode(trailing), DecodeError);                            // trailing byte
    CHECK_THROWS_AS(decode(from_hex("490801740131")), DecodeError);            // relation never announced
    CHECK_THROWS_AS(decode(from_hex("49070178")), DecodeError);                // unknown value kind
    CHECK_THROWS_AS(decode(from_hex("4907027401317401")), DecodeError);        // width differs from RELATION
    CHECK_THROWS_AS(decode(from_hex("58")), DecodeError);                      // unknown record type
    CHECK_THROWS_AS(decode(from_hex("42ffffffffffffffffffff01")), DecodeError);  // over-long varint
}
