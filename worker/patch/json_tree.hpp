#pragma once
// A read-only tree of spans over one JSON text, for the patch core (json_patch.hpp): every node is
// where its value lies in the text, never a converted value. Numbers stay their digits, strings and
// keys their escaped text; a key is also kept decoded (UTF-8), for comparing keys and for JSON
// Pointer paths. Parsing is iterative and refuses nesting deeper than kMaxDepth.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "patch/json_patch.hpp"

namespace docsync::patch {

// Thrown by Tree for a text nesting deeper than kMaxDepth (valid JSON, too deep to patch).
class TooDeep : public Error {
public:
    using Error::Error;
};

enum class Kind : std::uint8_t { Null, False, True, Number, String, Array, Object };

// 32 bytes: offsets are 32-bit (a text is at most 4 GiB; PostgreSQL's json is at most 1 GB).
struct Node {
    Kind kind = Kind::Null;
    std::uint16_t depth = 0;  // containers around this node (the root's is 0)
    std::uint32_t count = 0;  // children (arrays, objects)
    std::uint32_t begin = 0;  // the value's text: [begin, end)
    std::uint32_t end = 0;
    std::uint32_t after = 0;   // the index past this node's subtree: its next sibling's, if any
    std::uint32_t key_at = 0;  // in an object: the key's text between the quotes, as escaped
    std::uint32_t key_size = 0;
    std::uint32_t decoded = 0;  // in an object, when the key has escapes: 1 + its index in decoded_
};

class Tree {
public:
    // Parses one JSON value (white space allowed between tokens). Throws docsync::Error naming
    // `what` and the byte when the text is not JSON, TooDeep when it nests more than `max_depth`
    // arrays and objects (kMaxDepth; a JSON Patch's values sit two levels down).
    Tree(std::string_view text, std::string_view what, std::size_t max_depth = kMaxDepth);
    Tree(const Tree&) = delete;
    Tree& operator=(const Tree&) = delete;

    std::string_view text() const { return text_; }
    const Node& node(std::size_t i) const { return nodes_[i]; }
    std::size_t size() const { return nodes_.size(); }
    std::string_view raw(std::size_t i) const {
        return text_.substr(nodes_[i].begin, nodes_[i].end - nodes_[i].begin);
    }
    // The first child of container i (meaningful only when it has one); the next is node(c).after.
    // In an object: the key's text between the quotes as escaped, and the key decoded.
    std::string_view raw_key(std::size_t i) const {
        return text_.substr(nodes_[i].key_at, nodes_[i].key_size);
    }
    std::string_view key(std::size_t i) const {
        return nodes_[i].decoded ? std::string_view(decoded_[nodes_[i].decoded - 1]) : raw_key(i);
    }
    static std::size_t first_child(std::size_t i) { return i + 1; }
    // The most containers nested inside node i (0 for a scalar, 1 for [1]).
    std::size_t height(std::size_t i) const;
    // Whether the text holds no white space outside strings (raw spans are then compact).
    bool compact() const { return compact_; }
    // Appends node i as compact JSON (its raw span when the text is compact).
    void write(std::size_t i, std::string& out) const;

private:
    std::string_view text_;
    std::vector<Node> nodes_;
    std::vector<std::string> decoded_;  // the keys that have escapes, decoded
    bool compact_ = true;

    friend class TreeParser;
};

// Decodes a JSON string's escaped text (between the quotes) to UTF-8, appending to out. A lone
// surrogate escape becomes its three-byte form. The text must be valid (the parser checked it).
void decode_string(std::string_view raw, std::string& out);

// Appends `text` escaped as PostgreSQL's escape_json writes a string, without the quotes: a quote,
// a backslash, backspace, form feed, newline, carriage return and tab as their two-character
// escapes, other control bytes as \u00xx in lower case, every other byte as it is.
void escape_string(std::string_view text, std::string& out);

// Whether two values are equal as JSON values: numbers by value where both read as finite doubles
// (by text otherwise), strings decoded, objects whatever their key order, arrays item by item.
bool same_value(const Tree& a, std::size_t i, const Tree& b, std::size_t j);

}  // namespace docsync::patch
