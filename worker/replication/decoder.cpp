// The docsync wire decoder (see decoder.hpp and shared/docsync_wire.h).
#include "replication/decoder.hpp"

#include <string>

#include "docsync_wire.h"

namespace docsync {

namespace {

// Columns a relation may have (PostgreSQL's MaxHeapAttributeNumber is 1600).
constexpr std::uint64_t kMaxColumns = 1600;

const char* record_name(std::uint8_t type) {
    switch (type) {
        case DOCSYNC_REC_BEGIN: return "BEGIN";
        case DOCSYNC_REC_RELATION: return "RELATION";
        case DOCSYNC_REC_INSERT: return "INSERT";
        case DOCSYNC_REC_UPDATE: return "UPDATE";
        case DOCSYNC_REC_DELETE: return "DELETE";
        case DOCSYNC_REC_TRUNCATE: return "TRUNCATE";
        case DOCSYNC_REC_MESSAGE: return "MESSAGE";
        case DOCSYNC_REC_COMMIT: return "COMMIT";
        default: return "unknown";
    }
}

// A bounds-checked reader over one message.
class Reader {
public:
    Reader(std::span<const std::uint8_t> bytes, const char* record)
        : begin_(bytes.data()), pos_(bytes.data()), end_(bytes.data() + bytes.size()), record_(record) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw DecodeError("malformed docsync " + std::string(record_) + " record at byte " +
                          std::to_string(pos_ - begin_) + ": " + what +
                          "; the plugin and the worker must speak the same wire version (upgrade both)");
    }

    std::uint64_t uv(const char* field) {
        std::uint64_t v = 0;
        if (!docsync_uv_decode(&pos_, end_, &v))
            fail(std::string("truncated or over-long varint for ") + field);
        return v;
    }
    std::int64_t sv(const char* field) { return docsync_zigzag_decode(uv(field)); }
    std::uint8_t u8(const char* field) {
        if (pos_ >= end_) fail(std::string("truncated before ") + field);
        return *pos_++;
    }
    std::string str(const char* field) {
        std::uint64_t n = uv(field);
        if (n > remaining()) fail(std::string("length of ") + field + " runs past the end of the record");
        std::string s(reinterpret_cast<const char*>(pos_), static_cast<std::size_t>(n));
        pos_ += n;
        return s;
    }
    Oid oid(const char* field) {
        std::uint64_t v = uv(field);
        if (v > 0xFFFFFFFFu) fail(std::string(field) + " is not an OID");
        return static_cast<Oid>(v);
    }
    // A count of items, each at least `min_bytes` long, checked against what is left before anything
    // is allocated for it.
    std::size_t count(const char* field, std::size_t min_bytes, std::uint64_t max) {
        std::uint64_t n = uv(field);
        if (n > max || n * min_bytes > remaining()) fail(std::string(field) + " " + std::to_string(n) + " is impossible here");
        return static_cast<std::size_t>(n);
    }
    std::size_t remaining() const { return static_cast<std::size_t>(end_ - pos_); }
    void finish() const {
        if (pos_ != end_) fail(std::to_string(remaining()) + " unexpected trailing bytes");
    }

private:
    const std::uint8_t* begin_;
    const std::uint8_t* pos_;
    const std::uint8_t* end_;
    const char* record_;
};

std::vector<Value> read_tuple(Reader& r, std::size_t width, bool old_tuple, const char* which) {
    std::size_t natts = r.count(which, 1, kMaxColumns);
    if (natts != width)
        r.fail(std::string(which) + " has " + std::to_string(natts) + " columns, its RELATION has " +
               std::to_string(width));
    std::vector<Value> values(natts);
    for (auto& v : values) {
        std::uint8_t kind = r.u8("value kind");
        switch (kind) {
            case DOCSYNC_VAL_TEXT:
                v.kind = ValueKind::Text;
                v.text = r.str("value text");
                break;
            case DOCSYNC_VAL_NULL: v.kind = ValueKind::Null; break;
            case DOCSYNC_VAL_UNKNOWN: v.kind = ValueKind::Unknown; break;
            case DOCSYNC_VAL_TOAST:
                if (old_tuple) r.fail("unchanged-TOAST marker in an old tuple");
                v.kind = ValueKind::Toast;
                break;
            case DOCSYNC_VAL_SAME:
                if (!old_tuple) r.fail("'same' marker in a new tuple");
                v.kind = ValueKind::Same;
                break;
            default: r.fail("unknown value kind " + std::to_string(kind));
        }
    }
    return values;
}

}  // namespace

Record Decoder::decode(std::span<const std::uint8_t> message) {
    if (message.empty()) throw DecodeError("malformed docsync record: empty message");
    std::uint8_t type = message[0];
    Reader r(message.subspan(1), record_name(type));
    auto width_of = [&](Oid relid) {
        auto it = relation_widths_.find(relid);
        if (it == relation_widths_.end())
            r.fail("change for relation " + std::to_string(relid) + " before its RELATION record");
        return it->second;
    };
    Record out;
    switch (type) {
        case DOCSYNC_REC_BEGIN: {
            BeginRecord b;
            b.xid = r.uv("xid");
            b.commit_lsn = r.uv("commit_lsn");
            b.commit_time = r.sv("commit_time");
            out = b;
            break;
        }
        case DOCSYNC_REC_RELATION: {
            RelationRecord rel;
            rel.relid = r.oid("relid");
            rel.schema = r.str("schema");
            rel.name = r.str("name");
            rel.replica_identity = static_cast<char>(r.u8("replica_identity"));
            if (rel.replica_identity != 'd' && rel.replica_identity != 'f' && rel.replica_identity != 'n' &&
                rel.replica_identity != 'i')
                r.fail("unknown replica identity " + std::to_string(static_cast<unsigned char>(rel.replica_identity)));
            std::size_t natts = r.count("natts", 4, kMaxColumns);
            rel.columns.resize(natts);
            for (auto& col : rel.columns) {
                std::uint64_t attnum = r.uv("attnum");
                col.name = r.str("column name");
                col.type_oid = r.oid("type oid");
                std::uint8_t flags = r.u8("column flags");
                if (flags & ~(DOCSYNC_COL_IDENTITY | DOCSYNC_COL_MISSING)) r.fail("unknown column flags");
                col.identity = flags & DOCSYNC_COL_IDENTITY;
                col.missing = flags & DOCSYNC_COL_MISSING;
                // A missing column listed by name has attnum 0; every other attnum is a real one.
                if ((attnum == 0 && !col.missing) || attnum > kMaxColumns)
                    r.fail("attnum " + std::to_string(attnum) + " out of range");
                col.attnum = static_cast<int>(attnum);
            }
            r.finish();
            relation_widths_[rel.relid] = natts;
            return rel;
        }
        case DOCSYNC_REC_INSERT:
        case DOCSYNC_REC_UPDATE:
        case DOCSYNC_REC_DELETE: {
            ChangeRecord c;
            c.op = static_cast<ChangeOp>(type);
            c.relid = r.oid("relid");
            std::size_t width = width_of(c.relid);
            if (type != DOCSYNC_REC_DELETE) c.new_values = read_tuple(r, width, false, "new tuple");
            if (type != DOCSYNC_REC_INSERT) c.old_values = read_tuple(r, width, true, "old tuple");
            out = std::move(c);
            break;
        }
        case DOCSYNC_REC_TRUNCATE: {
            TruncateRecord t;
            std::uint8_t flags = r.u8("flags");
            if (flags & ~(DOCSYNC_TRUNCATE_CASCADE | DOCSYNC_TRUNCATE_RESTART_IDENTITY)) r.fail("unknown truncate flags");
            t.cascade = flags & DOCSYNC_TRUNCATE_CASCADE;
            t.restart_identity = flags & DOCSYNC_TRUNCATE_RESTART_IDENTITY;
            std::size_t n = r.count("nrels", 1, UINT32_MAX);
            t.relids.reserve(n);
            for (std::size_t i = 0; i < n; ++i) t.relids.push_back(r.oid("relid"));
            out = std::move(t);
            break;
        }
        case DOCSYNC_REC_MESSAGE: {
            MessageRecord m;
            std::uint8_t transactional = r.u8("transactional");
            if (transactional > 1) r.fail("transactional flag is not 0 or 1");
            m.transactional = transactional == 1;
            m.prefix = r.str("prefix");
            m.content = r.str("content");
            out = std::move(m);
            break;
        }
        case DOCSYNC_REC_COMMIT: {
            CommitRecord c;
            c.commit_lsn = r.uv("commit_lsn");
            c.end_lsn = r.uv("end_lsn");
            if (c.end_lsn <= c.commit_lsn) r.fail("end_lsn is not after commit_lsn");
            out = c;
            break;
        }
        default:
            throw DecodeError("malformed docsync record: unknown record type " + std::to_string(type) +
                              "; the plugin speaks a wire version this worker does not (upgrade the worker)");
    }
    r.finish();
    return out;
}

std::string describe(const Record& record) {
    struct Visitor {
        std::string operator()(const BeginRecord& b) const {
            return "BEGIN xid " + std::to_string(b.xid) + " commit " + format_lsn(b.commit_lsn);
        }
        std::string operator()(const RelationRecord& r) const {
            return "RELATION " + std::to_string(r.relid) + " " + r.schema + "." + r.name + " (" +
                   std::to_string(r.columns.size()) + " columns)";
        }
        std::string operator()(const ChangeRecord& c) const {
            return std::string(c.op == ChangeOp::Insert ? "INSERT" : c.op == ChangeOp::Update ? "UPDATE" : "DELETE") +
                   " relation " + std::to_string(c.relid);
        }
        std::string operator()(const TruncateRecord& t) const {
            return "TRUNCATE " + std::to_string(t.relids.size()) + " relations";
        }
        std::string operator()(const MessageRecord& m) const { return "MESSAGE " + m.prefix; }
        std::string operator()(const CommitRecord& c) const {
            return "COMMIT " + format_lsn(c.commit_lsn) + " end " + format_lsn(c.end_lsn);
        }
    };
    return std::visit(Visitor{}, record);
}

}  // namespace docsync
