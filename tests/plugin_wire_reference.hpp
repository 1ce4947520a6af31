#pragma once
// A small, strict reference decoder of the plugin's binary records (shared/docsync_wire.h) that
// renders each record the way the plugin's text format does. Tests use it to check that the binary
// and text outputs of the real plugin say the same thing, record for record. It is independent of
// the worker's own decoder on purpose: it checks the wire documentation, not one implementation.

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "docsync_wire.h"

namespace docsync_test {

struct WireColumn {
    uint64_t attnum = 0;
    std::string name;
    uint64_t type = 0;
    uint8_t flags = 0;
};

struct WireRelation {
    std::string schema, name;
    char replident = 0;
    std::vector<WireColumn> columns;
};

// Fields of the last BEGIN / COMMIT decoded, for checks against the SQL interface's columns.
struct WireTxn {
    uint64_t xid = 0, commit_lsn = 0, end_lsn = 0;
    int64_t commit_time = 0;
};

class WireDecoder {
public:
    // Decodes one record and returns its text-format line; throws std::runtime_error when the record
    // is malformed (truncated, trailing bytes, unknown type or kind, relation not announced).
    std::string decode(std::string_view record) {
        pos_ = reinterpret_cast<const uint8_t*>(record.data());
        end_ = pos_ + record.size();
        std::string out;
        char type = static_cast<char>(u8());
        switch (type) {
        case DOCSYNC_REC_BEGIN:
            begin_.xid = uv();
            begin_.commit_lsn = uv();
            begin_.commit_time = docsync_zigzag_decode(uv());
            out = "BEGIN";
            break;
        case DOCSYNC_REC_COMMIT:
            commit_.commit_lsn = uv();
            commit_.end_lsn = uv();
            out = "COMMIT";
            break;
        case DOCSYNC_REC_RELATION: {
            uint64_t relid = uv();
            WireRelation rel;
            rel.schema = str();
            rel.name = str();
            rel.replident = static_cast<char>(u8());
            uint64_t n = uv();
            out = "RELATION " + qualified(rel) + " replident " + rel.replident + ":";
            for (uint64_t i = 0; i < n; ++i) {
                WireColumn c;
                c.attnum = uv();
                c.name = str();
                c.type = uv();
                c.flags = u8();
                out += (i == 0 ? " " : ", ") + label(c) + " " + std::to_string(c.type);
                if (c.flags & DOCSYNC_COL_IDENTITY) out += " identity";
                if (c.flags & DOCSYNC_COL_MISSING) out += " missing";
                rel.columns.push_back(std::move(c));
            }
            relations_[relid] = std::move(rel);
            break;
        }
        case DOCSYNC_REC_INSERT:
        case DOCSYNC_REC_UPDATE:
        case DOCSYNC_REC_DELETE: {
            const WireRelation& rel = relation(uv());
            out = std::string(type == DOCSYNC_REC_INSERT ? "INSERT " : type == DOCSYNC_REC_UPDATE ? "UPDATE " : "DELETE ") +
                  qualified(rel);
            if (type != DOCSYNC_REC_DELETE) out += tuple("new", rel);
            if (type != DOCSYNC_REC_INSERT) out += tuple("old", rel);
            break;
        }
        case DOCSYNC_REC_TRUNCATE: {
            uint8_t flags = u8();
            uint64_t n = uv();
            out = "TRUNCATE ";
            for (uint64_t i = 0; i < n; ++i) out += (i == 0 ? "" : ", ") + qualified(relation(uv()));
            if (flags & DOCSYNC_TRUNCATE_CASCADE) out += " CASCADE";
            if (flags & DOCSYNC_TRUNCATE_RESTART_IDENTITY) out += " RESTART IDENTITY";
            break;
        }
        case DOCSYNC_REC_MESSAGE: {
            uint8_t transactional = u8();
            if (transactional > 1) throw std::runtime_error("bad transactional flag");
            std::string prefix = str();
            std::string content = str();
            out = std::string("MESSAGE ") + (transactional ? "transactional " : "nontransactional ") + literal(prefix) +
                  " " + literal(content);
            break;
        }
        default:
            throw std::runtime_error("unknown record type " + std::to_string(static_cast<int>(type)));
        }
        if (pos_ != end_) throw std::runtime_error("trailing bytes after record");
        return out;
    }

    const WireTxn& last_begin() const { return begin_; }
    const WireTxn& last_commit() const { return commit_; }

private:
    uint8_t u8() {
        if (pos_ >= end_) throw std::runtime_error("truncated record");
        return *pos_++;
    }
    uint64_t uv() {
        uint64_t v = 0;
        if (!docsync_uv_decode(&pos_, end_, &v)) throw std::runtime_error("bad varint");
        return v;
    }
    std::string str() {
        uint64_t n = uv();
        if (n > static_cast<uint64_t>(end_ - pos_)) throw std::runtime_error("string past the end");
        std::string s(reinterpret_cast<const char*>(pos_), static_cast<std::size_t>(n));
        pos_ += n;
        return s;
    }
    const WireRelation& relation(uint64_t relid) const {
        auto it = relations_.find(relid);
        if (it == relations_.end()) throw std::runtime_error("change before its RELATION");
        return it->second;
    }
    std::string tuple(const char* name, const WireRelation& rel) {
        if (uv() != rel.columns.size()) throw std::runtime_error("tuple width differs from RELATION");
        std::string out = std::string(" ") + name + "(";
        for (std::size_t i = 0; i < rel.columns.size(); ++i) {
            if (i > 0) out += ' ';
            out += label(rel.columns[i]) + "=";
            switch (u8()) {
            case DOCSYNC_VAL_TEXT: out += literal(str()); break;
            case DOCSYNC_VAL_NULL: out += "NULL"; break;
            case DOCSYNC_VAL_TOAST: out += "TOAST"; break;
            case DOCSYNC_VAL_SAME: out += "SAME"; break;
            case DOCSYNC_VAL_UNKNOWN: out += "UNKNOWN"; break;
            default: throw std::runtime_error("unknown value kind");
            }
        }
        return out + ")";
    }
    static std::string ident(const std::string& s) {
        bool plain = !s.empty() && ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_');
        for (char c : s) plain = plain && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
        if (plain) return s;
        std::string out = "\"";
        for (char c : s) {
            if (c == '"') out += '"';
            out += c;
        }
        return out + "\"";
    }
    static std::string qualified(const WireRelation& rel) { return ident(rel.schema) + "." + ident(rel.name); }
    static std::string label(const WireColumn& c) {
        return c.name.empty() ? "\"#" + std::to_string(c.attnum) + "\"" : ident(c.name);
    }
    static std::string literal(const std::string& s) {
        static const char hex[] = "0123456789abcdef";
        std::string out = "'";
        for (unsigned char c : s) {
            switch (c) {
            case '\'': out += "''"; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    out += "\\x";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += static_cast<char>(c);
                }
            }
        }
        return out + "'";
    }

    const uint8_t* pos_ = nullptr;
    const uint8_t* end_ = nullptr;
    std::map<uint64_t, WireRelation> relations_;
    WireTxn begin_, commit_;
};

// "0a1b…" → bytes; throws on odd length or a non-hex digit.
inline std::string from_hex(std::string_view hex) {
    auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw std::runtime_error("bad hex digit");
    };
    if (hex.size() % 2 != 0) throw std::runtime_error("odd hex length");
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1]));
    return out;
}

}  // namespace docsync_test
