// Parsing pgoutput's messages (see pgoutput_messages.hpp).
#include "replication/pgoutput_messages.hpp"

#include <cstring>

namespace docsync::pgoutput {

namespace {

// Columns a relation may have (PostgreSQL's MaxHeapAttributeNumber).
constexpr std::uint32_t kMaxColumns = 1600;

const char* message_name(std::uint8_t type) {
    switch (type) {
        case 'B': return "BEGIN";
        case 'C': return "COMMIT";
        case 'O': return "ORIGIN";
        case 'R': return "RELATION";
        case 'Y': return "TYPE";
        case 'I': return "INSERT";
        case 'U': return "UPDATE";
        case 'D': return "DELETE";
        case 'T': return "TRUNCATE";
        case 'M': return "MESSAGE";
        case 'S': return "STREAM START";
        case 'E': return "STREAM STOP";
        case 'c': return "STREAM COMMIT";
        case 'A': return "STREAM ABORT";
        default: return "unknown";
    }
}

// A bounds-checked big-endian reader over one message.
class Reader {
public:
    Reader(std::span<const std::uint8_t> bytes, const char* message)
        : begin_(bytes.data()), pos_(bytes.data()), end_(bytes.data() + bytes.size()), message_(message) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw DecodeError("malformed pgoutput " + std::string(message_) + " message at byte " +
                          std::to_string(pos_ - begin_ + 1) + ": " + what);
    }

    std::uint64_t be(std::size_t bytes, const char* field) {
        if (remaining() < bytes) fail(std::string("truncated before the end of ") + field);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < bytes; ++i) v = (v << 8) | pos_[i];
        pos_ += bytes;
        return v;
    }
    std::uint8_t u8(const char* field) { return static_cast<std::uint8_t>(be(1, field)); }
    std::uint16_t u16(const char* field) { return static_cast<std::uint16_t>(be(2, field)); }
    std::uint32_t u32(const char* field) { return static_cast<std::uint32_t>(be(4, field)); }
    std::uint64_t u64(const char* field) { return be(8, field); }
    std::int64_t i64(const char* field) { return static_cast<std::int64_t>(u64(field)); }

    // A NUL-terminated string.
    std::string cstr(const char* field) {
        const void* nul = std::memchr(pos_, 0, remaining());
        if (nul == nullptr) fail(std::string(field) + " has no terminating NUL");
        auto n = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - pos_);
        std::string s(reinterpret_cast<const char*>(pos_), n);
        pos_ += n + 1;
        return s;
    }
    // Int32 length, then that many bytes.
    std::string bytes(const char* field) {
        std::uint32_t n = u32(field);
        if (n > remaining()) fail(std::string("length of ") + field + " runs past the end of the message");
        std::string s(reinterpret_cast<const char*>(pos_), n);
        pos_ += n;
        return s;
    }
    std::size_t remaining() const { return static_cast<std::size_t>(end_ - pos_); }
    void finish() const {
        if (pos_ != end_) fail(std::to_string(remaining()) + " unexpected trailing bytes");
    }

private:
    const std::uint8_t* begin_;
    const std::uint8_t* pos_;
    const std::uint8_t* end_;
    const char* message_;
};

Tuple read_tuple(Reader& r, const char* which) {
    std::uint16_t ncols = r.u16(which);
    // Every column takes at least its kind byte: checked before anything is allocated.
    if (ncols > kMaxColumns || ncols > r.remaining())
        r.fail(std::string(which) + " claims " + std::to_string(ncols) + " columns");
    Tuple tuple(ncols);
    for (auto& d : tuple) {
        std::uint8_t kind = r.u8("column kind");
        switch (kind) {
            case 'n': d.kind = Kind::Null; break;
            case 'u': d.kind = Kind::Toast; break;
            case 't':
                d.kind = Kind::Text;
                d.bytes = r.bytes("column value");
                break;
            case 'b':
                d.kind = Kind::Binary;
                d.bytes = r.bytes("column value");
                break;
            default: r.fail("unknown column kind " + std::to_string(kind));
        }
    }
    return tuple;
}

std::uint32_t relid(Reader& r) {
    std::uint32_t v = r.u32("relid");
    if (v == 0) r.fail("relid 0 is not a relation");
    return v;
}

}  // namespace

Parsed parse_pgoutput(std::span<const std::uint8_t> message, int proto_version, bool in_block, std::uint32_t* xid) {
    if (proto_version < kProtoVersionMin || proto_version > kProtoVersionMax)
        throw DecodeError("pgoutput protocol version " + std::to_string(proto_version) +
                          " is not implemented (this worker reads versions 1 and 2: start the stream with "
                          "proto_version '1' or '2')");
    if (in_block && proto_version < kProtoVersionStream)
        throw DecodeError("pgoutput protocol version " + std::to_string(proto_version) + " has no streamed transactions");
    if (message.empty()) throw DecodeError("malformed pgoutput message: empty message");
    if (xid != nullptr) *xid = 0;
    std::uint8_t type = message[0];
    Reader r(message.subspan(1), message_name(type));
    // Inside a block the messages of a change carry the (sub)transaction's xid first.
    if (in_block && (type == 'R' || type == 'Y' || type == 'I' || type == 'U' || type == 'D' || type == 'T' ||
                     type == 'M')) {
        std::uint32_t v = r.u32("xid");
        if (v == 0) r.fail("xid 0 is not a transaction");
        if (xid != nullptr) *xid = v;
    }
    auto stream_message = [&] {
        if (proto_version < kProtoVersionStream)
            throw DecodeError(std::string("pgoutput sent a streamed-transaction message ('") + static_cast<char>(type) +
                              "'), which protocol version 1 does not have; start the stream with proto_version '1' "
                              "and without the `streaming` option, or read it with protocol version 2");
    };
    auto stream_xid = [&] {
        std::uint32_t v = r.u32("xid");
        if (v == 0) r.fail("xid 0 is not a transaction");
        return v;
    };
    // A commit's fields after its xid (Stream Commit's only): no flags are defined in either.
    auto commit_fields = [&](auto& c) {
        std::uint8_t flags = r.u8("flags");
        if (flags != 0) r.fail("unknown commit flags " + std::to_string(flags));
        c.commit_lsn = r.u64("commit_lsn");
        c.end_lsn = r.u64("end_lsn");
        c.commit_time = r.i64("commit_time");
        if (c.end_lsn <= c.commit_lsn) r.fail("end_lsn is not after commit_lsn");
    };
    Parsed out;
    switch (type) {
        case 'B': {
            Begin b;
            b.final_lsn = r.u64("final_lsn");
            b.commit_time = r.i64("commit_time");
            b.xid = r.u32("xid");
            out = b;
            break;
        }
        case 'C': {
            Commit c;
            commit_fields(c);
            out = c;
            break;
        }
        case 'O': {
            Origin o;
            o.lsn = r.u64("origin lsn");
            o.name = r.cstr("origin name");
            out = std::move(o);
            break;
        }
        case 'R': {
            Relation rel;
            rel.relid = relid(r);
            rel.schema = r.cstr("namespace");
            if (rel.schema.empty()) rel.schema = "pg_catalog";  // pgoutput leaves pg_catalog unnamed
            rel.name = r.cstr("relation name");
            rel.replica_identity = static_cast<char>(r.u8("replica identity"));
            if (rel.replica_identity != 'd' && rel.replica_identity != 'f' && rel.replica_identity != 'n' &&
                rel.replica_identity != 'i')
                r.fail("unknown replica identity " + std::to_string(static_cast<unsigned char>(rel.replica_identity)));
            std::uint16_t natts = r.u16("natts");
            // Each column takes at least 10 bytes (flags, an empty name, type oid, typmod).
            if (natts > kMaxColumns || std::size_t{natts} * 10 > r.remaining())
                r.fail("natts " + std::to_string(natts) + " is impossible here");
            rel.columns.resize(natts);
            for (auto& col : rel.columns) {
                std::uint8_t flags = r.u8("column flags");
                if (flags & ~1u) r.fail("unknown column flags " + std::to_string(flags));
                col.key = flags & 1u;
                col.name = r.cstr("column name");
                col.type_oid = r.u32("type oid");
                col.typmod = static_cast<std::int32_t>(r.u32("typmod"));
            }
            out = std::move(rel);
            break;
        }
        case 'Y': {
            Type t;
            t.oid = r.u32("type oid");
            t.schema = r.cstr("type namespace");
            t.name = r.cstr("type name");
            out = std::move(t);
            break;
        }
        case 'I':
        case 'U':
        case 'D': {
            Change c;
            c.op = static_cast<char>(type);
            c.relid = relid(r);
            std::uint8_t tag = r.u8("tuple tag");
            if (type != 'I' && (tag == 'K' || tag == 'O')) {
                c.old_kind = static_cast<char>(tag);
                c.old_tuple = read_tuple(r, "old tuple");
                if (type == 'U') tag = r.u8("tuple tag");
            }
            if (type == 'D') {
                if (c.old_kind == 0) r.fail("a DELETE without an old tuple ('K' or 'O')");
            } else {
                if (tag != 'N') r.fail("expected the new tuple ('N'), found byte " + std::to_string(tag));
                c.new_tuple = read_tuple(r, "new tuple");
            }
            out = std::move(c);
            break;
        }
        case 'T': {
            Truncate t;
            std::uint32_t n = r.u32("nrels");
            std::uint8_t options = r.u8("options");
            if (options & ~3u) r.fail("unknown truncate options " + std::to_string(options));
            t.cascade = options & 1u;
            t.restart_identity = options & 2u;
            if (n == 0 || n > r.remaining() / 4) r.fail("nrels " + std::to_string(n) + " is impossible here");
            t.relids.reserve(n);
            for (std::uint32_t i = 0; i < n; ++i) t.relids.push_back(relid(r));
            out = std::move(t);
            break;
        }
        case 'M': {
            Message m;
            std::uint8_t flags = r.u8("flags");
            if (flags > 1) r.fail("unknown message flags " + std::to_string(flags));
            m.transactional = flags == 1;
            m.lsn = r.u64("lsn");
            m.prefix = r.cstr("prefix");
            m.content = r.bytes("content");
            out = std::move(m);
            break;
        }
        case 'S': {
            stream_message();
            StreamStart s;
            s.xid = stream_xid();
            std::uint8_t first = r.u8("first_segment");
            if (first > 1) r.fail("first_segment is " + std::to_string(first) + ", not 0 or 1");
            s.first_segment = first == 1;
            out = s;
            break;
        }
        case 'E':
            stream_message();
            out = StreamStop{};
            break;
        case 'c': {
            stream_message();
            StreamCommit c;
            c.xid = stream_xid();
            commit_fields(c);
            out = c;
            break;
        }
        case 'A': {
            stream_message();
            StreamAbort a;
            a.xid = stream_xid();
            a.subxid = r.u32("subxid");
            if (a.subxid == 0) r.fail("subxid 0 is not a transaction");
            out = a;
            break;
        }
        case 'b':
        case 'P':
        case 'K':
        case 'r':
            throw DecodeError(std::string("pgoutput sent a two-phase commit message ('") + static_cast<char>(type) +
                              "'), which protocol version 1 does not have; start the stream without `two_phase`");
        default:
            throw DecodeError("malformed pgoutput message: unknown message type " + std::to_string(type));
    }
    r.finish();
    return out;
}

}  // namespace docsync::pgoutput
