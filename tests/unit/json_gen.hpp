#pragma once
// Random JSON docs and random edits of them, for the patch core's property test
// (json_patch_test.cpp) and its test-vector tool (patch_vectors.cpp). Deterministic for a seed.
//
// Docs are compact JSON as the worker publishes them: nested objects and arrays; strings and keys
// with escapes (\u00e9, the surrogate pair \ud83d\ude00, \", \\, \n, \/, \u001F), raw UTF-8, empty
// keys and keys holding '/' and '~'; numbers at the edges (-0, 0.0, 1.50, 1e400, -1E-400, a 30-digit
// integer, 2^53+1). Edits set, insert (in the middle too), delete, rename and reorder keys; insert,
// delete, move and reorder array items; change a value's type; replace a subtree or the whole doc.

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace docsync::testing {

struct JsonValue {
    enum class Kind { Scalar, Array, Object };
    Kind kind = Kind::Scalar;
    std::string scalar;  // a scalar's JSON text
    // An object's member: its key text as escaped (no quotes), and its value. Defined below, where
    // JsonValue is complete (a std::pair of it here would need it complete).
    struct Member;
    std::vector<Member> members;
    std::vector<JsonValue> items;

    void write(std::string& out) const;
    std::string text() const {
        std::string out;
        write(out);
        return out;
    }
};

struct JsonValue::Member {
    std::string first;
    JsonValue second;
};

inline void JsonValue::write(std::string& out) const {
    if (kind == Kind::Scalar) {
        out += scalar;
        return;
    }
    bool first = true;
    out += kind == Kind::Object ? '{' : '[';
    if (kind == Kind::Object) {
        for (const auto& [key, value] : members) {
            if (!first) out += ',';
            first = false;
            out += '"';
            out += key;
            out += "\":";
            value.write(out);
        }
    } else {
        for (const JsonValue& item : items) {
            if (!first) out += ',';
            first = false;
            item.write(out);
        }
    }
    out += kind == Kind::Object ? '}' : ']';
}

struct JsonGenOptions {
    // Only numbers a double reads without overflow or a lost digit of an integer (no 1e400, no
    // 30-digit integers, no 2^53+1, no -0), and no key twice in an object: for comparing parsed
    // values with another implementation.
    bool ordinary = false;
    std::size_t max_depth = 4;
    std::size_t max_width = 6;
};

class JsonGen {
public:
    explicit JsonGen(std::uint64_t seed, JsonGenOptions options = {}) : rng_(seed), options_(options) {}

    // A random doc: an object at the root (as most docs are), sometimes an array.
    JsonValue doc() {
        JsonValue v = container(chance(10) ? JsonValue::Kind::Array : JsonValue::Kind::Object, 0);
        return v;
    }

    // One to three random edits of `doc`, in place.
    void edit(JsonValue& doc) {
        std::size_t n = 1 + pick(chance(4) ? 3 : 1);
        for (std::size_t k = 0; k < n; ++k) edit_once(doc);
    }

    // Whether an object anywhere in `v` holds a key twice (decoded).
    static bool repeats_key(const JsonValue& v, bool root_only = false) {
        if (v.kind == JsonValue::Kind::Object) {
            std::vector<std::string> keys;
            for (const auto& m : v.members) keys.push_back(decoded_key(m.first));
            std::sort(keys.begin(), keys.end());
            if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) return true;
        }
        if (root_only) return false;
        for (const auto& m : v.members)
            if (repeats_key(m.second)) return true;
        for (const auto& item : v.items)
            if (repeats_key(item)) return true;
        return false;
    }

    std::mt19937_64& rng() { return rng_; }

private:
    // Keys as escaped text, with their decoded form (what makes two keys the same key).
    struct Key {
        const char* text;
        const char* decoded;
    };
    static constexpr Key kKeys[] = {
        {"id", "id"},
        {"name", "name"},
        {"score", "score"},
        {"items", "items"},
        {"", ""},
        {"a/b", "a/b"},
        {"~", "~"},
        {"m~0~1", "m~0~1"},
        {"\\u00e9t\\u00e9", "\xc3\xa9t\xc3\xa9"},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"q\\\"t", "q\"t"},
        {"line\\n", "line\n"},
        {"\\u001F", "\x1f"},
        {"\\u0001", "\x01"},
        {"sl\\/sh", "sl/sh"},
        {"\\\\", "\\"},
        {"\\ud83d\\ude00", "\xf0\x9f\x98\x80"},
        {"\xf0\x9f\x98\x80!", "\xf0\x9f\x98\x80!"},
        {"tab\\t", "tab\t"},
        {" ", " "},
        // Other spellings of keys above: the same key to a reader, other text.
        {"\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9"},
        {"sl/sh", "sl/sh"},
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
        {"\\u0069d", "id"},
    };
    static std::string decoded_key(const std::string& text) {
        for (const Key& k : kKeys)
            if (text == k.text) return k.decoded;
        return text;  // generated keys k<n> need no decoding
    }

    std::size_t pick(std::size_t n) {
        return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
    }
    bool chance(std::size_t one_in) { return pick(one_in) == 0; }

    std::string number() {
        static const char* edges[] = {
            "-0", "0.0", "1.50",   "1e400", "-1E-400", "123456789012345678901234567890", "9007199254740993",
            "0",  "-1",  "2.5e-3", "1E+2",  "-0.0"};
        static const char* plain[] = {"0", "-1", "1.50", "9007199254740991", "0.0", "2.5e-3", "1E+2", "42"};
        if (chance(3)) {
            return options_.ordinary ? plain[pick(std::size(plain))] : edges[pick(std::size(edges))];
        }
        std::int64_t v = static_cast<std::int64_t>(pick(2000001)) - 1000000;
        if (chance(3)) return std::to_string(v) + "." + std::to_string(pick(100));
        return std::to_string(v);
    }
    std::string string() {
        static const char* pieces[] = {"abc",
                                       "\\u00e9",
                                       "\\ud83d\\ude00",
                                       "\xc3\xa9",
                                       "\xf0\x9f\x98\x80",
                                       "\\\"",
                                       "\\\\",
                                       "\\n",
                                       "\\/",
                                       "\\u0001",
                                       "~",
                                       "/",
                                       " ",
                                       "x",
                                       "Z9",
                                       "\\t",
                                       "\\u00E9",
                                       "\xe4\xb8\xad"};
        std::string s = "\"";
        for (std::size_t n = pick(5); n > 0; --n) s += pieces[pick(std::size(pieces))];
        return s + "\"";
    }
    JsonValue scalar() {
        JsonValue v;
        switch (pick(6)) {
            case 0:
            case 1:
                v.scalar = number();
                break;
            case 2:
            case 3:
                v.scalar = string();
                break;
            case 4:
                v.scalar = chance(2) ? "true" : "false";
                break;
            default:
                v.scalar = "null";
                break;
        }
        return v;
    }
    JsonValue value(std::size_t depth) {
        if (depth >= options_.max_depth || chance(2)) return scalar();
        return container(chance(2) ? JsonValue::Kind::Array : JsonValue::Kind::Object, depth);
    }
    JsonValue container(JsonValue::Kind kind, std::size_t depth) {
        JsonValue v;
        v.kind = kind;
        std::size_t n = pick(options_.max_width + 1);
        for (std::size_t k = 0; k < n; ++k) {
            if (kind == JsonValue::Kind::Array)
                v.items.push_back(value(depth + 1));
            else
                v.members.push_back({new_key(v), value(depth + 1)});
        }
        return v;
    }
    // A key `object` does not hold yet.
    std::string new_key(const JsonValue& object) {
        for (;;) {
            std::string key = chance(2) ? kKeys[pick(std::size(kKeys))].text : "k" + std::to_string(pick(50));
            bool taken = std::any_of(object.members.begin(), object.members.end(),
                                     [&](const auto& m) { return decoded_key(m.first) == decoded_key(key); });
            if (!taken) return key;
        }
    }

    // Another text of the same key, or "" when the pool has none.
    static std::string respelt(const std::string& text) {
        std::string decoded = decoded_key(text);
        for (const Key& k : kKeys)
            if (k.decoded == decoded && k.text != text) return k.text;
        return {};
    }

    void containers(JsonValue& v, std::vector<JsonValue*>& out) {
        if (v.kind == JsonValue::Kind::Scalar) return;
        out.push_back(&v);
        for (auto& m : v.members) containers(m.second, out);
        for (auto& item : v.items) containers(item, out);
    }

    void edit_once(JsonValue& doc) {
        if (chance(60)) {
            doc = this->doc();  // a whole new doc
            return;
        }
        std::vector<JsonValue*> all;
        containers(doc, all);
        JsonValue& c = *all[pick(all.size())];
        std::size_t depth = 2;  // keeps inserted subtrees small
        if (c.kind == JsonValue::Kind::Object) {
            auto& ms = c.members;
            switch (pick(9)) {
                case 0:
                case 1:  // set a member (often a small change of a scalar)
                    if (!ms.empty()) ms[pick(ms.size())].second = chance(3) ? value(depth) : scalar();
                    break;
                case 2:  // a new key at the end
                    ms.push_back({new_key(c), value(depth)});
                    break;
                case 3:  // a new key anywhere
                    ms.insert(ms.begin() + static_cast<std::ptrdiff_t>(pick(ms.size() + 1)),
                              JsonValue::Member{new_key(c), value(depth)});
                    break;
                case 4:  // delete a key
                    if (!ms.empty()) ms.erase(ms.begin() + static_cast<std::ptrdiff_t>(pick(ms.size())));
                    break;
                case 5:  // reorder
                    if (ms.size() > 1) std::swap(ms[pick(ms.size())], ms[pick(ms.size())]);
                    break;
                case 6:  // rename a key, or spell it another way
                    if (!ms.empty()) {
                        std::string& key = ms[pick(ms.size())].first;
                        std::string other = respelt(key);
                        key = (chance(2) && !other.empty()) ? other : new_key(c);
                    }
                    break;
                case 7:  // a key twice (rare: an object no patch can address)
                    if (!options_.ordinary && !ms.empty() && chance(8)) {
                        std::string key = ms[pick(ms.size())].first;
                        ms.push_back({std::move(key), scalar()});
                    } else if (!ms.empty()) {
                        ms[pick(ms.size())].second = scalar();
                    }
                    break;
                default:  // the object becomes an array
                    if (chance(3))
                        c = container(JsonValue::Kind::Array, depth);
                    else if (!ms.empty())
                        ms[pick(ms.size())].second = value(depth);
                    break;
            }
            return;
        }
        auto& xs = c.items;
        switch (pick(8)) {
            case 0:
            case 1:  // set an item
                if (!xs.empty()) xs[pick(xs.size())] = chance(3) ? value(depth) : scalar();
                break;
            case 2:  // insert
                xs.insert(xs.begin() + static_cast<std::ptrdiff_t>(pick(xs.size() + 1)), value(depth));
                break;
            case 3:  // delete
                if (!xs.empty()) xs.erase(xs.begin() + static_cast<std::ptrdiff_t>(pick(xs.size())));
                break;
            case 4:  // move one item
                if (xs.size() > 1) {
                    std::size_t from = pick(xs.size());
                    JsonValue moved = xs[from];
                    xs.erase(xs.begin() + static_cast<std::ptrdiff_t>(from));
                    xs.insert(xs.begin() + static_cast<std::ptrdiff_t>(pick(xs.size() + 1)),
                              std::move(moved));
                }
                break;
            case 5:  // reorder all
                std::shuffle(xs.begin(), xs.end(), rng_);
                break;
            case 6:  // append several
                for (std::size_t n = 1 + pick(3); n > 0; --n) xs.push_back(value(depth));
                break;
            default:  // the array becomes an object
                if (chance(3))
                    c = container(JsonValue::Kind::Object, depth);
                else if (!xs.empty())
                    xs.erase(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(pick(xs.size()) + 1));
                break;
        }
    }

    std::mt19937_64 rng_;
    JsonGenOptions options_;
};

}  // namespace docsync::testing
