// The golden wire bytes (tests/wire_golden.txt, captured from the real plugin) decode, with the
// strict reference decoder, to exactly the plugin's text-format lines; damaged records are refused.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>

#include "../plugin_wire_reference.hpp"

using docsync_test::from_hex;
using docsync_test::WireDecoder;

TEST_CASE("every golden record decodes to the plugin's own text line") {
    std::ifstream in(std::string(DOCSYNC_SOURCE_DIR) + "/tests/wire_golden.txt");
    REQUIRE(in.good());
    WireDecoder decoder;
    std::set<char> types;
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        auto tab = line.find('\t');
        REQUIRE(tab != std::string::npos);
        std::string bytes = from_hex(std::string_view(line).substr(0, tab));
        INFO("line " << lines + 1);
        CHECK(decoder.decode(bytes) == line.substr(tab + 1));
        types.insert(bytes[0]);
        if (bytes[0] == DOCSYNC_REC_COMMIT) {
            CHECK(decoder.last_commit().commit_lsn == decoder.last_begin().commit_lsn);
            CHECK(decoder.last_commit().end_lsn > decoder.last_commit().commit_lsn);
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
    WireDecoder decoder;
    // RELATION 7 public.t 'd' (id int4 identity), then INSERT 7 (id '1')
    std::string relation = from_hex("5207067075626c6963017464010102696417" "01");
    std::string insert = from_hex("490701740131");
    CHECK(decoder.decode(relation) == "RELATION public.t replident d: id 23 identity");
    CHECK(decoder.decode(insert) == "INSERT public.t new(id='1')");
    for (std::size_t cut = 1; cut < insert.size(); ++cut) CHECK_THROWS(decoder.decode(insert.substr(0, cut)));
    CHECK_THROWS(decoder.decode(insert + "x"));                    // trailing byte
    CHECK_THROWS(decoder.decode(from_hex("490801740131")));         // relation never announced
    CHECK_THROWS(decoder.decode(from_hex("49070178")));             // unknown value kind
    CHECK_THROWS(decoder.decode(from_hex("4907027401317401")));     // width differs from RELATION
    CHECK_THROWS(decoder.decode(from_hex("58")));                   // unknown record type
    CHECK_THROWS(decoder.decode(from_hex("42ffffffffffffffffffff01")));  // over-long varint
}
