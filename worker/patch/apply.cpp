// apply(): a JSON Patch or merge patch applied to a doc's text. The doc becomes a tree that is
// expanded only along the paths the patch touches; everything else is written back as the span of
// text it came from, so untouched parts keep their bytes.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
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
    ValuePtr value;       // null once the member is removed (its place is kept: see Value)
};

// A value of the doc being patched: a span of a parsed text (the base's or the patch's) until an
// operation needs its members or items, then those. An object's removed members stay in place with
// no value, and a large object gets an index by key (below), so that a patch of n operations on an
// object of m members costs about n + m, not n * m.
struct Value {
    const Tree* tree = nullptr;
    std::size_t index = 0;
    Kind kind = Kind::Null;
    bool expanded = false;
    std::vector<Member> members;
    std::vector<ValuePtr> items;
    std::unordered_map<std::string, std::size_t> by_key;  // decoded key -> its last member (when indexed)
    bool indexed = false;
    bool repeats = false;       // a key occurs twice (found when indexing)
    std::uint32_t lookups = 0;  // by key, before the index was built
};

// An object is indexed at its kIndexAfter-th lookup by key, when it has more than kIndexFrom members:
// a patch that changes one member of a large object scans it, one that changes many indexes it.
constexpr std::size_t kIndexFrom = 16;
constexpr std::uint32_t kIndexAfter = 4;

// The work one patch may make apply do, in steps (a node walked, an array item shifted, a member
// scanned): 16 per byte of the base and the patch, and a million more. Whatever the patch asks, apply
// then costs time in proportion to the texts' size, so a small hostile patch (thousands of moves of a
// large subtree, removals at the front of a long array) cannot hold its caller (the gateway's hub
// thread) for seconds; diff's own patches stay far below it.
class Work {
public:
    explicit Work(std::size_t bytes) : left_(16 * bytes + (std::size_t{1} << 20)) {}
    // Takes `steps`; throws Spent once the work allowed is used up.
    struct Spent {};
    void spend(std::size_t steps) {
        if (steps > left_) throw Spent{};
        left_ -= steps;
    }

private:
    std::size_t left_;
};
constexpr const char* kSpent =
    "applying it would take more work than its size and its base's allow (a patch no diff makes: "
    "thousands of operations on one large value)";

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
        if (v.tree)
            v.tree->write(v.index, out);
        else
            out += v.kind == Kind::Object ? "{}" : "[]";
        return;
    }
    bool first = true;
    if (v.kind == Kind::Object) {
        out += '{';
        for (const Member& m : v.members) {
            if (!m.value) continue;
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

// Walks every node below v: each one is a step of `work`.
std::size_t height(const Value& v, Work& work) {
    if (!v.expanded) {
        if (!v.tree) return v.kind == Kind::Array || v.kind == Kind::Object;
        work.spend(v.tree->node(v.index).after - v.index);
        return v.tree->height(v.index);
    }
    work.spend(1 + v.members.size() + v.items.size());
    std::size_t most = 0;
    for (const Member& m : v.members)
        if (m.value) most = std::max(most, height(*m.value, work));
    for (const ValuePtr& item : v.items) most = std::max(most, height(*item, work));
    return most + 1;
}

// Takes the size of v's text (at most: a span's text may hold white space) from `budget`; false,
// without walking further, once the budget is spent.
bool take_size(const Value& v, std::size_t& budget) {
    std::size_t own = 2;  // brackets (a scalar's span is counted below instead)
    if (!v.expanded) own = v.tree ? v.tree->raw(v.index).size() : 2;
    if (own > budget) return false;
    budget -= own;
    for (const Member& m : v.members) {
        if (!m.value) continue;
        std::size_t key = m.raw_key.size() + 4;  // quotes, colon, comma
        if (key > budget) return false;
        budget -= key;
        if (!take_size(*m.value, budget)) return false;
    }
    for (const ValuePtr& item : v.items)
        if (budget == 0 || !take_size(*item, --budget)) return false;
    return true;
}

// Whether v equals value j of `tree` as JSON values (json_tree.hpp's same_value), without writing v
// out: a `test` costs about the size of its own value, whatever the size of what it tests.
bool same(const Value& v, const Tree& tree, std::size_t j) {
    if (!v.expanded && v.tree) return same_value(*v.tree, v.index, tree, j);
    const Node& n = tree.node(j);
    if (v.kind != n.kind) return false;
    if (v.kind == Kind::Array) {
        if (v.items.size() != n.count) return false;
        std::size_t c = Tree::first_child(j);
        for (const ValuePtr& item : v.items) {
            if (!same(*item, tree, c)) return false;
            c = tree.node(c).after;
        }
        return true;
    }
    // Objects: by key, the last of a repeated key counting, in any order.
    std::unordered_map<std::string_view, std::size_t> theirs;
    for (std::size_t c = Tree::first_child(j); c < n.after; c = tree.node(c).after) theirs[tree.key(c)] = c;
    std::unordered_map<std::string_view, const Value*> ours;
    for (const Member& m : v.members)
        if (m.value) ours[m.key] = m.value.get();
    if (ours.size() != theirs.size()) return false;
    for (auto [key, value] : ours) {
        auto it = theirs.find(key);
        if (it == theirs.end() || !same(*value, tree, it->second)) return false;
    }
    return true;
}

ValuePtr clone(const Value& v) {
    auto c = std::make_unique<Value>();
    c->tree = v.tree;
    c->index = v.index;
    c->kind = v.kind;
    c->expanded = v.expanded;
    for (const Member& m : v.members)
        if (m.value) c->members.push_back(Member{m.raw_key, m.key, clone(*m.value)});
    for (const ValuePtr& item : v.items) c->items.push_back(clone(*item));
    return c;
}

ValuePtr empty_object() {
    auto v = std::make_unique<Value>();
    v->kind = Kind::Object;
    v->expanded = true;
    return v;
}

void index_members(Value& object) {
    if (object.indexed || object.members.size() <= kIndexFrom || ++object.lookups < kIndexAfter) return;
    object.by_key.reserve(object.members.size());
    for (std::size_t i = 0; i < object.members.size(); ++i) {
        if (!object.members[i].value) continue;
        auto [it, added] = object.by_key.insert_or_assign(object.members[i].key, i);
        if (!added) object.repeats = true;
    }
    object.indexed = true;
}

// The last member named `key` (a repeated key reads as its last value).
Member* find_member(Value& object, std::string_view key) {
    index_members(object);
    if (object.indexed) {
        auto it = object.by_key.find(std::string(key));
        return it == object.by_key.end() ? nullptr : &object.members[it->second];
    }
    for (auto it = object.members.rbegin(); it != object.members.rend(); ++it)
        if (it->value && it->key == key) return &*it;
    return nullptr;
}

// Appends a member after the last.
void add_member(Value& object, std::string raw_key, std::string key, ValuePtr value) {
    object.members.push_back(Member{std::move(raw_key), std::move(key), std::move(value)});
    if (object.indexed) object.by_key.insert_or_assign(object.members.back().key, object.members.size() - 1);
}

// Removes every member named `key`; returns the value of the last one (null when there was none).
ValuePtr remove_members(Value& object, std::string_view key, Work& work) {
    Member* last = find_member(object, key);
    if (!last) return nullptr;
    ValuePtr value = std::move(last->value);
    if (object.indexed) object.by_key.erase(std::string(key));
    if (!object.indexed || object.repeats) {
        work.spend(object.members.size());
        for (Member& m : object.members)
            if (m.key == key) m.value.reset();
    }
    return value;
}

class JsonPatchApplier {
public:
    JsonPatchApplier(std::unique_ptr<Tree> base, std::string_view patch_text)
        : base_(std::move(base)),
          patch_(patch_text, "the JSON Patch", kMaxDepth + 2),
          root_(span(*base_, 0)) {}

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
        try {
            run_operation(n, c);
        } catch (const Work::Spent&) {
            fail(kSpent);
        }
    }

    void run_operation(std::size_t n, std::size_t c) {
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
            if (op_ == "copy") {
                const Value& copied = *resolve(source, *from);
                if (!take_size(copied, copy_budget_))
                    fail(
                        "the patch copies more than its base and itself hold together (a doc that doubles at "
                        "each copy would exhaust memory)");
                return add(tokens, clone(copied));
            }
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
    std::size_t array_index(const std::string& token, std::size_t size, bool end_ok,
                            std::string_view pointer) {
        if (token == "-" && end_ok) return size;
        bool digits = !token.empty() && token.size() <= 18 &&
                      std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                      (token.size() == 1 || token[0] != '0');
        if (!digits) fail(quoted(pointer) + ": \"" + token + "\" is not an array index");
        std::size_t k = std::stoull(token);
        if (k > size || (k == size && !end_ok))
            fail(quoted(pointer) + ": index " + token + " is past the array's end (" + std::to_string(size) +
                 " items)");
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
        if (tokens.size() + height(value, work_) > kMaxDepth)
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
            add_member(*parent, std::move(raw), last, std::move(value));
            return;
        }
        std::size_t k = array_index(last, parent->items.size(), true, path_);
        work_.spend(parent->items.size() - k);  // the items after it move up
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
            ValuePtr value = remove_members(*parent, tokens.back(), work_);
            if (!value) fail(quoted(pointer) + " does not exist");
            return value;
        }
        std::size_t k = array_index(tokens.back(), parent->items.size(), false, pointer);
        ValuePtr value = std::move(parent->items[k]);
        work_.spend(parent->items.size() - k);  // the items after it move down
        parent->items.erase(parent->items.begin() + static_cast<std::ptrdiff_t>(k));
        return value;
    }
    ValuePtr take(const std::vector<std::string>& tokens) { return take(tokens, path_); }

    void test(const std::vector<std::string>& tokens, std::size_t expected) {
        if (!same(*resolve(tokens), patch_, expected)) {
            std::string want;
            patch_.write(expected, want);
            if (want.size() > 200) want = want.substr(0, 200) + "…";
            fail("the value there is not " + want);
        }
    }

    std::unique_ptr<Tree> base_;
    Tree patch_;
    ValuePtr root_;
    // What `copy` operations may still copy, in bytes: as much as the base and the patch hold. Every
    // other operation grows the doc by at most the patch's own text.
    std::size_t copy_budget_ = base_->text().size() + patch_.text().size();
    Work work_{base_->text().size() + patch_.text().size()};
    std::size_t index_ = 0;
    std::string op_;
    std::string path_;
};

// RFC 7386, section 2. New members keep the patch's key text (the doc's own keys stay as they are).
void merge(ValuePtr& target, const Tree& patch, std::size_t p, Work& work) {
    if (patch.node(p).kind != Kind::Object) {
        target = span(patch, p);
        return;
    }
    if (!target || target->kind != Kind::Object) target = empty_object();
    expand(*target);
    for (std::size_t c = Tree::first_child(p); c < patch.node(p).after; c = patch.node(c).after) {
        const Node& n = patch.node(c);
        if (n.kind == Kind::Null) {
            remove_members(*target, patch.key(c), work);
            continue;
        }
        if (Member* m = find_member(*target, patch.key(c))) {
            merge(m->value, patch, c, work);
            continue;
        }
        ValuePtr value;
        merge(value, patch, c, work);
        add_member(*target, std::string(patch.raw_key(c)), std::string(patch.key(c)), std::move(value));
    }
}

}  // namespace

std::string apply(std::string_view base, const Patch& patch) {
    auto tree = std::make_unique<Tree>(base, "the base doc");
    if (patch.form == Form::JsonPatch) return JsonPatchApplier(std::move(tree), patch.text).run();
    Tree merge_patch(patch.text, "the merge patch");
    ValuePtr root = span(*tree, 0);
    Work work(base.size() + patch.text.size());
    try {
        merge(root, merge_patch, 0, work);
    } catch (const Work::Spent&) {
        throw Error(std::string("the merge patch does not apply: ") + kSpent);
    }
    std::string out;
    write(*root, out);
    return out;
}

}  // namespace docsync::patch
