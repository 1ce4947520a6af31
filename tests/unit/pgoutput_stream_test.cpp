// The pgoutput decoder over hand-built protocol version 2 messages: streamed in-progress
// transactions yield nothing until their STREAM COMMIT, then exactly what the same transaction sent
// whole yields; aborts drop them or their subtransactions; held messages past the memory bound go to
// a temporary file and read back the same (replication/pgoutput_decoder.hpp, pgoutput_spool.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pgoutput_msg.hpp"
#include "replication/pgoutput_decoder.hpp"

using namespace docsync;
using docsync::testing::kOrders;
using docsync::testing::kOther;
using docsync::testing::Msg;

namespace {

// The messages of a change with the xid a streamed block puts after the type byte (0: none).
Msg relation(std::uint32_t xid, const std::string& third = "status") {
    Msg m;
    m.u8('R');
    if (xid != 0) m.i32(xid);
    m.i32(kOrders).cstr("public").cstr("orders").u8('d').i16(3);
    m.u8(1).cstr("id").i32(23).i32(0xFFFFFFFF);
    m.u8(0).cstr("note").i32(25).i32(0xFFFFFFFF);
    m.u8(0).cstr(third).i32(25).i32(0xFFFFFFFF);
    return m;
}
Msg insert(std::uint32_t xid, const std::string& id, Oid relid = kOrders) {
    Msg m;
    m.u8('I');
    if (xid != 0) m.i32(xid);
    if (relid != kOrders) return m.i32(relid).u8('N').i16(1).text(id);
    return m.i32(kOrders).u8('N').i16(3).text(id).u8('n').text("s" + id);
}
Msg message(std::uint32_t xid, const std::string& prefix) {
    Msg m;
    m.u8('M');
    if (xid != 0) m.i32(xid);
    return m.u8(1).i64(0x900).cstr(prefix).i32(2).u8('h').u8('i');
}
Msg start(std::uint32_t xid, bool first) { return Msg().u8('S').i32(xid).u8(first ? 1 : 0); }
Msg stop() { return Msg().u8('E'); }
Msg stream_commit(std::uint32_t xid, std::uint64_t lsn, std::uint64_t end) {
    return Msg().u8('c').i32(xid).u8(0).i64(lsn).i64(end).i64(777);
}
Msg stream_abort(std::uint32_t xid, std::uint32_t subxid) { return Msg().u8('A').i32(xid).i32(subxid); }
Msg begin(std::uint32_t xid, std::uint64_t lsn) { return Msg().u8('B').i64(lsn).i64(777).i32(xid); }
Msg commit(std::uint64_t lsn, std::uint64_t end) { return Msg().u8('C').u8(0).i64(lsn).i64(end).i64(777); }

std::vector<PgoutputWatch> watches() {
    PgoutputWatch w;
    w.relid = kOrders;
    w.attnums = {1, 3};
    w.columns = {{1, "id"}, {2, "note"}, {3, "status"}};
    return {w};
}

PgoutputOptions v2(std::size_t memory = std::size_t{1} << 20) {
    PgoutputOptions o;
    o.proto_version = 2;
    o.stream_memory = memory;
    return o;
}

std::string show(const std::vector<Record>& records) {
    std::string s;
    for (const auto& r : records) s += describe(r) + "\n";
    return s;
}

struct Fixture {
    PgoutputDecoder decoder;
    std::vector<Record> out;
    explicit Fixture(std::size_t memory = std::size_t{1} << 20) : decoder(watches(), v2(memory)) {}
    void feed(const Msg& m) { decoder.decode_all(m.b, out); }
};

// What the same transaction yields sent whole at its commit (protocol version 1 layout).
std::vector<Record> whole(const std::vector<Msg>& changes, std::uint32_t xid, std::uint64_t lsn, std::uint64_t end) {
    PgoutputDecoder d(watches(), PgoutputOptions{});
    std::vector<Record> out;
    d.decode(begin(xid, lsn).b, out);
    for (const auto& m : changes) d.decode(m.b, out);
    d.decode(commit(lsn, end).b, out);
    return out;
}

}  // namespace

TEST_CASE("pgoutput streaming: nothing before STREAM COMMIT, then the records of the transaction sent whole") {
    Fixture f;
    f.feed(start(700, true));
    f.feed(relation(700));
    f.feed(insert(700, "1"));
    f.feed(message(700, "docsync.rt"));
    f.feed(message(700, "other"));       // a foreign message: not held
    f.feed(insert(700, "9", kOther));    // an unwatched relation: not held
    f.feed(stop());
    f.feed(begin(701, 0x1500));          // a small transaction committing between the blocks
    f.feed(relation(0));
    f.feed(insert(0, "2"));
    f.feed(commit(0x1500, 0x1530));
    CHECK(f.out.size() == 4);
    CHECK(f.decoder.spool().held_messages(700) == 3);
    f.out.clear();
    f.feed(start(700, false));
    f.feed(insert(700, "3"));
    f.feed(stop());
    CHECK(f.out.empty());
    f.feed(stream_commit(700, 0x2000, 0x2040));
    CHECK(f.decoder.spool().open_transactions() == 0);
    auto want = whole({relation(0), insert(0, "1"), message(0, "docsync.rt"), insert(0, "3")}, 700, 0x2000, 0x2040);
    CHECK(show(f.out) == show(want));
    REQUIRE(f.out.size() == 6);
    CHECK(std::get<BeginRecord>(f.out[0]).commit_lsn == 0x2000);
    CHECK(std::get<CommitRecord>(f.out[5]).end_lsn == 0x2040);
}

TEST_CASE("pgoutput streaming: a committed transaction is read back one held message per replay()") {
    PgoutputDecoder d(watches(), v2());
    std::vector<Record> out;
    d.decode(start(700, true).b, out);
    d.decode(relation(700).b, out);
    for (int i = 0; i < 5; ++i) d.decode(insert(700, std::to_string(i)).b, out);
    d.decode(stop().b, out);
    d.decode(stream_commit(700, 0x2000, 0x2040).b, out);
    CHECK(out.empty());
    CHECK(d.replaying());
    CHECK_THROWS_AS(d.decode(stop().b, out), std::logic_error);
    std::vector<std::size_t> sizes;
    while (d.replaying()) {
        std::size_t before = out.size();
        sizes.push_back(d.replay(out));
        CHECK(out.size() - before <= 2);  // the held-back BEGIN, then the message's record
    }
    CHECK(sizes.size() == 7);  // RELATION, five INSERTs, then the COMMIT
    CHECK(sizes.back() == 0);
    CHECK(sizes[0] == relation(700).b.size() - 4);
    CHECK(out.size() == 8);
}

TEST_CASE("pgoutput streaming: interleaved transactions; an aborted one yields nothing") {
    Fixture f;
    f.feed(start(700, true));
    f.feed(relation(700));
    f.feed(insert(700, "1"));
    f.feed(stop());
    f.feed(start(800, true));
    f.feed(relation(800));
    f.feed(insert(800, "2"));
    f.feed(stop());
    f.feed(start(700, false));
    f.feed(insert(700, "3"));
    f.feed(stop());
    CHECK(f.decoder.spool().open_transactions() == 2);
    f.feed(stream_abort(700, 700));
    CHECK(f.out.empty());
    CHECK(f.decoder.spool().open_transactions() == 1);
    f.feed(stream_commit(800, 0x3000, 0x3040));
    CHECK(show(f.out) == show(whole({relation(0), insert(0, "2")}, 800, 0x3000, 0x3040)));
    // An aborted transaction none of whose blocks this session saw drops nothing.
    f.feed(stream_abort(900, 900));
    f.feed(stream_abort(900, 901));
}

TEST_CASE("pgoutput streaming: an aborted subtransaction's changes, and its own subtransactions', are dropped") {
    for (std::size_t memory : {std::size_t{1} << 20, std::size_t{0}}) {
        CAPTURE(memory);
        Fixture f(memory);
        f.feed(start(700, true));
        f.feed(relation(700));
        f.feed(insert(700, "1"));
        f.feed(insert(701, "2"));   // subtransaction 701
        f.feed(insert(702, "3"));   // 702, inside 701
        f.feed(stop());
        f.feed(start(700, false));
        f.feed(insert(701, "4"));  // 702 was released into 701
        f.feed(stop());
        // 701 rolls back: its abort record names 702 too, and the server sends both aborts.
        f.feed(stream_abort(700, 702));  // from 702's first change on
        CHECK(f.decoder.spool().held_messages(700) == 3);
        f.feed(stream_abort(700, 701));
        CHECK(f.decoder.spool().held_messages(700) == 2);
        f.feed(start(700, false));
        f.feed(insert(703, "5"));
        f.feed(insert(700, "6"));
        f.feed(stop());
        f.feed(stream_abort(700, 799));  // a subtransaction with nothing held
        CHECK(f.decoder.spool().spilled(700) == (memory == 0));
        f.feed(stream_commit(700, 0x2000, 0x2040));
        CHECK(show(f.out) == show(whole({relation(0), insert(0, "1"), insert(0, "5"), insert(0, "6")}, 700, 0x2000, 0x2040)));
    }
}

TEST_CASE("pgoutput streaming: a RELATION sent in an aborted subtransaction is kept, and yielded only when new") {
    for (std::size_t memory : {std::size_t{1} << 20, std::size_t{0}}) {
        CAPTURE(memory);
        // pgoutput sends a relation's RELATION once per streamed transaction, here inside 701, which
        // aborts; the top level's later change relies on it.
        Fixture f(memory);
        f.feed(start(700, true));
        f.feed(relation(701));
        f.feed(insert(701, "1"));
        f.feed(stop());
        f.feed(stream_abort(700, 701));
        f.feed(start(700, false));
        f.feed(insert(700, "2"));
        f.feed(stop());
        f.feed(stream_commit(700, 0x2000, 0x2040));
        CHECK(show(f.out) == show(whole({relation(0), insert(0, "2")}, 700, 0x2000, 0x2040)));
        // The RELATION after the subtransaction's first change: moved past the dropped ones.
        f.out.clear();
        PgoutputDecoder fresh(watches(), v2(memory));
        for (const Msg& m : {start(705, true), message(706, "docsync.gone"), relation(706), insert(706, "1"), stop(),
                             stream_abort(705, 706), start(705, false), insert(705, "2"), stop(),
                             stream_commit(705, 0x2000, 0x2040)})
            fresh.decode_all(m.b, f.out);
        CHECK(show(f.out) == show(whole({relation(0), insert(0, "2")}, 705, 0x2000, 0x2040)));
        // The same again, the relation now described: the kept RELATION says nothing new.
        f.out.clear();
        f.feed(start(710, true));
        f.feed(relation(711));
        f.feed(insert(711, "1"));
        f.feed(stop());
        f.feed(stream_abort(710, 711));
        f.feed(stream_commit(710, 0x3000, 0x3040));
        CHECK(f.out.empty());
        // A kept RELATION that differs from the one in effect is yielded.
        f.feed(start(720, true));
        f.feed(relation(721, "state"));
        f.feed(insert(721, "1"));
        f.feed(stop());
        f.feed(stream_abort(720, 721));
        f.feed(stream_commit(720, 0x4000, 0x4040));
        REQUIRE(f.out.size() == 3);
        CHECK(std::holds_alternative<RelationRecord>(f.out[1]));
    }
}

TEST_CASE("pgoutput streaming: past the memory bound the largest transaction goes to a file, and reads back the same") {
    // A bound that holds a few messages: the first transaction to pass it with the other goes to disk.
    Fixture f(600);
    f.feed(start(700, true));
    f.feed(relation(700));
    f.feed(stop());
    f.feed(start(800, true));
    f.feed(relation(800));
    f.feed(insert(800, "a"));
    f.feed(stop());
    CHECK_FALSE(f.decoder.spool().spilled(700));
    CHECK_FALSE(f.decoder.spool().spilled(800));
    std::vector<Msg> changes{relation(0)};
    f.feed(start(700, false));
    for (int i = 0; i < 40; ++i) {
        f.feed(insert(700, std::to_string(i)));
        changes.push_back(insert(0, std::to_string(i)));
    }
    f.feed(stop());
    CHECK(f.decoder.spool().spilled(700));
    CHECK_FALSE(f.decoder.spool().spilled(800));
    CHECK(f.decoder.spool().memory_bytes() <= 600);
    CHECK(f.decoder.spool().spilled_bytes() > 40 * 20);
    f.feed(stream_commit(700, 0x2000, 0x2040));
    CHECK(show(f.out) == show(whole(changes, 700, 0x2000, 0x2040)));
    f.out.clear();
    f.feed(stream_commit(800, 0x3000, 0x3040));
    CHECK(show(f.out) == show(whole({relation(0), insert(0, "a")}, 800, 0x3000, 0x3040)));
    CHECK(f.decoder.spool().memory_bytes() == 0);
}

TEST_CASE("pgoutput streaming: a temporary directory that cannot be written is a clear, transient error") {
    PgoutputOptions o = v2(0);
    o.spill_dir = "/nonexistent/docsync";
    PgoutputDecoder d(watches(), o);
    std::vector<Record> out;
    d.decode(start(700, true).b, out);
    try {
        d.decode(relation(700).b, out);
        FAIL("no error");
    } catch (const DecodeError&) {
        FAIL("a decode error");
    } catch (const Error& e) {
        CHECK(e.transient());
        CHECK(std::string(e.what()).find("/nonexistent/docsync") != std::string::npos);
        CHECK(std::string(e.what()).find("TMPDIR") != std::string::npos);
    }
}

TEST_CASE("pgoutput streaming: out-of-place stream messages throw, naming the problem") {
    auto fails = [](std::vector<Msg> before, const Msg& m, const char* what) {
        PgoutputDecoder d(watches(), v2());
        std::vector<Record> out;
        for (const auto& b : before) d.decode_all(b.b, out);
        CHECK_THROWS_WITH_AS(d.decode_all(m.b, out), doctest::Contains(what), DecodeError);
    };
    fails({start(700, true)}, start(800, true), "inside a block");
    fails({}, start(700, false), "whose first block this session did not see");
    fails({start(700, true), stop()}, start(700, true), "streaming already");
    fails({}, stop(), "STREAM STOP outside a block");
    fails({start(700, true)}, stream_commit(700, 0x10, 0x20), "inside a block");
    fails({begin(1, 0x10)}, start(700, true), "inside a transaction");
    fails({}, stream_commit(700, 0x10, 0x20), "did not see streamed");
    fails({start(700, true)}, begin(1, 0x10), "inside a block");
    fails({start(700, true)}, Msg().u8('B').i32(700).i64(0x10).i64(1).i32(1), "trailing bytes");  // BEGIN has no xid
    fails({start(700, true)}, Msg().u8('M').i32(700).u8(0).i64(1).cstr("docsync").i32(0), "non-transactional");
    fails({start(700, true)}, Msg().u8('I').i32(0).i32(kOrders).u8('N').i16(0), "xid 0");
    fails({}, Msg().u8('S').i32(700).u8(2), "first_segment");
    fails({}, Msg().u8('c').i32(700).u8(1).i64(1).i64(2).i64(0), "commit flags");
    fails({}, Msg().u8('c').i32(700).u8(0).i64(2).i64(2).i64(0), "end_lsn is not after");
    fails({}, Msg().u8('A').i32(700), "truncated");
    fails({}, Msg().u8('A').i32(700).i32(0), "subxid 0");
    fails({}, Msg().u8('E').u8(0), "trailing");
}

TEST_CASE("pgoutput streaming: a transaction that cannot be read back is abandoned, and the decoder reads on") {
    PgoutputDecoder d(watches(), v2());
    std::vector<Record> out;
    for (const Msg& m : {start(700, true), insert(700, "1"), stop()}) d.decode(m.b, out);  // no RELATION before it
    d.decode(stream_commit(700, 0x2000, 0x2040).b, out);
    CHECK_THROWS_WITH_AS(d.replay(out), doctest::Contains("before its RELATION"), DecodeError);
    CHECK_FALSE(d.replaying());
    CHECK(out.empty());
    CHECK(d.spool().open_transactions() == 0);
    d.decode_all(begin(701, 0x3000).b, out);
    d.decode_all(relation(0).b, out);
    d.decode_all(commit(0x3000, 0x3040).b, out);
    CHECK(out.size() == 3);
}
