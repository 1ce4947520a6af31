// diff(): the patch from one doc text to the next, in both forms, keeping bytes exact
// (docs/internals.md, "Patches").
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "patch/forms.hpp"
#include "patch/json_patch.hpp"
#include "patch/json_tree.hpp"

namespace docsync::patch {

namespace {

bool is_container(Kind k) { return k == Kind::Array || k == Kind::Object; }

// An object's members in order, and whether a key repeats.
struct Members {
    std::vector<std::size_t> nodes;
    std::unordered_map<std::string_view, std::size_t> by_key;  // key -> position in nodes
    bool repeated = false;
};

Members members_of(const Tree& t, std::size_t i) {
    Members m;
    m.nodes.reserve(t.node(i).count);
    m.by_key.reserve(t.node(i).count);
    for (std::size_t c = Tree::first_child(i); c < t.node(i).after; c = t.node(c).after) {
        if (!m.by_key.emplace(t.key(c), m.nodes.size()).second) m.repeated = true;
        m.nodes.push_back(c);
    }
    return m;
}

// How the members of object a (in `from`) line up with those of object b (in `to`): usable when no
// key repeats, the keys both hold keep their order and their escaped text, and every key b adds
// comes after the last one both hold (a patch appends new keys at the end).
struct Alignment {
    bool usable = false;
    std::vector<std::size_t> removed;                         // a's nodes
    std::vector<std::pair<std::size_t, std::size_t>> common;  // (a's node, b's node), in order
    std::vector<std::size_t> added;                           // b's nodes, in order
};

Alignment align(const Tree& a, std::size_t i, const Tree& b, std::size_t j) {
    Alignment al;
    Members ma = members_of(a, i), mb = members_of(b, j);
    if (ma.repeated || mb.repeated) return al;
    std::size_t last_a = 0;
    bool any_common = false;
    for (std::size_t c : mb.nodes) {
        auto it = ma.by_key.find(b.key(c));
        if (it == ma.by_key.end()) {
            al.added.push_back(c);
            continue;
        }
        if (!al.added.empty()) return al;                  // a new key before one both hold
        if (any_common && it->second < last_a) return al;  // reordered
        std::size_t an = ma.nodes[it->second];
        if (a.raw_key(an) != b.raw_key(c)) return al;  // same key, other escapes
        any_common = true;
        last_a = it->second;
        al.common.emplace_back(an, c);
    }
    for (std::size_t c : ma.nodes)
        if (!mb.by_key.count(a.key(c))) al.removed.push_back(c);
    al.usable = true;
    return al;
}

// RFC 6902: add, remove and replace operations, each value copied from `to`'s text.
class JsonPatchWriter {
public:
    JsonPatchWriter(const Tree& a, const Tree& b) : a_(a), b_(b) {}

    // False when no patch reproduces b (an object at the root with a repeated key).
    bool run() {
        if (a_.raw(0) == b_.raw(0)) return true;
        if (a_.node(0).kind == Kind::Object && b_.node(0).kind == Kind::Object &&
            !align(a_, 0, b_, 0).usable) {
            if (members_of(a_, 0).repeated || members_of(b_, 0).repeated) return false;
        }
        // The root's whole replace always fits: no limit above it.
        limit_ = static_cast<std::size_t>(-1);
        value(0, 0);
        return true;
    }
    std::string text() const {
        std::string text;
        text.reserve(out_.size() + 2);
        text += '[';
        if (!out_.empty()) text.append(out_, 1);  // past the first operation's comma
        text += ']';
        return text;
    }

private:
    // Thrown (and caught in value()) when the operations written for a subtree pass its limit.
    struct OverLimit {};

    // Writes the operations that turn a's node i into b's node j. A container's own operations are
    // kept only while they cost less than replacing it whole: each op checks the limit before it is
    // written, so a subtree stops as soon as it passes, however many changes it still holds, and
    // what the writer holds never passes the whole replace of the root (docs/internals.md).
    void value(std::size_t i, std::size_t j) {
        if (a_.raw(i) == b_.raw(j)) return;
        Kind ka = a_.node(i).kind, kb = b_.node(j).kind;
        if (ka != kb || !is_container(ka)) return op("replace", &j);
        std::size_t mark = out_.size();
        std::size_t whole = op_size("replace", j);
        std::size_t outer = limit_, path = path_.size();
        limit_ = std::min(outer, mark + whole);
        bool done = false;
        try {
            done = ka == Kind::Object ? object(i, j) : array(i, j);
        } catch (const OverLimit&) {
            path_.resize(path);
        }
        limit_ = outer;
        if (!done) {
            out_.resize(mark);
            op("replace", &j);  // throws OverLimit when even this passes the limit above
        }
    }

    bool object(std::size_t i, std::size_t j) {
        Alignment al = align(a_, i, b_, j);
        if (!al.usable) return false;
        for (std::size_t c : al.added) {
            std::string escaped;
            escape_string(b_.key(c), escaped);
            if (escaped != b_.raw_key(c)) return false;  // apply would write this key otherwise
        }
        for (std::size_t c : al.removed) {
            std::size_t len = push(a_.key(c));
            op("remove", nullptr);
            pop(len);
        }
        for (auto [p, q] : al.common) {
            std::size_t len = push(a_.key(p));
            value(p, q);
            pop(len);
        }
        for (std::size_t c : al.added) {
            std::size_t len = push(b_.key(c));
            op("add", &c);
            pop(len);
        }
        return true;
    }

    bool array(std::size_t i, std::size_t j) {
        std::vector<std::size_t> xs, ys;
        for (std::size_t c = Tree::first_child(i); c < a_.node(i).after; c = a_.node(c).after)
            xs.push_back(c);
        for (std::size_t c = Tree::first_child(j); c < b_.node(j).after; c = b_.node(c).after)
            ys.push_back(c);
        std::size_t head = 0;
        while (head < xs.size() && head < ys.size() && a_.raw(xs[head]) == b_.raw(ys[head])) ++head;
        std::size_t tail = 0;
        while (tail < xs.size() - head && tail < ys.size() - head &&
               a_.raw(xs[xs.size() - 1 - tail]) == b_.raw(ys[ys.size() - 1 - tail]))
            ++tail;
        std::size_t na = xs.size() - head - tail, nb = ys.size() - head - tail;
        if (na == nb) {
            for (std::size_t k = 0; k < na; ++k) {
                std::size_t len = push(std::to_string(head + k));
                value(xs[head + k], ys[head + k]);
                pop(len);
            }
            return true;
        }
        for (std::size_t k = na; k-- > 0;) {
            std::size_t len = push(std::to_string(head + k));
            op("remove", nullptr);
            pop(len);
        }
        for (std::size_t k = 0; k < nb; ++k) {
            std::size_t len = push(std::to_string(head + k));
            op("add", &ys[head + k]);
            pop(len);
        }
        return true;
    }

    // Appends a reference token to the path, which is kept escaped as it is written in an op (JSON
    // Pointer's ~0 and ~1, then a JSON string's escapes, both byte by byte); returns the length to
    // pop back to.
    std::size_t push(std::string_view token) {
        std::size_t len = path_.size();
        path_ += '/';
        for (char c : token) {
            if (c == '~')
                path_ += "~0";
            else if (c == '/')
                path_ += "~1";
            else
                escape_string(std::string_view(&c, 1), path_);
        }
        return len;
    }
    void pop(std::size_t len) { path_.resize(len); }

    // Appends one operation, or throws OverLimit when it would take the operations past limit_.
    void op(const char* name, const std::size_t* value) {
        std::size_t size =
            value ? op_size(name, *value) : kOpBytes + std::char_traits<char>::length(name) + path_.size();
        if (size > limit_ || out_.size() > limit_ - size) throw OverLimit{};
        out_ += ",{\"op\":\"";
        out_ += name;
        out_ += "\",\"path\":\"";
        out_ += path_;
        out_ += '"';
        if (value) {
            out_ += ",\"value\":";
            b_.write(*value, out_);
        }
        out_ += '}';
    }
    // The bytes op(name, &value) writes: the punctuation, the name, the path, the value.
    std::size_t op_size(const char* name, std::size_t value) const {
        std::size_t size = kOpBytes + std::char_traits<char>::length(name) + path_.size() + 9;
        if (b_.compact()) return size + b_.raw(value).size();
        std::string text;
        b_.write(value, text);
        return size + text.size();
    }
    // ,{"op":"","path":""}
    static constexpr std::size_t kOpBytes = 20;

    const Tree& a_;
    const Tree& b_;
    std::string path_;       // escaped
    std::string out_;        // operations, each after a comma
    std::size_t limit_ = 0;  // the size out_ may reach
};

// Whether setting `to`'s value j through a merge patch gives its text back: not null, and when an
// object, rebuilt member by member from the patch, so none of its members (through objects) may be
// null and no key may repeat.
bool settable(const Tree& b, std::size_t j) {
    const Node& n = b.node(j);
    if (n.kind == Kind::Null) return false;
    if (n.kind != Kind::Object) return true;
    std::vector<std::size_t> todo{j};
    while (!todo.empty()) {
        std::size_t o = todo.back();
        todo.pop_back();
        Members m = members_of(b, o);
        if (m.repeated) return false;
        for (std::size_t c : m.nodes) {
            if (b.node(c).kind == Kind::Null) return false;
            if (b.node(c).kind == Kind::Object) todo.push_back(c);
        }
    }
    return true;
}

// RFC 7386: members set (copied from `to`'s text) or removed (null); arrays replaced whole.
class MergePatchWriter {
public:
    MergePatchWriter(const Tree& a, const Tree& b) : a_(a), b_(b) {}

    // False when no merge patch reproduces b byte for byte.
    bool run() {
        if (b_.node(0).kind != Kind::Object) return false;
        if (a_.node(0).kind != Kind::Object) {
            if (!settable(b_, 0)) return false;
            b_.write(0, out_);
            return true;
        }
        return object(0, 0);
    }
    const std::string& text() const { return out_; }

private:
    // Recursion is bounded: both trees nest at most kMaxDepth containers.
    bool object(std::size_t i, std::size_t j) {
        Alignment al = align(a_, i, b_, j);
        if (!al.usable) return false;
        out_ += '{';
        bool first = true;
        auto key = [&](const Tree& t, std::size_t c) {
            if (!first) out_ += ',';
            first = false;
            out_ += '"';
            out_.append(t.raw_key(c));
            out_ += "\":";
        };
        for (std::size_t c : al.removed) {
            key(a_, c);
            out_ += "null";
        }
        for (auto [p, q] : al.common) {
            if (a_.raw(p) == b_.raw(q)) continue;
            key(b_, q);
            if (a_.node(p).kind == Kind::Object && b_.node(q).kind == Kind::Object) {
                if (!object(p, q)) return false;
            } else {
                if (!settable(b_, q)) return false;
                b_.write(q, out_);
            }
        }
        for (std::size_t c : al.added) {
            if (!settable(b_, c)) return false;
            key(b_, c);
            b_.write(c, out_);
        }
        out_ += '}';
        return true;
    }

    const Tree& a_;
    const Tree& b_;
    std::string out_;
};

}  // namespace

std::optional<std::string> json_patch_between(const Tree& from, const Tree& to) {
    JsonPatchWriter json(from, to);
    if (!json.run()) return std::nullopt;
    return json.text();
}

std::optional<std::string> merge_patch_between(const Tree& from, const Tree& to) {
    MergePatchWriter merge(from, to);
    if (!merge.run()) return std::nullopt;
    return merge.text();
}

std::optional<Patch> diff(std::string_view from, std::string_view to) {
    std::optional<Tree> a, b;
    bool too_deep = false;
    try {
        a.emplace(from, "the old doc");
    } catch (const TooDeep&) {
        too_deep = true;
    }
    try {
        b.emplace(to, "the new doc");
    } catch (const TooDeep&) {
        too_deep = true;
    }
    if (too_deep || from == to) return std::nullopt;
    std::optional<std::string> json = json_patch_between(*a, *b);
    if (!json) return std::nullopt;
    Patch best{Form::JsonPatch, std::move(*json)};
    std::optional<std::string> merge = merge_patch_between(*a, *b);
    if (merge && merge->size() < best.text.size()) best = Patch{Form::MergePatch, std::move(*merge)};
    return best;
}

}  // namespace docsync::patch
