#pragma once
// Renders the worker's decoded records (worker/replication/decoder.hpp) in the plugin's text format
// (documented in shared/docsync_wire.h), so tests can check that the plugin's binary and text outputs
// say the same thing record for record, and that the worker's decoder reads them as the plugin meant.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "replication/decoder.hpp"

namespace docsync_test {

using namespace docsync;

inline std::string ident(const std::string& s) {
    bool plain = !s.empty() && ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_');
    for (char c : s) plain = plain && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (plain) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

inline std::string literal(const std::string& s) {
    static const char hex[] = "0123456789abcdef";
    std::string out = "'";
    for (unsigned char c : s) {
        if (c == '\'') out += "''";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7f) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
        else out += static_cast<char>(c);
    }
    return out + "'";
}

inline std::string label(const RelationColumn& c) {
    return c.name.empty() ? "\"#" + std::to_string(c.attnum) + "\"" : ident(c.name);
}

// Renders a decoded record in the plugin's text format.
class TextRenderer {
public:
    std::string render(const Record& record) {
        if (std::holds_alternative<BeginRecord>(record)) return "BEGIN";
        if (std::holds_alternative<CommitRecord>(record)) return "COMMIT";
        if (auto* r = std::get_if<RelationRecord>(&record)) {
            relations_[r->relid] = *r;
            std::string out = "RELATION " + qualified(*r) + " replident " + r->replica_identity + ":";
            for (std::size_t i = 0; i < r->columns.size(); ++i) {
                const auto& c = r->columns[i];
                out += (i == 0 ? " " : ", ") + label(c) + " " + std::to_string(c.type_oid);
                if (c.identity) out += " identity";
                if (c.missing) out += " missing";
            }
            return out;
        }
        if (auto* c = std::get_if<ChangeRecord>(&record)) {
            const auto& rel = relations_.at(c->relid);
            std::string out = std::string(c->op == ChangeOp::Insert ? "INSERT " : c->op == ChangeOp::Update ? "UPDATE " : "DELETE ") +
                              qualified(rel);
            if (c->op != ChangeOp::Delete) out += tuple("new", rel, c->new_values);
            if (c->op != ChangeOp::Insert) out += tuple("old", rel, c->old_values);
            return out;
        }
        if (auto* t = std::get_if<TruncateRecord>(&record)) {
            std::string out = "TRUNCATE ";
            for (std::size_t i = 0; i < t->relids.size(); ++i) out += (i == 0 ? "" : ", ") + qualified(relations_.at(t->relids[i]));
            if (t->cascade) out += " CASCADE";
            if (t->restart_identity) out += " RESTART IDENTITY";
            return out;
        }
        const auto& m = std::get<MessageRecord>(record);
        return std::string("MESSAGE ") + (m.transactional ? "transactional " : "nontransactional ") + literal(m.prefix) +
               " " + literal(m.content);
    }

private:
    static std::string qualified(const RelationRecord& r) { return ident(r.schema) + "." + ident(r.name); }
    static std::string tuple(const char* name, const RelationRecord& rel, const std::vector<Value>& values) {
        std::string out = std::string(" ") + name + "(";
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i > 0) out += ' ';
            out += label(rel.columns.at(i)) + "=";
            switch (values[i].kind) {
                case ValueKind::Text: out += literal(values[i].text); break;
                case ValueKind::Null: out += "NULL"; break;
                case ValueKind::Toast: out += "TOAST"; break;
                case ValueKind::Same: out += "SAME"; break;
                case ValueKind::Unknown: out += "UNKNOWN"; break;
            }
        }
        return out + ")";
    }
    std::map<Oid, RelationRecord> relations_;
};

inline std::vector<std::uint8_t> from_hex(std::string_view hex) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    return out;
}

}  // namespace docsync_test
