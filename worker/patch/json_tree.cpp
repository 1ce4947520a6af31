// The span tree's parser (iterative, validating RFC 8259), its compact writer, string decoding and
// escaping, and semantic equality for the `test` operation.
#include "patch/json_tree.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>
#include <unordered_map>

#include "common/error.hpp"
#include "common/json_scan.hpp"

namespace docsync::patch {

class TreeParser {
public:
    TreeParser(Tree& tree, std::string_view what, std::size_t max_depth)
        : t_(tree), in_(tree.text_), what_(what), max_depth_(max_depth) {}

    void run() {
        enum class Want { Value, ValueOrClose, KeyOrClose, Key, CommaOrClose };
        Want want = Want::Value;
        Key key;
        for (;;) {
            skip_space();
            if (i_ == in_.size()) {
                if (want == Want::CommaOrClose && open_.empty()) return;
                fail("unexpected end of the text");
            }
            char c = in_[i_];
            switch (want) {
                case Want::ValueOrClose:
                    if (c == ']') {
                        close();
                        want = Want::CommaOrClose;
                        continue;
                    }
                    [[fallthrough]];
                case Want::Value:
                    value(c, key);
                    key = {};
                    want = (c == '{')   ? Want::KeyOrClose
                           : (c == '[') ? Want::ValueOrClose
                                        : Want::CommaOrClose;
                    continue;
                case Want::KeyOrClose:
                    if (c == '}') {
                        close();
                        want = Want::CommaOrClose;
                        continue;
                    }
                    [[fallthrough]];
                case Want::Key: {
                    if (c != '"') fail("expected a string key");
                    std::size_t start = i_;
                    bool escaped = string();
                    key.at = static_cast<std::uint32_t>(start + 1);
                    key.size = static_cast<std::uint32_t>(i_ - start - 2);
                    key.decoded = 0;
                    if (escaped) {
                        std::string& decoded = t_.decoded_.emplace_back();
                        decode_string(in_.substr(key.at, key.size), decoded);
                        key.decoded = static_cast<std::uint32_t>(t_.decoded_.size());
                    }
                    skip_space();
                    if (i_ == in_.size() || in_[i_] != ':') fail("expected ':' after a key");
                    ++i_;
                    want = Want::Value;
                    continue;
                }
                case Want::CommaOrClose:
                    if (open_.empty()) fail("text after the value");
                    {
                        Kind kind = t_.nodes_[open_.back()].kind;
                        if (c == ',') {
                            ++i_;
                            want = kind == Kind::Object ? Want::Key : Want::Value;
                        } else if ((c == '}' && kind == Kind::Object) || (c == ']' && kind == Kind::Array)) {
                            close();
                        } else {
                            fail(kind == Kind::Object ? "expected ',' or '}'" : "expected ',' or ']'");
                        }
                    }
                    continue;
            }
        }
    }

private:
    struct Key {
        std::uint32_t at = 0, size = 0, decoded = 0;
    };

    [[noreturn]] void fail(const char* why) {
        throw Error(std::string(what_) + " is not valid JSON: " + why + " at byte " + std::to_string(i_));
    }
    void skip_space() {
        while (i_ < in_.size() && (in_[i_] == ' ' || in_[i_] == '\t' || in_[i_] == '\n' || in_[i_] == '\r')) {
            ++i_;
            t_.compact_ = false;
        }
    }
    void value(char c, Key key) {
        Node n;
        n.begin = static_cast<std::uint32_t>(i_);
        n.key_at = key.at;
        n.key_size = key.size;
        n.decoded = key.decoded;
        n.depth = static_cast<std::uint16_t>(open_.size());
        if (!open_.empty()) ++t_.nodes_[open_.back()].count;
        if (c == '{' || c == '[') {
            if (open_.size() >= max_depth_)
                throw TooDeep(std::string(what_) + " nests deeper than " + std::to_string(max_depth_) +
                              " arrays and objects at byte " + std::to_string(i_));
            n.kind = c == '{' ? Kind::Object : Kind::Array;
            ++i_;
            open_.push_back(t_.nodes_.size());
            t_.nodes_.push_back(n);
            return;
        }
        if (c == '"') {
            n.kind = Kind::String;
            string();
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            n.kind = Kind::Number;
            number();
        } else {
            auto lit = json_scan::literal(in_, i_);
            if (lit == json_scan::Literal::None) fail("expected a value");
            n.kind = lit == json_scan::Literal::True    ? Kind::True
                     : lit == json_scan::Literal::False ? Kind::False
                                                        : Kind::Null;
            i_ += json_scan::literal_size(lit);
        }
        n.end = static_cast<std::uint32_t>(i_);
        n.after = static_cast<std::uint32_t>(t_.nodes_.size() + 1);
        t_.nodes_.push_back(n);
    }
    void close() {
        Node& n = t_.nodes_[open_.back()];
        open_.pop_back();
        ++i_;
        n.end = static_cast<std::uint32_t>(i_);
        n.after = static_cast<std::uint32_t>(t_.nodes_.size());
    }
    // A string at i_; returns whether it holds an escape. Bytes of 0x80 and above pass unchecked.
    bool string() {
        using json_scan::ScanError;
        json_scan::StringScan r = json_scan::string<false>(in_, i_);
        switch (r.error) {
            case ScanError::None:
                return r.escaped;
            case ScanError::ControlCharacter:
                fail("a control character in a string");
            case ScanError::ShortUnicodeEscape:
                fail("a short \\u escape");
            case ScanError::BadUnicodeEscape:
                fail("a bad \\u escape");
            case ScanError::BadEscape:
                fail("a bad escape in a string");
            default:
                fail("unterminated string");
        }
    }
    void number() {
        if (auto e = json_scan::number(in_, i_); e != json_scan::ScanError::None)
            fail(json_scan::number_error_text(e));
    }

    Tree& t_;
    std::string_view in_;
    std::string_view what_;
    std::size_t max_depth_;
    std::size_t i_ = 0;
    std::vector<std::size_t> open_;
};

Tree::Tree(std::string_view text, std::string_view what, std::size_t max_depth) : text_(text) {
    if (text.size() >= UINT32_MAX) throw Error(std::string(what) + " is longer than 4 GiB");
    nodes_.reserve(text.size() / 8 + 16);
    TreeParser(*this, what, max_depth).run();
}

std::size_t Tree::height(std::size_t i) const {
    std::size_t top = nodes_[i].depth, most = top;
    for (std::size_t k = i; k < nodes_[i].after; ++k) {
        std::size_t d =
            nodes_[k].depth + (nodes_[k].kind == Kind::Array || nodes_[k].kind == Kind::Object ? 1 : 0);
        if (d > most) most = d;
    }
    return most - top;
}

void Tree::write(std::size_t i, std::string& out) const {
    if (compact_) {
        out.append(raw(i));
        return;
    }
    // Iterative: close brackets are written when the walk passes a container's last node.
    std::vector<std::size_t> open;
    for (std::size_t k = i; k < nodes_[i].after; ++k) {
        const Node& n = nodes_[k];
        if (k != i && !open.empty() && Tree::first_child(open.back()) != k) out += ',';
        if (!open.empty() && nodes_[open.back()].kind == Kind::Object) {
            out += '"';
            out.append(raw_key(k));
            out += "\":";
        }
        if (n.kind == Kind::Array || n.kind == Kind::Object) {
            out += n.kind == Kind::Array ? '[' : '{';
            open.push_back(k);
        } else {
            out.append(raw(k));
        }
        while (!open.empty() && nodes_[open.back()].after == k + 1) {
            out += nodes_[open.back()].kind == Kind::Array ? ']' : '}';
            open.pop_back();
        }
    }
}

namespace {

unsigned hex4(std::string_view s) {
    unsigned v = 0;
    for (char c : s.substr(0, 4)) {
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= static_cast<unsigned>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= static_cast<unsigned>(c - 'A' + 10);
    }
    return v;
}

}  // namespace

void decode_string(std::string_view raw, std::string& out) {
    for (std::size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c != '\\' || i + 1 >= raw.size()) {
            out += c;
            continue;
        }
        char e = raw[++i];
        switch (e) {
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'n':
                out += '\n';
                break;
            case 'r':
                out += '\r';
                break;
            case 't':
                out += '\t';
                break;
            case 'u': {
                if (i + 5 > raw.size()) return;
                unsigned cp = hex4(raw.substr(i + 1));
                i += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < raw.size() && raw[i + 1] == '\\' &&
                    raw[i + 2] == 'u') {
                    unsigned low = hex4(raw.substr(i + 3));
                    if (low >= 0xDC00 && low < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        i += 6;
                    }
                }
                json_scan::append_utf8(out, cp);
                break;
            }
            default:
                out += e;
                break;  // " \ /
        }
    }
}

void escape_string(std::string_view text, std::string& out) {
    static const char* hex = "0123456789abcdef";
    for (char c : text) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += "\\u00";
                    out += hex[(c >> 4) & 0xF];
                    out += hex[c & 0xF];
                } else {
                    out += c;
                }
        }
    }
}

namespace {

bool same_number(std::string_view a, std::string_view b) {
    if (a == b) return true;
    double x = 0, y = 0;
    auto rx = std::from_chars(a.data(), a.data() + a.size(), x);
    auto ry = std::from_chars(b.data(), b.data() + b.size(), y);
    bool dx = rx.ec == std::errc() && rx.ptr == a.data() + a.size() && std::isfinite(x);
    bool dy = ry.ec == std::errc() && ry.ptr == b.data() + b.size() && std::isfinite(y);
    return dx && dy && x == y;
}

std::string decoded(const Tree& t, std::size_t i) {
    std::string out;
    std::string_view raw = t.raw(i);
    decode_string(raw.substr(1, raw.size() - 2), out);
    return out;
}

// Recursion is bounded: both trees nest at most kMaxDepth containers.
bool same_at(const Tree& a, std::size_t i, const Tree& b, std::size_t j) {
    const Node& x = a.node(i);
    const Node& y = b.node(j);
    if (x.kind != y.kind || x.count != y.count) return false;
    switch (x.kind) {
        case Kind::Null:
        case Kind::True:
        case Kind::False:
            return true;
        case Kind::Number:
            return same_number(a.raw(i), b.raw(j));
        case Kind::String:
            return a.raw(i) == b.raw(j) || decoded(a, i) == decoded(b, j);
        case Kind::Array:
            for (std::size_t p = Tree::first_child(i), q = Tree::first_child(j); p < x.after;
                 p = a.node(p).after, q = b.node(q).after)
                if (!same_at(a, p, b, q)) return false;
            return true;
        case Kind::Object: {
            // Keys of b by name (the last one of a repeated key wins, as most readers take it).
            std::unordered_map<std::string_view, std::size_t> theirs;
            for (std::size_t q = Tree::first_child(j); q < y.after; q = b.node(q).after) theirs[b.key(q)] = q;
            std::unordered_map<std::string_view, std::size_t> ours;
            for (std::size_t p = Tree::first_child(i); p < x.after; p = a.node(p).after) ours[a.key(p)] = p;
            if (ours.size() != theirs.size()) return false;
            for (auto [key, p] : ours) {
                auto it = theirs.find(key);
                if (it == theirs.end() || !same_at(a, p, b, it->second)) return false;
            }
            return true;
        }
    }
    return false;
}

}  // namespace

bool same_value(const Tree& a, std::size_t i, const Tree& b, std::size_t j) { return same_at(a, i, b, j); }

}  // namespace docsync::patch
