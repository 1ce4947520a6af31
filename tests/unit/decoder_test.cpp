// The wire decoder: every record type and value kind per shared/docsync_wire.h, and clear errors for
// malformed input.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "docsync_wire.h"
#include "replication/decoder.hpp"

using namespace docsync;

namespace {

// Builds records byte by byte, as the plugin would.
struct Bytes {
    std::vector<std::uint8_t> b;
    Bytes& u8(std::uint8_t v) { b.push_back(v); return *this; }
    Bytes& uv(std::uint64_t v) {
        std::uint8_t tmp[DOCSYNC_UV_MAX_BYTES];
        b.insert(b.end(), tmp, tmp + docsync_uv_encode(v, tmp));
        return *this;
    }
    Bytes& sv(std::int64_t v) { return uv(docsync_zigzag_encode(v)); }
    Bytes& str(const std::string& s) { uv(s.size()); b.insert(b.end(), s.begin(), s.end()); return *this; }
};

Bytes relation_orders() {
    Bytes r;
    r.u8('R').uv(16384).str("public").str("orders").u8('d').uv(2);
    r.uv(1).str("id").uv(23).u8(DOCSYNC_COL_IDENTITY);
    r.uv(3).str("status").uv(25).u8(0);
    return r;
}

template <class T>
T decode_as(Decoder& d, const Bytes& bytes) {
    Record rec = d.decode(bytes.b);
    REQUIRE(std::holds_alternative<T>(rec));
    return std::get<T>(rec);
}

}  // namespace

TEST_CASE("BEGIN and COMMIT carry xid, LSNs and commit time") {
    Decoder d;
    auto b = decode_as<BeginRecord>(d, Bytes().u8('B').uv((5ull << 32) | 771).uv(0x16B3F28).sv(-1234567));
    CHECK(b.xid == ((5ull << 32) | 771));
    CHECK(b.commit_lsn == 0x16B3F28);
    CHECK(b.commit_time == -1234567);
    auto c = decode_as<CommitRecord>(d, Bytes().u8('C').uv(0x16B3F28).uv(0x16B3F58));
    CHECK(c.commit_lsn == 0x16B3F28);
    CHECK(c.end_lsn == 0x16B3F58);
}

TEST_CASE("RELATION, then INSERT/UPDATE/DELETE with every value kind") {
    Decoder d;
    auto rel = decode_as<RelationRecord>(d, relation_orders());
    CHECK(rel.relid == 16384);
    CHECK(rel.schema == "public");
    CHECK(rel.name == "orders");
    CHECK(rel.replica_identity == 'd');
    REQUIRE(rel.columns.size() == 2);
    CHECK(rel.columns[0].attnum == 1);
    CHECK(rel.columns[0].name == "id");
    CHECK(rel.columns[0].type_oid == 23);
    CHECK(rel.columns[0].identity);
    CHECK_FALSE(rel.columns[1].identity);
    CHECK_FALSE(rel.columns[1].missing);

    auto ins = decode_as<ChangeRecord>(d, Bytes().u8('I').uv(16384).uv(2).u8('t').str("42").u8('n'));
    CHECK(ins.op == ChangeOp::Insert);
    REQUIRE(ins.new_values.size() == 2);
    CHECK(ins.new_values[0].kind == ValueKind::Text);
    CHECK(ins.new_values[0].text == "42");
    CHECK(ins.new_values[1].kind == ValueKind::Null);
    CHECK(ins.old_values.empty());

    auto upd = decode_as<ChangeRecord>(
        d, Bytes().u8('U').uv(16384).uv(2).u8('t').str("42").u8('u').uv(2).u8('s').u8('?'));
    CHECK(upd.op == ChangeOp::Update);
    CHECK(upd.new_values[1].kind == ValueKind::Toast);
    CHECK(upd.old_values[0].kind == ValueKind::Same);
    CHECK(upd.old_values[1].kind == ValueKind::Unknown);

    auto del = decode_as<ChangeRecord>(d, Bytes().u8('D').uv(16384).uv(2).u8('t').str("line\n\"q\" ü").u8('?'));
    CHECK(del.op == ChangeOp::Delete);
    CHECK(del.new_values.empty());
    CHECK(del.old_values[0].text == "line\n\"q\" ü");
}

TEST_CASE("a missing column is flagged in RELATION and arrives as UNKNOWN") {
    Decoder d;
    Bytes r;
    r.u8('R').uv(7).str("s").str("t").u8('f').uv(1).uv(9).str("gone").uv(0).u8(DOCSYNC_COL_MISSING);
    auto rel = decode_as<RelationRecord>(d, r);
    CHECK(rel.columns[0].missing);
    CHECK(rel.replica_identity == 'f');
    auto ins = decode_as<ChangeRecord>(d, Bytes().u8('I').uv(7).uv(1).u8('?'));
    CHECK(ins.new_values[0].kind == ValueKind::Unknown);
}

TEST_CASE("TRUNCATE and MESSAGE") {
    Decoder d;
    auto t = decode_as<TruncateRecord>(d, Bytes().u8('T').u8(DOCSYNC_TRUNCATE_CASCADE | DOCSYNC_TRUNCATE_RESTART_IDENTITY)
                                              .uv(2).uv(16384).uv(16400));
    CHECK(t.cascade);
    CHECK(t.restart_identity);
    CHECK(t.relids == std::vector<Oid>{16384, 16400});
    auto m = decode_as<MessageRecord>(d, Bytes().u8('M').u8(1).str("docsync.test").str(std::string("a\0b", 3)));
    CHECK(m.transactional);
    CHECK(m.prefix == "docsync.test");
    CHECK(m.content == std::string("a\0b", 3));
}

TEST_CASE("malformed records are clear errors, never undefined behaviour") {
    Decoder d;
    decode_as<RelationRecord>(d, relation_orders());
    auto fails_with = [&](const Bytes& bytes, const char* text) {
        CHECK_THROWS_WITH_AS(d.decode(bytes.b), doctest::Contains(text), DecodeError);
    };
    fails_with(Bytes(), "empty message");
    fails_with(Bytes().u8('Z'), "unknown record type 90");
    fails_with(Bytes().u8('B').uv(1).uv(2), "truncated or over-long varint for commit_time");
    fails_with(Bytes().u8('C').uv(10).uv(20).u8(0), "trailing bytes");
    fails_with(Bytes().u8('C').uv(20).uv(10), "end_lsn is not after commit_lsn");
    fails_with(Bytes().u8('I').uv(16384).uv(3).u8('n').u8('n').u8('n'), "has 3 columns, its RELATION has 2");
    fails_with(Bytes().u8('I').uv(999).uv(1).u8('n'), "before its RELATION record");
    fails_with(Bytes().u8('I').uv(16384).uv(2).u8('t').str("1").u8('x'), "unknown value kind");
    fails_with(Bytes().u8('I').uv(16384).uv(2).u8('t').str("1").u8('s'), "'same' marker in a new tuple");
    fails_with(Bytes().u8('D').uv(16384).uv(2).u8('u').u8('n'), "unchanged-TOAST marker in an old tuple");
    fails_with(Bytes().u8('I').uv(16384).uv(2).u8('t').uv(1000).u8('a'), "runs past the end");
    fails_with(Bytes().u8('T').u8(0).uv(1ull << 40), "impossible");
    fails_with(Bytes().u8('R').uv(1).str("s").str("t").u8('d').uv(100000), "impossible");
    fails_with(Bytes().u8('R').uv(1).str("s").str("t").u8('x').uv(0), "unknown replica identity");
    fails_with(Bytes().u8('R').uv(1ull << 33).str("s").str("t").u8('d').uv(0), "not an OID");
    fails_with(Bytes().u8('M').u8(2).str("p").str("c"), "transactional flag");
    Bytes overlong;
    overlong.u8('B');
    for (int i = 0; i < 11; ++i) overlong.u8(0x80);
    fails_with(overlong, "over-long varint for xid");
}

TEST_CASE("reset forgets the session's relations") {
    Decoder d;
    decode_as<RelationRecord>(d, relation_orders());
    d.reset();
    CHECK_THROWS_AS(d.decode(Bytes().u8('I').uv(16384).uv(2).u8('n').u8('n').b), DecodeError);
}

TEST_CASE("a RELATION sent again after DDL changes the expected width") {
    Decoder d;
    decode_as<RelationRecord>(d, relation_orders());
    Bytes r;
    r.u8('R').uv(16384).str("public").str("orders").u8('d').uv(1).uv(1).str("id").uv(23).u8(1);
    decode_as<RelationRecord>(d, r);
    CHECK_NOTHROW(d.decode(Bytes().u8('I').uv(16384).uv(1).u8('n').b));
    CHECK_THROWS_AS(d.decode(Bytes().u8('I').uv(16384).uv(2).u8('n').u8('n').b), DecodeError);
}
