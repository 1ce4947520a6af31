// The worker's decoder against golden bytes captured from the real plugin (tests/wire_golden.txt,
// produced by tests/wire_golden.sh): every line's binary record decodes, in order with one Decoder,
// to the record the plugin's text format describes on the same line. The rendering below follows
// the text format documented in shared/docsync_wire.h.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "replication/decoder.hpp"

using namespace docsync;

namespace {

std::string ident(const std::string& s) {
    bool plain = !s.empty() && ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_');
    for (char c : s) plain = plain && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (plain) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string literal(const std::string& s) {
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

std::string label(const RelationColumn& c) {
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

std::vector<std::uint8_t> from_hex(const std::string& hex) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

}  // namespace

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
