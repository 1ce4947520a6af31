// The pgoutput decoder over hand-built protocol version 1 messages: the records it yields (the
// docsync decoder's, see replication/pgoutput_decoder.hpp), and clear errors for what it cannot read;
// and the worker's tables option read back for the publication (replication/pgoutput_publication.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "pgoutput_msg.hpp"
#include "replication/pgoutput_decoder.hpp"
#include "replication/pgoutput_publication.hpp"

using namespace docsync;
using docsync::testing::kOrders;
using docsync::testing::kOther;
using docsync::testing::Msg;

namespace {

Msg begin(std::uint32_t xid, std::uint64_t final_lsn = 0x1000) { return Msg().u8('B').i64(final_lsn).i64(777).i32(xid); }
Msg commit(std::uint64_t lsn = 0x1000, std::uint64_t end = 0x1030) { return Msg().u8('C').u8(0).i64(lsn).i64(end).i64(777); }

// orders (id int key, note text, status text), as pgoutput describes it.
Msg relation_orders(char replident = 'd', bool all_key = false) {
    Msg m;
    m.u8('R').i32(kOrders).cstr("public").cstr("orders").u8(static_cast<std::uint8_t>(replident)).i16(3);
    m.u8(1).cstr("id").i32(23).i32(0xFFFFFFFF);
    m.u8(all_key ? 1 : 0).cstr("note").i32(25).i32(0xFFFFFFFF);
    m.u8(all_key ? 1 : 0).cstr("status").i32(25).i32(0xFFFFFFFF);
    return m;
}

// Watches orders' id and status (attnums 1 and 3) and attnum 99, which it lacks.
std::vector<PgoutputWatch> watches() {
    PgoutputWatch w;
    w.relid = kOrders;
    w.attnums = {3, 99, 1, 3};
    w.columns = {{3, "status"}, {1, "id"}, {2, "note"}};
    return {w};
}

struct Fixture {
    PgoutputDecoder decoder{watches(), PgoutputOptions{}};
    std::vector<Record> out;
    void feed(const Msg& m) { decoder.decode(m.b, out); }
    // Decodes and returns only what this message yielded.
    std::vector<Record> yield(const Msg& m) {
        out.clear();
        feed(m);
        return out;
    }
    void open() {
        feed(begin(700));
        feed(relation_orders());
        out.clear();
    }
};

const ChangeRecord& change(const std::vector<Record>& records, std::size_t i = 0) {
    REQUIRE(records.size() > i);
    REQUIRE(std::holds_alternative<ChangeRecord>(records[i]));
    return std::get<ChangeRecord>(records[i]);
}

std::string kinds(const std::vector<Value>& values) {
    std::string s;
    for (const auto& v : values) s += static_cast<char>(v.kind);
    return s;
}

}  // namespace

TEST_CASE("pgoutput: a transaction decodes to BEGIN, RELATION, the change and COMMIT") {
    Fixture f;
    f.feed(begin(700, 0x2000));
    CHECK(f.out.empty());  // held back until something is yielded
    f.feed(relation_orders());
    f.feed(Msg().u8('I').i32(kOrders).u8('N').i16(3).text("1").u8('n').text("new"));
    f.feed(commit(0x2000, 0x2040));
    REQUIRE(f.out.size() == 4);
    auto& b = std::get<BeginRecord>(f.out[0]);
    CHECK(b.xid == 700);
    CHECK(b.commit_lsn == 0x2000);
    CHECK(b.commit_time == 777);
    auto& r = std::get<RelationRecord>(f.out[1]);
    CHECK(r.relid == kOrders);
    CHECK(r.schema == "public");
    CHECK(r.name == "orders");
    CHECK(r.replica_identity == 'd');
    REQUIRE(r.columns.size() == 3);
    CHECK(r.columns[0].attnum == 1);
    CHECK(r.columns[0].name == "id");
    CHECK(r.columns[0].type_oid == 23);
    CHECK(r.columns[0].identity);
    CHECK(r.columns[1].attnum == 3);
    CHECK(r.columns[1].name == "status");
    CHECK_FALSE(r.columns[1].identity);
    CHECK(r.columns[2].attnum == 99);
    CHECK(r.columns[2].missing);
    CHECK(r.columns[2].name.empty());
    CHECK(r.columns[2].type_oid == 0);
    auto& c = change(f.out, 2);
    CHECK(c.op == ChangeOp::Insert);
    CHECK(kinds(c.new_values) == "tt?");
    CHECK(c.new_values[0].text == "1");
    CHECK(c.new_values[1].text == "new");  // status, not note
    auto& end = std::get<CommitRecord>(f.out[3]);
    CHECK(end.commit_lsn == 0x2000);
    CHECK(end.end_lsn == 0x2040);
}

TEST_CASE("pgoutput: a transaction with nothing docsync reads yields nothing") {
    Fixture f;
    f.feed(begin(700));
    f.feed(Msg().u8('M').u8(1).i64(0x900).cstr("other").i32(3).cstr("ab"));  // content "ab\0"
    f.feed(Msg().u8('R').i32(kOther).cstr("public").cstr("unwatched").u8('d').i16(1).u8(1).cstr("id").i32(23).i32(0xFFFFFFFF));
    f.feed(Msg().u8('I').i32(kOther).u8('N').i16(1).text("5"));
    f.feed(Msg().u8('T').i32(1).u8(0).i32(kOther));
    f.feed(commit());
    CHECK(f.out.empty());
}

TEST_CASE("pgoutput: docsync's messages pass, others do not") {
    Fixture f;
    auto msg = [](bool transactional, const std::string& prefix) {
        return Msg().u8('M').u8(transactional ? 1 : 0).i64(0x900).cstr(prefix).i32(2).u8('h').u8(0);
    };
    auto out = f.yield(msg(false, "docsync.reload"));
    REQUIRE(out.size() == 1);
    auto& m = std::get<MessageRecord>(out[0]);
    CHECK_FALSE(m.transactional);
    CHECK(m.prefix == "docsync.reload");
    CHECK(m.content == std::string("h\0", 2));
    CHECK(f.yield(msg(false, "docsyn")).empty());
    f.feed(begin(800));
    out = f.yield(msg(true, "docsync"));
    REQUIRE(out.size() == 2);  // the held-back BEGIN, then the message
    CHECK(std::get<BeginRecord>(out[0]).xid == 800);
    CHECK(std::get<MessageRecord>(out[1]).transactional);

    PgoutputOptions off;
    off.messages = false;
    PgoutputDecoder quiet(watches(), off);
    std::vector<Record> none;
    quiet.decode(msg(false, "docsync.reload").b, none);
    CHECK(none.empty());
}

TEST_CASE("pgoutput: an UPDATE without an old tuple keeps the identity SAME and the rest UNKNOWN") {
    Fixture f;
    f.open();
    auto out = f.yield(Msg().u8('U').i32(kOrders).u8('N').i16(3).text("1").text("n").u8('u'));
    auto& c = change(out);
    CHECK(c.op == ChangeOp::Update);
    CHECK(kinds(c.new_values) == "tu?");
    CHECK(kinds(c.old_values) == "s??");
}

TEST_CASE("pgoutput: a 'K' old tuple carries the identity columns only") {
    Fixture f;
    f.open();
    // The key changed from 1 to 2; pgoutput sends the other columns of a key tuple as NULL.
    auto out = f.yield(Msg().u8('U').i32(kOrders).u8('K').i16(3).text("1").u8('n').u8('n').u8('N').i16(3).text("2")
                           .text("n").text("paid"));
    auto& c = change(out);
    CHECK(kinds(c.old_values) == "t??");
    CHECK(c.old_values[0].text == "1");
    // A key logged although unchanged (it has an out-of-line value, say) is SAME.
    out = f.yield(Msg().u8('U').i32(kOrders).u8('K').i16(3).text("2").u8('n').u8('n').u8('N').i16(3).text("2")
                      .text("n").text("paid"));
    CHECK(kinds(change(out).old_values) == "s??");
    out = f.yield(Msg().u8('D').i32(kOrders).u8('K').i16(3).text("2").u8('n').u8('n'));
    auto& d = change(out);
    CHECK(d.op == ChangeOp::Delete);
    CHECK(d.new_values.empty());
    CHECK(kinds(d.old_values) == "t??");
}

TEST_CASE("pgoutput: an 'O' old tuple (REPLICA IDENTITY FULL) gives every value, SAME where unchanged") {
    Fixture f;
    f.feed(begin(700));
    f.feed(relation_orders('f', true));
    f.out.clear();
    auto update = [&](Msg old_status, Msg new_status) {
        Msg m;
        m.u8('U').i32(kOrders).u8('O').i16(3).text("1").u8('n');
        m.b.insert(m.b.end(), old_status.b.begin(), old_status.b.end());
        m.u8('N').i16(3).text("1").u8('n');
        m.b.insert(m.b.end(), new_status.b.begin(), new_status.b.end());
        return change(f.yield(m)).old_values;
    };
    auto old = update(Msg().text("new"), Msg().text("paid"));
    CHECK(kinds(old) == "st?");
    CHECK(old[1].text == "new");
    CHECK(kinds(update(Msg().text("same"), Msg().text("same"))) == "ss?");
    CHECK(kinds(update(Msg().u8('n'), Msg().u8('n'))) == "ss?");
    CHECK(kinds(update(Msg().u8('n'), Msg().text("x"))) == "sn?");
    CHECK(kinds(update(Msg().text("long"), Msg().u8('u'))) == "ss?");  // unchanged, not logged anew
    CHECK(kinds(update(Msg().u8('u'), Msg().text("x"))) == "s??");     // an old value not inlined: unknown
    CHECK(kinds(update(Msg().u8('u'), Msg().u8('u'))) == "ss?");
    auto out = f.yield(Msg().u8('D').i32(kOrders).u8('O').i16(3).text("1").u8('n').u8('n'));
    CHECK(kinds(change(out).old_values) == "tn?");  // no SAME in a DELETE
}

TEST_CASE("pgoutput: columns are mapped by name; what pgoutput does not send does not exist") {
    PgoutputWatch all;
    all.relid = kOrders;
    all.all_columns = true;
    all.columns = {{1, "id"}, {2, "note"}, {4, "gone"}, {3, "status"}};
    PgoutputDecoder decoder({all}, PgoutputOptions{});
    std::vector<Record> out;
    decoder.decode(begin(700).b, out);
    // pgoutput orders by attnum too, but only names say which is which; "added" is not in the catalog.
    Msg rel;
    rel.u8('R').i32(kOrders).cstr("").cstr("orders").u8('d').i16(4);
    rel.u8(1).cstr("id").i32(23).i32(0);
    rel.u8(0).cstr("status").i32(1043).i32(14);
    rel.u8(0).cstr("note").i32(25).i32(0);
    rel.u8(0).cstr("added").i32(23).i32(0);
    decoder.decode(rel.b, out);
    REQUIRE(out.size() == 2);
    auto& r = std::get<RelationRecord>(out[1]);
    CHECK(r.schema == "pg_catalog");
    REQUIRE(r.columns.size() == 3);
    CHECK(r.columns[0].attnum == 1);
    CHECK(r.columns[1].attnum == 2);
    CHECK(r.columns[1].name == "note");
    CHECK(r.columns[2].attnum == 3);
    CHECK(r.columns[2].type_oid == 1043);
    out.clear();
    decoder.decode(Msg().u8('I').i32(kOrders).u8('N').i16(4).text("1").text("S").text("N").text("9").b, out);
    auto& c = change(out);
    REQUIRE(c.new_values.size() == 3);
    CHECK(c.new_values[1].text == "N");
    CHECK(c.new_values[2].text == "S");
}

TEST_CASE("pgoutput: TRUNCATE lists the watched relations it hit, each once") {
    Fixture f;
    f.open();
    f.feed(Msg().u8('R').i32(kOther).cstr("public").cstr("unwatched").u8('d').i16(1).u8(1).cstr("id").i32(23).i32(0));
    auto out = f.yield(Msg().u8('T').i32(3).u8(3).i32(kOther).i32(kOrders).i32(kOrders));
    REQUIRE(out.size() == 1);
    auto& t = std::get<TruncateRecord>(out[0]);
    CHECK(t.relids == std::vector<Oid>{kOrders});
    CHECK(t.cascade);
    CHECK(t.restart_identity);
    CHECK(f.yield(Msg().u8('T').i32(1).u8(0).i32(kOther)).empty());
}

TEST_CASE("pgoutput: ORIGIN and TYPE messages yield nothing") {
    Fixture f;
    f.feed(begin(700));
    CHECK(f.yield(Msg().u8('O').i64(0x55).cstr("node_a")).empty());
    CHECK(f.yield(Msg().u8('Y').i32(17000).cstr("public").cstr("mood")).empty());
    CHECK(f.yield(commit()).empty());
}

TEST_CASE("pgoutput: the 32-bit xid is widened to the full xid nearest the last one") {
    PgoutputOptions options;
    options.reference_xid = (std::uint64_t{5} << 32) | 100;
    PgoutputDecoder d(watches(), options);
    CHECK(d.widen_xid(50) == ((std::uint64_t{5} << 32) | 50));
    CHECK(d.widen_xid(0xFFFFFFF0u) == ((std::uint64_t{4} << 32) | 0xFFFFFFF0u));  // just before the wrap
    CHECK(d.widen_xid(0x80000100u) == ((std::uint64_t{4} << 32) | 0x80000100u));
    d.reset((std::uint64_t{5} << 32) | 0xFFFFFFF0u);
    CHECK(d.widen_xid(5) == ((std::uint64_t{6} << 32) | 5));  // just after the wrap
    d.reset(10);
    CHECK(d.widen_xid(0xFFFFFFF0u) == 0xFFFFFFF0u);  // no epoch below 0
    // Each BEGIN becomes the next reference, so a long session follows the wrap.
    d.reset(0xFFFFFF00u);
    CHECK(d.widen_xid(0x7FFFFFF0u) == 0x7FFFFFF0u);
    std::vector<Record> out;
    for (std::uint32_t xid : {0xFFFFFFF0u, 0x10u}) {
        d.decode(begin(xid).b, out);
        d.decode(Msg().u8('M').u8(1).i64(1).cstr("docsync").i32(0).b, out);
        d.decode(commit().b, out);
    }
    REQUIRE(out.size() == 6);
    CHECK(std::get<BeginRecord>(out[0]).xid == 0xFFFFFFF0u);
    CHECK(std::get<BeginRecord>(out[3]).xid == ((std::uint64_t{1} << 32) | 0x10));
    CHECK(d.widen_xid(0x7FFFFFF0u) == ((std::uint64_t{1} << 32) | 0x7FFFFFF0u));
}

TEST_CASE("pgoutput: other protocol versions and features are refused by name") {
    PgoutputOptions v3;
    v3.proto_version = 3;
    CHECK_THROWS_WITH_AS(PgoutputDecoder(watches(), v3), doctest::Contains("protocol version 3 is not implemented"), Error);
    CHECK_THROWS_WITH_AS(pgoutput::parse_pgoutput(begin(1).b, 3), doctest::Contains("proto_version '1' or '2'"), DecodeError);
    Fixture f;
    // Protocol version 1 has no streamed transactions (tests/unit/pgoutput_stream_test.cpp reads them with 2).
    CHECK_THROWS_WITH_AS(f.feed(Msg().u8('S').i32(700).u8(1)), doctest::Contains("streamed"), DecodeError);
    CHECK_THROWS_WITH_AS(f.feed(Msg().u8('P').i64(1)), doctest::Contains("two-phase"), DecodeError);
    f.open();
    CHECK_THROWS_WITH_AS(f.feed(Msg().u8('I').i32(kOrders).u8('N').i16(3).text("1").u8('b').i32(1).u8(0).u8('n')),
                         doctest::Contains("binary"), DecodeError);
}

TEST_CASE("pgoutput: malformed or inconsistent messages throw, naming the problem") {
    Fixture f;
    auto fails = [&](const Msg& m, const char* what) {
        std::size_t before = f.out.size();
        CHECK_THROWS_WITH_AS(f.feed(m), doctest::Contains(what), DecodeError);
        CHECK(f.out.size() == before);
    };
    fails(Msg(), "empty message");
    fails(Msg().u8('Z'), "unknown message type");
    fails(Msg().u8('B').i64(1), "truncated");
    fails(Msg().u8('C').u8(0).i64(0x10).i64(0x10).i64(0), "end_lsn is not after commit_lsn");
    fails(Msg().u8('R').i32(kOrders).cstr("public").cstr("orders").u8('x').i16(0), "unknown replica identity");
    fails(Msg().u8('R').i32(kOrders).cstr("public").cstr("orders").u8('d').i16(60000), "natts 60000");
    fails(Msg().u8('R').i32(kOrders).cstr("public").u8('o'), "no terminating NUL");
    fails(Msg().u8('M').u8(0).i64(1).cstr("docsync").i32(100).u8('x'), "runs past the end");
    fails(Msg().u8('T').i32(0x40000000).u8(0).i32(kOrders), "nrels");
    fails(commit(), "COMMIT outside a transaction");
    fails(Msg().u8('I').i32(kOrders).u8('N').i16(0), "outside a transaction");
    f.feed(begin(700, 0x1000));
    fails(begin(701), "BEGIN inside a transaction");
    fails(Msg().u8('I').i32(kOrders).u8('N').i16(3).text("1").u8('n').u8('n'), "before its RELATION");
    fails(commit(0x2000, 0x2040), "ends the transaction BEGIN said commits at");
    f.feed(relation_orders());
    f.out.clear();
    fails(Msg().u8('I').i32(kOrders).u8('N').i16(2).text("1").u8('n'), "has 2 columns, its RELATION has 3");
    fails(Msg().u8('I').i32(kOrders).u8('N').i16(3).text("1").u8('n').u8('x'), "unknown column kind");
    fails(Msg().u8('I').i32(kOrders).u8('X'), "expected the new tuple");
    fails(Msg().u8('D').i32(kOrders).u8('N').i16(3).text("1").u8('n').u8('n'), "without an old tuple");
    fails(Msg().u8('I').i32(kOrders).u8('N').i16(3).text("1").u8('n').u8('n').u8(0), "trailing bytes");
    fails(Msg().u8('I').i32(0).u8('N').i16(0), "relid 0");
    // Every strict prefix of a valid message is refused, never read past.
    Msg update;
    update.u8('U').i32(kOrders).u8('K').i16(3).text("1").u8('n').u8('n').u8('N').i16(3).text("2").text("n").u8('u');
    for (std::size_t n = 0; n < update.b.size(); ++n) {
        Msg cut;
        cut.b.assign(update.b.begin(), update.b.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK_THROWS_AS(f.feed(cut), DecodeError);
    }
    CHECK(f.out.empty());
    f.feed(update);
    CHECK(f.out.size() == 1);
}

TEST_CASE("pgoutput: watches are checked") {
    PgoutputWatch bad;
    bad.relid = kOrders;
    bad.attnums = {0};
    CHECK_THROWS_WITH_AS(PgoutputDecoder({bad}, PgoutputOptions{}), doctest::Contains("lists attnum 0"), Error);
    PgoutputWatch w;
    w.relid = kOrders;
    CHECK_THROWS_WITH_AS(PgoutputDecoder({w, w}, PgoutputOptions{}), doctest::Contains("watched twice"), Error);
}

TEST_CASE("pgoutput: the fuzz target's seed corpus is well formed") {
    // tests/fuzz/pgoutput_corpus.py writes it for the watches of tests/fuzz/pgoutput_decoder.cpp.
    std::ifstream file(std::string(DOCSYNC_SOURCE_DIR) + "/tests/fuzz/corpus/pgoutput_decoder/all", std::ios::binary);
    REQUIRE(file);
    std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::vector<PgoutputWatch> fuzz_watches(2);
    fuzz_watches[0].relid = 16384;
    fuzz_watches[0].attnums = {3, 1, 99};
    fuzz_watches[0].columns = {{1, "id"}, {2, "note"}, {3, "status"}};
    fuzz_watches[1].relid = 16385;
    fuzz_watches[1].all_columns = true;
    fuzz_watches[1].columns = {{1, "id"}, {2, "v"}, {4, "w"}};
    PgoutputOptions v2;
    v2.proto_version = 2;
    PgoutputDecoder decoder(fuzz_watches, v2);
    std::vector<Record> out;
    int messages = 0;
    for (std::size_t at = 0; at < data.size(); ++messages) {
        std::size_t n = data[at];
        REQUIRE(at + 1 + n <= data.size());
        decoder.decode_all(std::span<const std::uint8_t>(data.data() + at + 1, n), out);
        at += 1 + n;
    }
    CHECK(messages == 19 + 15);
    // Two transactions (BEGIN, RELATION, four changes, COMMIT; BEGIN, RELATION, an UPDATE, TRUNCATE,
    // a message, COMMIT); the third (a foreign message only) yields nothing; then the
    // non-transactional message; then the streamed one that commits (BEGIN, RELATION, the message,
    // the top level's INSERT, COMMIT), its aborted subtransaction's INSERT and the aborted one left out.
    CHECK(out.size() == 7 + 6 + 0 + 1 + 5);
    CHECK(decoder.spool().open_transactions() == 0);
}

TEST_CASE("pgoutput: the worker's tables option is read back to relids and attnums") {
    using Entries = std::vector<std::pair<Oid, std::vector<int>>>;
    CHECK(parse_worker_tables("").empty());
    CHECK(parse_worker_tables("16384,16390(1,3),4294967295(32767)") ==
          Entries{{16384, {}}, {16390, {1, 3}}, {4294967295u, {32767}}});
    CHECK(publication_name("shop") == "docsync_shop");
    for (const char* bad : {"public.orders", "16384(", "16384()", "16384(1,)", "16384,", "0", "16384(0)",
                            "16384(32768)", "4294967296", "16384 (1)", "16384(1)x"})
        CHECK_THROWS_WITH_AS(parse_worker_tables(bad), doctest::Contains("is not the worker's relid(attnum,…) form"), Error);
}

TEST_CASE("pgoutput: a watched column pgoutput does not send (renamed since, or generated) is missing") {
    Fixture f;
    f.feed(begin(700));
    Msg rel;
    rel.u8('R').i32(kOrders).cstr("public").cstr("orders").u8('d').i16(2);
    rel.u8(1).cstr("id").i32(23).i32(0);
    rel.u8(0).cstr("state").i32(25).i32(0);  // status, renamed after the catalog was read
    f.feed(rel);
    REQUIRE(f.out.size() == 2);
    auto& r = std::get<RelationRecord>(f.out[1]);
    REQUIRE(r.columns.size() == 3);
    CHECK(r.columns[0].attnum == 1);
    CHECK_FALSE(r.columns[0].missing);
    CHECK(r.columns[1].attnum == 3);
    CHECK(r.columns[1].missing);
    CHECK(r.columns[2].attnum == 99);
    CHECK(r.columns[2].missing);
    auto out = f.yield(Msg().u8('U').i32(kOrders).u8('N').i16(2).text("1").text("paid"));
    CHECK(kinds(change(out).new_values) == "t??");
    CHECK(kinds(change(out).old_values) == "s??");
}

TEST_CASE("pgoutput publication: a new table or column is a gain; dropping one, or the same list, is not") {
    using Held = std::map<Oid, std::string>;
    CHECK_FALSE(publication_gains(Held{{1, "1 2"}, {2, "*"}}, Held{{1, "1 2"}, {2, "*"}}));
    CHECK(publication_gains(Held{{1, "1 2"}}, Held{{1, "1 2"}, {2, "1"}}));          // a new table
    CHECK(publication_gains(Held{{1, "1 2"}}, Held{{1, "1 2 3"}}));                 // a new column
    CHECK(publication_gains(Held{{1, "1 3"}}, Held{{1, "1 2"}}));                   // one swapped for another
    CHECK(publication_gains(Held{{1, "1 2"}}, Held{{1, "*"}}));                     // every column now
    CHECK(publication_gains(Held{{1, "2 10"}}, Held{{1, "1 10"}}));                 // attnums past 9 read whole
    CHECK_FALSE(publication_gains(Held{{1, "1 2"}, {2, "1"}}, Held{{1, "1 2"}}));   // a table dropped
    CHECK_FALSE(publication_gains(Held{{1, "1 2 3"}}, Held{{1, "1 3"}}));           // a column dropped
    CHECK_FALSE(publication_gains(Held{{1, "*"}}, Held{{1, "1 2"}}));               // a list within everything
    CHECK_FALSE(publication_gains(Held{{1, "1 12"}}, Held{{1, "12"}}));
    CHECK(publication_gains(Held{}, Held{{7, "*"}}));
    CHECK_FALSE(publication_gains(Held{{7, "*"}}, Held{}));
}
