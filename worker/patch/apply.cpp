// apply(): a JSON Patch or merge patch applied to a doc's text. The doc becomes a tree that is
// expanded only along the paths the patch touches; everything else is written back as the span of
// text it came from, so untouched parts keep their bytes.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "patch/json_patch.hpp"
#include "patch/json_tree.hpp"

namespace docsync::patch {

namespace {

struct Value;
using ValuePtr = std::unique_ptr<Value>;

struct Member {
    std::string raw_key;  // as written between the quotes
    std::string key;      // decoded
    ValuePtr value;
};

// A value of the doc being patched: a span of a parsed text (the base's or the patch's) until an
// operation needs its members or items, then those.
struct Value {
    const Tree* tree = nullptr;
    std::size_t index = 0;
    Kind kind = Kind::Null;
    bool expanded = false;
    std::vector<Member> members;
    std::vector<ValuePtr> items;
};

ValuePtr span(const Tree& tree, std::size_t index) {
    auto v = std::make_unique<Value>();
    v->tree = &tree;
    v->index = index;
    v->kind = tree.node(index).kind;
    return v;
}

void expand(Value& v) {
    if (v.expanded || (v.kind != Kind::Array && v.kind != Kind::Object)) return;
    const Tree& t = *v.tree;
    const Node& n = t.node(v.index);
    for (std::size_t c = Tree::first_child(v.index); c < n.after; c = t.node(c).after) {
        if (v.kind == Kind::Object)
            v.members.push_back(Member{std::string(t.raw_key(c)), std::string(t.key(c)), span(t, c)});
        else
            v.items.push_back(span(t, c));
    }
    v.expanded = true;
}

// Recursion in the three walks below is bounded: a patched doc never nests deeper than kMaxDepth.
void write(const Value& v, std::string& out) {
    if (!v.expanded) {
        if (v.tree) v.tree->write(v.index, out);
        else out += v.kind == Kind::Object ? "{}" : "[]";
        return;
    }
    bool first = true;
    if (v.kind == Kind::Object) {
        out += '{';
        for (const Member& m : v.members) {
            if (!first) out += ',';
            first = false;
            out += '"';
            out += m.raw_key;
            out += "\":";
            write(*m.value, out);
        }
        out += '}';
    } else {
        out += '[';
        for (const ValuePtr& item : v.items) {
            if (!first) out += ',';
            first = false;
            write(*item, out);
        }
        out += ']';
    }
}

std::size_t height(const Value& v) {
    if (!v.expanded) return v.tree ? v.tree->height(v.index) : (v.kind == Kind::Array || v.kind == Kind::Object);
    std::size_t most = 0;
    for (const Member& m : v.members) most = std::max(most, height(*m.value));
    for (const ValuePtr& item : v.items) most = std::max(most, height(*item));
    return most + 1;
}

ValuePtr clone(const Value& v) {
    auto c = std::make_unique<Value>();
    c->tree = v.tree;
    c->index = v.index;
    c->kind = v.kind;
    c->expanded = v.expanded;
    for (const Member& m : v.members) c->members.push_back(Member{m.raw_key, m.key, clone(*m.value)});
    for (const ValuePtr& item : v.items) c->items.push_back(clone(*item));
    return c;
}

ValuePtr empty_object() {
    auto v = std::make_unique<Value>();
    v->kind = Kind::Object;
    v->expanded = true;
    return v;
}

// The last member named `key` (a repeated key reads as its last value).
Member* find_member(Value& object, std::string_view key) {
    for (auto it = object.members.rbegin(); it != object.members.rend(); ++it)
        if (it->key == key) return &*it;
    return nullptr;
}

class JsonPatchApplier {
public:
    JsonPatchApplier(std::unique_ptr<Tree> base, std::string_view patch_text)
        : base_(std::move(base)), patch_(patch_text, "the JSON Patch", kMaxDepth + 2), root_(span(*base_, 0)) {}

    std::string run() {
        if (patch_.node(0).kind != Kind::Array) throw Error("the JSON Patch is not an array of operations");
        std::size_t n = 0;
        for (std::size_t c = Tree::first_child(0); c < patch_.node(0).after; c = patch_.node(c).after, ++n)
            operation(n, c);
        std::string out;
        out.reserve(base_->text().size() + patch_.text().size());
        write(*root_, out);
        return out;
    }

private:
    struct Where {
        Value* parent = nullptr;  // null for the root
        std::string token;        // the last reference token
    };

    [[noreturn]] void fail(const std::string& why) const {
        throw Error("JSON Patch operation " + std::to_string(index_) + " (" + op_ + " " + quoted(path_) +
                    ") does not apply: " + why);
    }
    static std::string quoted(std::string_view s) {
        std::string out = "\"";
        escape_string(s, out);
        return out + "\"";
    }

    // The string member `name` of operation node c, decoded; nullopt when absent.
    std::optional<std::string> string_member(std::size_t c, std::string_view name) {
        std::optional<std::size_t> at = member(c, name);
        if (!at) return std::nullopt;
        if (patch_.node(*at).kind != Kind::String) fail("its \"" + std::string(name) + "\" is not a string");
        std::string out;
        std::string_view raw = patch_.raw(*at);
        decode_string(raw.substr(1, raw.size() - 2), out);
        return out;
    }
    std::optional<std::size_t> member(std::size_t c, std::string_view name) {
        std::optional<std::size_t> found;
        for (std::size_t m = Tree::first_child(c); m < patch_.node(c).after; m = patch_.node(m).after)
            if (patch_.key(m) == name) found = m;
        return found;
    }

    void operation(std::size_t n, std::size_t c) {
        index_ = n;
        op_.assign(1, '?');  // until the operation's "op" is read
        path_.clear();
        if (patch_.node(c).kind != Kind::Object) fail("an operation must be an object");
        std::optional<std::string> path = string_member(c, "path");
        std::optional<std::string> op = string_member(c, "op");
        if (path) path_ = *path;
        if (op) op_ = *op;
        if (!op) fail("it has no \"op\"");
        if (!path) fail("it has no \"path\"");
        std::vector<std::string> tokens = parse_pointer(path_);
        if (op_ == "add" || op_ == "replace" || op_ == "test") {
            std::optional<std::size_t> value = member(c, "value");
            if (!value) fail("it has no \"value\"");
            if (op_ == "add") return add(tokens, span(patch_, *value));
            if (op_ == "replace") return replace(tokens, span(patch_, *value));
            return test(tokens, *value);
        }
        if (op_ == "remove") return (void)take(tokens);
        if (op_ == "move" || op_ == "copy") {
            std::optional<std::string> from = string_member(c, "from");
            if (!from) fail("it has no \"from\"");
            std::vector<std::string> source = parse_pointer(*from);
            if (op_ == "copy") return add(tokens, clone(*resolve(source, *from)));
            if (*from == path_) {
                resolve(source, *from);
                return;
            }
            if (tokens.size() > source.size() && std::equal(source.begin(), source.end(), tokens.begin()))
                fail("\"from\" " + quoted(*from) + " is a parent of the path");
            return add(tokens, take(source, *from));
        }
        fail("unknown operation");
    }

    std::vector<std::string> parse_pointer(std::string_view pointer) {
        std::vector<std::string> tokens;
        if (pointer.empty()) return tokens;
        if (pointer[0] != '/') fail("the JSON Pointer " + quoted(pointer) + " does not start with '/'");
        for (std::size_t i = 1;; ++i) {
            std::string token;
            for (; i < pointer.size() && pointer[i] != '/'; ++i) {
                if (pointer[i] != '~') {
                    token += pointer[i];
                } else if (i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
                    token += pointer[++i] == '0' ? '~' : '/';
                } else {
                    fail("the JSON Pointer " + quoted(pointer) + " has a '~' not followed by 0 or 1");
                }
            }
            tokens.push_back(std::move(token));
            if (tokens.size() > kMaxDepth) fail("the path is deeper than the doc may nest");
            if (i >= pointer.size()) return tokens;
        }
    }

    // The index a token names in an array of `size` items (`end_ok`: the size itself, or "-").
    std::size_t array_index(const std::string& token, std::size_t size, bool end_ok, std::string_view pointer) {
        if (token == "-" && end_ok) return size;
        bool digits = !token.empty() && token.size() <= 18 &&
                      std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                      (token.size() == 1 || token[0] != '0');
        if (!digits) fail(quoted(pointer) + ": \"" + token + "\" is not an array index");
        std::size_t k = std::stoull(token);
        if (k > size || (k == size && !end_ok))
            fail(quoted(pointer) + ": index " + token + " is past the array's end (" + std::to_string(size) + " items)");
        return k;
    }

    // The value a pointer names; fails when it does not exist.
    Value* resolve(const std::vector<std::string>& tokens, std::string_view pointer, std::size_t count) {
        Value* v = root_.get();
        for (std::size_t t = 0; t < count; ++t) {
            expand(*v);
            if (v->kind == Kind::Object) {
                Member* m = find_member(*v, tokens[t]);
                if (!m) fail(quoted(pointer) + " does not exist (no member " + quoted(tokens[t]) + ")");
                v = m->value.get();
            } else if (v->kind == Kind::Array) {
                v = v->items[array_index(tokens[t], v->items.size(), false, pointer)].get();
            } else {
                fail(quoted(pointer) + " does not exist (" + quoted(tokens[t]) + " is below a scalar)");
            }
        }
        return v;
    }
    Value* resolve(const std::vector<std::string>& tokens, std::string_view pointer) {
        return resolve(tokens, pointer, tokens.size());
    }
    Value* resolve(const std::vector<std::string>& tokens) { return resolve(tokens, path_); }

    Value* container(const std::vector<std::string>& tokens, std::string_view pointer) {
        Value* parent = resolve(tokens, pointer, tokens.size() - 1);
        if (parent->kind != Kind::Array && parent->kind != Kind::Object)
            fail(quoted(pointer) + " does not exist (its parent is not an array or object)");
        expand(*parent);
        return parent;
    }

    void check_depth(const std::vector<std::string>& tokens, const Value& value) {
        if (tokens.size() + height(value) > kMaxDepth)
            fail("the doc would nest deeper than " + std::to_string(kMaxDepth) + " arrays and objects");
    }

    void add(const std::vector<std::string>& tokens, ValuePtr value) {
        check_depth(tokens, *value);
        if (tokens.empty()) {
            root_ = std::move(value);
            return;
        }
        Value* parent = container(tokens, path_);
        const std::string& last = tokens.back();
        if (parent->kind == Kind::Object) {
            if (Member* m = find_member(*parent, last)) {
                m->value = std::move(value);
                return;
            }
            std::string raw;
            escape_string(last, raw);
            parent->members.push_back(Member{std::move(raw), last, std::move(value)});
            return;
        }
        std::size_t k = array_index(last, parent->items.size(), true, path_);
        parent->items.insert(parent->items.begin() + static_cast<std::ptrdiff_t>(k), std::move(value));
    }

    void replace(const std::vector<std::string>& tokens, ValuePtr value) {
        check_depth(tokens, *value);
        if (tokens.empty()) {
            root_ = std::move(value);
            return;
        }
        Value* parent = container(tokens, path_);
        if (parent->kind == Kind::Object) {
            Member* m = find_member(*parent, tokens.back());
            if (!m) fail(quoted(path_) + " does not exist");
            m->value = std::move(value);
            return;
        }
        parent->items[array_index(tokens.back(), parent->items.size(), false, path_)] = std::move(value);
    }

    // Removes the value a pointer names and returns it.
    ValuePtr take(const std::vector<std::string>& tokens, std::string_view pointer) {
        if (tokens.empty()) fail("the whole doc cannot be removed");
        Value* parent = container(tokens, pointer);
        if (parent->kind == Kind::Object) {
            Member* m = find_member(*parent, tokens.back());
            if (!m) fail(quoted(pointer) + " does not exist");
            ValuePtr value = std::move(m->value);
            std::erase_if(parent->members, [&](const Member& x) { return x.key == tokens.back(); });
            return value;
        }
        std::size_t k = array_index(tokens.back(), parent->items.size(), false, pointer);
        ValuePtr value = std::move(parent->items[k]);
        parent->items.erase(parent->items.begin() + static_cast<std::ptrdiff_t>(k));
        return value;
    }
    ValuePtr take(const std::vector<std::string>& tokens) { return take(tokens, path_); }

    void test(const std::vector<std::string>& tokens, std::size_t expected) {
        std::string text;
        write(*resolve(tokens), text);
        Tree actual(text, "the tested value");
        if (!same_value(actual, 0, patch_, expected)) {
            std::string want;
            patch_.write(expected, want);
            if (want.size() > 200) want = want.substr(0, 200) + "…";
            fail("the value there is not " + want);
        }
    }

    std::unique_ptr<Tree> base_;
    Tree patch_;
    ValuePtr root_;
    std::size_t index_ = 0;
    std::string op_;
    std::string path_;
};

// RFC 7386, section 2. New members keep the patch's key text (the doc's own keys stay as they are).
void merge(ValuePtr& target, const Tree& patch, std::size_t p) {
    if (patch.node(p).kind != Kind::Object) {
        target = span(patch, p);
        return;
    }
    if (!target || target->kind != Kind::Object) target = empty_object();
    expand(*target);
    for (std::size_t c = Tree::first_child(p); c < patch.node(p).after; c = patch.node(c).after) {
        const Node& n = patch.node(c);
        if (n.kind == Kind::Null) {
            std::erase_if(target->members, [&](const Member& m) { return m.key == patch.key(c); });
            continue;
        }
        Member* m = find_member(*target, patch.key(c));
        if (!m) {
            target->members.push_back(Member{std::string(patch.raw_key(c)), std::string(patch.key(c)), nullptr});
            m = &target->members.back();
        }
        merge(m->value, patch, c);
    }
}

}  // namespace

std::string apply(std::string_view base, const Patch& patch) {
    auto tree = std::make_unique<Tree>(base, "the base doc");
    if (patch.form == Form::JsonPatch) return JsonPatchApplier(std::move(tree), patch.text).run();
    Tree merge_patch(patch.text, "the merge patch");
    ValuePtr root = span(*tree, 0);
    merge(root, merge_patch, 0);
    std::string out;
    write(*root, out);
    return out;
}

}  // namespace docsync::patch
