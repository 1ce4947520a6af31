// The patch core against another implementation: nlohmann/json (Debian's nlohmann-json3-dev, header
// only, used by no program). On docs with ordinary numbers, nlohmann applies our patches and gets
// the next version; our apply takes nlohmann's patches and RFC 6902 operations it makes at random
// (move, copy and test included) and agrees with nlohmann on the result or on refusing.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "json_gen.hpp"
#include "patch/forms.hpp"
#include "patch/json_patch.hpp"
#include "patch/json_tree.hpp"

namespace patch = docsync::patch;
using docsync::patch::Form;
using docsync::patch::Patch;
using docsync::testing::JsonGen;
using docsync::testing::JsonGenOptions;
using docsync::testing::JsonValue;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

JsonGenOptions ordinary() {
    JsonGenOptions o;
    o.ordinary = true;
    return o;
}

Patch json_patch(std::string text) { return Patch{Form::JsonPatch, std::move(text)}; }
Patch merge_patch(std::string text) { return Patch{Form::MergePatch, std::move(text)}; }

std::string token(const std::string& key) {
    std::string out;
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

// Every JSON Pointer in a doc (the root's is "").
void pointers(const json& v, const std::string& at, std::vector<std::string>& out) {
    out.push_back(at);
    if (v.is_object()) {
        for (auto it = v.begin(); it != v.end(); ++it) pointers(it.value(), at + "/" + token(it.key()), out);
    } else if (v.is_array()) {
        for (std::size_t k = 0; k < v.size(); ++k) pointers(v[k], at + "/" + std::to_string(k), out);
    }
}

// doc.patch(patch), or nullopt when it fails. Where RFC 6902 says an operation below a scalar fails,
// nlohmann 3.11 asserts (abort) for "add", "move" and "copy", and "remove" does nothing: here those
// count as failing.
std::optional<json> nlohmann_patch(json doc, const json& patch) {
    auto below_scalar = [&](const std::string& path) {
        json::json_pointer at(path);
        return !at.empty() && doc.contains(at.parent_pointer()) &&
               !doc.at(at.parent_pointer()).is_structured();
    };
    for (json op : patch) {
        try {
            std::string path = op["path"].get<std::string>();
            if (op["op"] == "move") {  // RFC 6902: a remove, then an add; checked between the two
                std::string from = op["from"].get<std::string>();
                if (path == from) {
                    doc.at(json::json_pointer(from));
                    continue;
                }
                if (path.rfind(from + "/", 0) == 0 || below_scalar(from)) return std::nullopt;
                json value = doc.at(json::json_pointer(from));
                doc = doc.patch(json::array({{{"op", "remove"}, {"path", from}}}));
                op = {{"op", "add"}, {"path", path}, {"value", value}};
            }
            if (below_scalar(path)) return std::nullopt;
            doc = doc.patch(json::array({op}));
        } catch (const json::exception&) {
            return std::nullopt;
        }
    }
    return doc;
}

// 100 random docs (seeds 1..100 times `seed_factor`) through 20 random edits each: step(a, b) for
// the text of each version and of the next.
template <typename Step>
void each_edit(std::uint64_t seed_factor, Step&& step) {
    for (std::uint64_t seed = 1; seed <= 100; ++seed) {
        JsonGen gen(seed * seed_factor, ordinary());
        JsonValue doc = gen.doc();
        for (int v = 0; v < 20; ++v) {
            JsonValue next = doc;
            gen.edit(next);
            std::string a = doc.text(), b = next.text();
            doc = next;
            step(a, b);
        }
    }
}

}  // namespace

TEST_CASE("nlohmann applies our patches, both forms, and gets the next version") {
    std::size_t json_patches = 0, merge_patches = 0;
    each_edit(1, [&](const std::string& a, const std::string& b) {
        if (a == b) return;
        CAPTURE(a);
        CAPTURE(b);
        docsync::patch::Tree ta(a, "a"), tb(b, "b");
        ordered_json want = ordered_json::parse(b);
        if (auto p = docsync::patch::json_patch_between(ta, tb)) {
            CAPTURE(*p);
            ++json_patches;
            // Key order too: ordered_json compares members in order, and adds new keys last.
            CHECK(ordered_json::parse(a).patch(ordered_json::parse(*p)) == want);
        }
        if (auto p = docsync::patch::merge_patch_between(ta, tb)) {
            CAPTURE(*p);
            ++merge_patches;
            ordered_json got = ordered_json::parse(a);
            got.merge_patch(ordered_json::parse(*p));
            CHECK(got == want);
        }
    });
    CHECK(json_patches > 1500);
    CHECK(merge_patches > 800);
}

TEST_CASE("our apply takes nlohmann's diff and gives the next version") {
    each_edit(7919, [&](const std::string& a, const std::string& b) {
        std::string theirs = json::diff(json::parse(a), json::parse(b)).dump();
        CAPTURE(a);
        CAPTURE(b);
        CAPTURE(theirs);
        CHECK(json::parse(patch::apply(a, json_patch(theirs))) == json::parse(b));
        // And a merge patch of nlohmann's making: the next version with its nulls removed.
        ordered_json merge = ordered_json::parse(b);
        ordered_json expected = ordered_json::parse(a);
        expected.merge_patch(merge);
        CHECK(json::parse(patch::apply(a, merge_patch(merge.dump()))) == json::parse(expected.dump()));
    });
}

TEST_CASE("random RFC 6902 operations: our apply and nlohmann agree on the result or on refusing") {
    static const char* ops[] = {"add", "remove", "replace", "move", "copy", "test"};
    std::size_t applied = 0, refused = 0;
    for (std::uint64_t seed = 1; seed <= 400; ++seed) {
        JsonGen gen(seed, ordinary());
        std::string a = gen.doc().text();
        json doc = json::parse(a);
        std::vector<std::string> paths;
        pointers(doc, "", paths);
        auto& rng = gen.rng();
        auto any_path = [&] {
            std::string p = paths[rng() % paths.size()];
            switch (rng() % 6) {
                case 0:
                    return p + "/-";
                case 1:
                    return p + "/0";
                case 2:
                    return p + "/nope";
                default:
                    return p;
            }
        };
        json patch = json::array();
        for (std::size_t n = 1 + rng() % 3; n > 0; --n) {
            json op = {{"op", ops[rng() % 6]}, {"path", any_path()}};
            if (op["op"] == "move" || op["op"] == "copy") op["from"] = paths[rng() % paths.size()];
            if (op["op"] == "add" || op["op"] == "replace") op["value"] = json::parse(gen.doc().text());
            if (op["op"] == "test") {
                op["value"] =
                    rng() % 2 ? json(nullptr) : doc.at(json::json_pointer(paths[rng() % paths.size()]));
            }
            patch.push_back(op);
        }
        CAPTURE(a);
        CAPTURE(patch.dump());
        std::optional<json> theirs = nlohmann_patch(doc, patch), ours;
        try {
            ours = json::parse(patch::apply(a, json_patch(patch.dump())));
        } catch (const docsync::Error&) {
        }
        // nlohmann 3.11 refuses to remove the root, as we do; it takes "-" only where RFC 6902 does.
        CHECK(ours.has_value() == theirs.has_value());
        if (ours && theirs) CHECK(*ours == *theirs);
        (ours ? applied : refused)++;
    }
    CHECK(applied > 50);
    CHECK(refused > 50);
}
