// The patch core (worker/patch/): diff and apply keep bytes exact over random docs and random
// edits, take every RFC 6902 operation and RFC 7386 merge patch, and refuse bad patches by name.
#include "patch/json_patch.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <new>
#include <string>

#include "common/error.hpp"
#include "json_gen.hpp"
#include "patch/forms.hpp"
#include "patch/json_tree.hpp"

using docsync::Error;
using docsync::patch::apply;
using docsync::patch::diff;
using docsync::patch::Form;
using docsync::patch::Patch;
using docsync::testing::JsonGen;
using docsync::testing::JsonValue;

namespace {

Patch json_patch(std::string text) { return Patch{Form::JsonPatch, std::move(text)}; }
Patch merge_patch(std::string text) { return Patch{Form::MergePatch, std::move(text)}; }

}  // namespace

TEST_CASE("diff then apply gives the new text byte for byte, in both forms, over random edits") {
    std::size_t versions = 0, json_patches = 0, merge_patches = 0, merge_chosen = 0, none = 0;
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        JsonGen gen(seed);
        JsonValue doc = gen.doc();
        for (int v = 0; v < 25; ++v) {
            JsonValue next = doc;
            gen.edit(next);
            std::string a = doc.text(), b = next.text();
            if (a == b) continue;  // an edit that changed nothing (a delete from an empty array)
            ++versions;
            CAPTURE(seed);
            CAPTURE(a);
            CAPTURE(b);
            std::optional<Patch> p = diff(a, b);
            CHECK_FALSE(diff(a, a));
            if (!p) {
                // Only a root object holding a key twice gets no patch.
                CHECK((JsonGen::repeats_key(doc, true) || JsonGen::repeats_key(next, true)));
                ++none;
            } else {
                CAPTURE(p->text);
                CHECK(apply(a, *p) == b);
                merge_chosen += p->form == Form::MergePatch;
            }
            docsync::patch::Tree ta(a, "a"), tb(b, "b");
            if (auto jp = docsync::patch::json_patch_between(ta, tb)) {
                ++json_patches;
                CAPTURE(*jp);
                CHECK(apply(a, json_patch(*jp)) == b);
                if (p) CHECK(p->text.size() <= jp->size());
            }
            if (auto mp = docsync::patch::merge_patch_between(ta, tb)) {
                ++merge_patches;
                CAPTURE(*mp);
                CHECK(apply(a, merge_patch(*mp)) == b);
                if (p) CHECK(p->text.size() <= mp->size());
            }
            doc = std::move(next);
        }
    }
    MESSAGE(versions << " versions: " << json_patches << " JSON Patches, " << merge_patches
                     << " merge patches (" << merge_chosen << " chosen), " << none << " without a patch");
    CHECK(versions >= 5000);
    CHECK(merge_chosen > 100);
    CHECK(none > 0);  // the generator made root objects with a key twice
    CHECK(none < versions / 20);
}

TEST_CASE("the round trip holds for wide objects and arrays (apply indexes objects of many members)") {
    docsync::testing::JsonGenOptions wide;
    wide.max_width = 40;
    wide.max_depth = 2;
    std::size_t versions = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        JsonGen gen(seed, wide);
        JsonValue doc = gen.doc();
        for (int v = 0; v < 25; ++v) {
            JsonValue next = doc;
            gen.edit(next);
            std::string a = doc.text(), b = next.text();
            doc = std::move(next);
            if (a == b) continue;
            ++versions;
            CAPTURE(a);
            CAPTURE(b);
            docsync::patch::Tree ta(a, "a"), tb(b, "b");
            if (auto jp = docsync::patch::json_patch_between(ta, tb)) CHECK(apply(a, json_patch(*jp)) == b);
            if (auto mp = docsync::patch::merge_patch_between(ta, tb)) CHECK(apply(a, merge_patch(*mp)) == b);
        }
    }
    CHECK(versions >= 900);
}

namespace {

// A patch applied as it is, and after four lookups of /k0 to /k3 that make apply index the object (so
// both ways of finding a member are checked); both results must agree.
std::string both_ways(const std::string& doc, const std::string& ops) {
    std::string plain = apply(doc, json_patch("[" + ops + "]"));
    std::string warm;
    for (int i = 0; i < 4; ++i)
        warm += R"({"op":"test","path":"/k)" + std::to_string(i) + R"(","value":)" + std::to_string(i) + "},";
    CHECK(apply(doc, json_patch("[" + warm + ops + "]")) == plain);
    return plain;
}

std::string both_ways_merge(const std::string& doc, const std::string& members) {
    std::string plain = apply(doc, merge_patch("{" + members + "}"));
    CHECK(apply(doc, merge_patch(R"({"k0":0,"k1":1,"k2":2,"k3":3,)" + members + "}")) == plain);
    return plain;
}

}  // namespace

TEST_CASE("a key twice in an object of many members: the last is addressed, remove takes all") {
    std::string doc = "{";
    for (int i = 0; i < 20; ++i) doc += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    std::string wide = doc + R"("d":1,"x":0,"d":2})";
    CHECK(both_ways(wide, R"({"op":"replace","path":"/d","value":9})") == doc + R"("d":1,"x":0,"d":9})");
    CHECK(both_ways(wide, R"({"op":"test","path":"/d","value":2},{"op":"remove","path":"/d"})") ==
          doc + R"("x":0})");
    CHECK(both_ways_merge(wide, R"("d":null,"k5":null,"n":{"a":null,"b":1})") ==
          doc.substr(0, doc.find("\"k5\"")) + doc.substr(doc.find("\"k6\"")) + R"("x":0,"n":{"b":1}})");
    CHECK(both_ways(wide,
                    R"({"op":"remove","path":"/d"},{"op":"add","path":"/d","value":3},)"
                    R"({"op":"move","from":"/k0","path":"/k0"},{"op":"move","from":"/k6","path":"/z"})") ==
          doc.substr(0, doc.find("\"k6\"")) + doc.substr(doc.find("\"k7\"")) + R"("x":0,"d":3,"z":6})");
}

TEST_CASE("an object of many members: a removed key is gone, and comes back last") {
    std::string doc = "{", rest = "{";
    for (int i = 0; i < 20; ++i) {
        doc += std::string(i ? "," : "") + "\"k" + std::to_string(i) + "\":" + std::to_string(i);
        if (i != 5)
            rest += std::string(rest.size() > 1 ? "," : "") + "\"k" + std::to_string(i) +
                    "\":" + std::to_string(i);
    }
    doc += "}";
    CHECK(both_ways(doc, R"({"op":"remove","path":"/k5"},{"op":"add","path":"/k5","value":"back"})") ==
          rest + R"(,"k5":"back"})");
    CHECK(
        both_ways(doc, R"({"op":"add","path":"/new","value":1},{"op":"replace","path":"/new","value":2})") ==
        doc.substr(0, doc.size() - 1) + R"(,"new":2})");
    CHECK(both_ways_merge(doc, R"("k5":null)") == rest + "}");
    CHECK(both_ways_merge(doc, R"("k5":null,"k5":1)") == rest + R"(,"k5":1})");
    CHECK(both_ways(doc, R"({"op":"move","from":"/k5","path":"/k5"})") == doc);
    CHECK_THROWS_WITH_AS(
        both_ways(doc, R"({"op":"remove","path":"/k5"},{"op":"replace","path":"/k5","value":1})"),
        doctest::Contains("(replace \"/k5\") does not apply: \"/k5\" does not exist"), Error);
}

TEST_CASE("diff makes the documented patch for one changed score, and apply reverses nothing else") {
    std::string a = R"({"game":7,"scores":[{"player":"ann","score":120},{"player":"bob","score":95}]})";
    std::string b = R"({"game":7,"scores":[{"player":"ann","score":120},{"player":"bob","score":97}]})";
    auto p = diff(a, b);
    REQUIRE(p);
    CHECK(p->form == Form::JsonPatch);
    CHECK(p->text == R"([{"op":"replace","path":"/scores/1/score","value":97}])");
    CHECK(apply(a, *p) == b);
    CHECK_FALSE(diff(a, a));
}

TEST_CASE("apply takes each RFC 6902 operation") {
    std::string doc = R"({"a":{"b":[1,2,3]},"c":"x"})";
    SUBCASE("add: a new key goes last, an existing key keeps its place, items are inserted") {
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"/z","value":{"y":1}}])")) ==
              R"({"a":{"b":[1,2,3]},"c":"x","z":{"y":1}})");
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"/a","value":0}])")) == R"({"a":0,"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"/a/b/1","value":9}])")) ==
              R"({"a":{"b":[1,9,2,3]},"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"/a/b/3","value":9}])")) ==
              R"({"a":{"b":[1,2,3,9]},"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"/a/b/-","value":9}])")) ==
              R"({"a":{"b":[1,2,3,9]},"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"","value":[1]}])")) == "[1]");
    }
    SUBCASE("remove") {
        CHECK(apply(doc, json_patch(R"([{"op":"remove","path":"/a/b/0"}])")) ==
              R"({"a":{"b":[2,3]},"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"remove","path":"/a"}])")) == R"({"c":"x"})");
    }
    SUBCASE("replace") {
        CHECK(apply(doc, json_patch(R"([{"op":"replace","path":"/a/b/2","value":"three"}])")) ==
              R"({"a":{"b":[1,2,"three"]},"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"replace","path":"","value":null}])")) == "null");
    }
    SUBCASE("move: removed, then added") {
        CHECK(apply(doc, json_patch(R"([{"op":"move","from":"/a/b/0","path":"/a/b/-"}])")) ==
              R"({"a":{"b":[2,3,1]},"c":"x"})");
        CHECK(apply(doc, json_patch(R"([{"op":"move","from":"/c","path":"/a/c"}])")) ==
              R"({"a":{"b":[1,2,3],"c":"x"}})");
        CHECK(apply(doc, json_patch(R"([{"op":"move","from":"/a","path":"/a"}])")) == doc);
    }
    SUBCASE("copy") {
        CHECK(apply(doc, json_patch(R"([{"op":"copy","from":"/a/b","path":"/d"}])")) ==
              R"({"a":{"b":[1,2,3]},"c":"x","d":[1,2,3]})");
    }
    SUBCASE("test compares values, not text") {
        for (const char* t : {R"([{"op":"test","path":"/a","value":{"b":[1.0,2e0,3]}}])",
                              R"([{"op":"test","path":"/c","value":"\u0078"}])",
                              R"([{"op":"test","path":"","value":{"c":"x","a":{"b":[1,2,3]}}}])"}) {
            CAPTURE(t);
            CHECK(apply(doc, json_patch(t)) == doc);
        }
        CHECK(apply(R"({"n":123456789012345678901234567890})",
                    json_patch(R"([{"op":"test","path":"/n","value":123456789012345678901234567890}])")) ==
              R"({"n":123456789012345678901234567890})");
        CHECK_THROWS_WITH_AS(
            apply(R"({"n":1e400})", json_patch(R"([{"op":"test","path":"/n","value":2e400}])")),
            doctest::Contains("the value there is not 2e400"), Error);
        CHECK_THROWS_AS(apply(doc, json_patch(R"([{"op":"test","path":"/a/b","value":[1,2]}])")), Error);
    }
    SUBCASE("test on what earlier operations changed: objects in any order, removed members gone") {
        CHECK(apply(doc, json_patch(R"([{"op":"add","path":"/a/x","value":1.0},{"op":"remove","path":"/c"},)"
                                    R"({"op":"test","path":"","value":{"a":{"x":1,"b":[1,2,3]}}}])")) ==
              R"({"a":{"b":[1,2,3],"x":1.0}})");
        CHECK_THROWS_WITH_AS(
            apply(doc, json_patch(R"([{"op":"remove","path":"/c"},)"
                                  R"({"op":"test","path":"","value":{"a":{"b":[1,2,3]},"c":"x"}}])")),
            doctest::Contains("operation 1 (test \"\")"), Error);
    }
    SUBCASE("operations apply in order, to what the earlier ones made") {
        CHECK(apply(doc,
                    json_patch(R"([{"op":"add","path":"/a/b/0","value":0},{"op":"remove","path":"/a/b/3"},)"
                               R"({"op":"test","path":"/a/b","value":[0,1,2]}])")) ==
              R"({"a":{"b":[0,1,2]},"c":"x"})");
    }
    SUBCASE("members beside the operation's own are ignored, and white space in the patch is dropped") {
        CHECK(apply(doc,
                    json_patch(
                        R"([ {"path" : "/c", "note":1, "value" : [ 1 , {"k" : 2} ], "op" : "replace"} ])")) ==
              R"({"a":{"b":[1,2,3]},"c":[1,{"k":2}]})");
    }
}

TEST_CASE("JSON Pointer escapes: ~0, ~1, and keys written as PostgreSQL writes them") {
    std::string doc = R"({"a/b":1,"m~n":2,"":3})";
    CHECK(apply(doc, json_patch(R"([{"op":"replace","path":"/a~1b","value":10}])")) ==
          R"({"a/b":10,"m~n":2,"":3})");
    CHECK(apply(doc, json_patch(R"([{"op":"replace","path":"/m~0n","value":20}])")) ==
          R"({"a/b":1,"m~n":20,"":3})");
    CHECK(apply(doc, json_patch(R"([{"op":"remove","path":"/"}])")) == R"({"a/b":1,"m~n":2})");
    // A new key is escaped as escape_json does: \" \\ \n and other controls as lower-case \u00xx;
    // '/', non-ASCII and \u00e9 written raw.
    CHECK(apply("{}", json_patch(R"([{"op":"add","path":"/q\"\\\n\u001F~1é\u00e9","value":1}])")) ==
          "{\"q\\\"\\\\\\n\\u001f/\xc3\xa9\xc3\xa9\":1}");
    // The doc's own keys keep their escapes; they are matched decoded.
    CHECK(apply(R"({"\u00e9":1})", json_patch(R"([{"op":"replace","path":"/é","value":2}])")) ==
          R"({"\u00e9":2})");
    // A key spelt another way is another text: the object is replaced whole.
    for (auto [x, y] : {std::pair{R"({"o":{"\u00e9":1},"p":2})", R"({"o":{"é":1},"p":2})"},
                        std::pair{R"({"o":{"a":1,"\u00e9":1},"p":2})", R"({"o":{"a":1,"é":2},"p":2})"}}) {
        auto q = diff(x, y);
        REQUIRE(q);
        CHECK(apply(x, *q) == y);
    }
    // diff replaces the parent whole when a new key's text is not how apply writes it.
    std::string a = R"({"x":{"k":1}})", b = R"({"x":{"k":1,"\u00e9":2}})";
    auto p = diff(a, b);
    REQUIRE(p);
    CHECK(apply(a, *p) == b);
    CHECK(p->text.find(R"("path":"/x/)") == std::string::npos);
}

TEST_CASE("a patch that does not apply throws, naming the operation and the path") {
    std::string doc = R"({"a":{"b":[1,2,3]},"c":"x"})";
    struct Bad {
        const char* patch;
        const char* message;
    };
    for (Bad bad : {
             Bad{R"({"op":"add"})", "not an array of operations"},
             Bad{R"([1])", "operation 0 (? \"\") does not apply: an operation must be an object"},
             Bad{R"([{"path":"/a"}])", "operation 0 (? \"/a\") does not apply: it has no \"op\""},
             Bad{R"([{"op":"add","value":1}])", "operation 0 (add \"\") does not apply: it has no \"path\""},
             Bad{R"([{"op":7,"path":"/a"}])", "its \"op\" is not a string"},
             Bad{R"([{"op":"frob","path":"/a"}])",
                 "operation 0 (frob \"/a\") does not apply: unknown operation"},
             Bad{R"([{"op":"add","path":"/a"}])",
                 "operation 0 (add \"/a\") does not apply: it has no \"value\""},
             Bad{R"([{"op":"move","path":"/a"}])", "it has no \"from\""},
             Bad{R"([{"op":"test","path":"/c","value":"x"},{"op":"remove","path":"/nope"}])",
                 "operation 1 (remove \"/nope\") does not apply: \"/nope\" does not exist"},
             Bad{R"([{"op":"replace","path":"/a/q","value":1}])", "\"/a/q\" does not exist"},
             Bad{R"([{"op":"add","path":"/a/q/r","value":1}])",
                 "\"/a/q/r\" does not exist (no member \"q\")"},
             Bad{R"([{"op":"add","path":"/c/r","value":1}])", "(its parent is not an array or object)"},
             Bad{R"([{"op":"add","path":"/c/r/s","value":1}])", "(\"r\" is below a scalar)"},
             Bad{R"([{"op":"add","path":"/a/b/4","value":1}])", "index 4 is past the array's end (3 items)"},
             Bad{R"([{"op":"replace","path":"/a/b/3","value":1}])", "index 3 is past the array's end"},
             Bad{R"([{"op":"remove","path":"/a/b/-"}])", "\"-\" is not an array index"},
             Bad{R"([{"op":"remove","path":"/a/b/01"}])", "\"01\" is not an array index"},
             Bad{R"([{"op":"remove","path":"/a/b/x"}])", "\"x\" is not an array index"},
             Bad{R"([{"op":"remove","path":"a"}])", "the JSON Pointer \"a\" does not start with '/'"},
             Bad{R"([{"op":"remove","path":"/a~2"}])", "has a '~' not followed by 0 or 1"},
             Bad{R"([{"op":"remove","path":""}])", "the whole doc cannot be removed"},
             Bad{R"([{"op":"move","from":"/a","path":"/a/b/0"}])", "\"from\" \"/a\" is a parent of the path"},
             Bad{R"([{"op":"copy","from":"/zz","path":"/a"}])",
                 "operation 0 (copy \"/a\") does not apply: \"/zz\" does not exist"},
             Bad{R"([{"op":"test","path":"/c","value":"y"}])",
                 "operation 0 (test \"/c\") does not apply: the value there is not \"y\""},
             Bad{R"([{"op":"add","path":"/a","value":}])", "the JSON Patch is not valid JSON"},
         }) {
        CAPTURE(bad.patch);
        CHECK_THROWS_WITH_AS(apply(doc, json_patch(bad.patch)), doctest::Contains(bad.message), Error);
    }
    CHECK_THROWS_WITH_AS(apply("{", json_patch("[]")), doctest::Contains("the base doc is not valid JSON"),
                         Error);
    CHECK_THROWS_WITH_AS(apply(doc, merge_patch("{")), doctest::Contains("the merge patch is not valid JSON"),
                         Error);
}

TEST_CASE("nothing nests deeper than kMaxDepth: diff sends such docs whole, apply refuses them") {
    using docsync::patch::kMaxDepth;
    std::string deep = std::string(kMaxDepth + 1, '[') + std::string(kMaxDepth + 1, ']');
    std::string limit = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
    CHECK_FALSE(diff(deep, "[]"));
    CHECK_FALSE(diff("[]", deep));
    CHECK(diff(limit, "[]"));
    CHECK_THROWS_WITH_AS(apply(deep, json_patch("[]")), doctest::Contains("nests deeper than 256"), Error);
    CHECK_THROWS_WITH_AS(diff("{", "[]"), doctest::Contains("the old doc is not valid JSON"), Error);
    CHECK_THROWS_WITH_AS(diff("[]", "[1,]"), doctest::Contains("the new doc is not valid JSON"), Error);
    // Adding a value that would nest the doc too deep fails; as deep as the limit is fine.
    std::string deep_value = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
    CHECK_THROWS_WITH_AS(
        apply(R"({"a":1})", json_patch(R"([{"op":"add","path":"/b","value":)" + deep_value + "}]")),
        doctest::Contains("would nest deeper than 256"), Error);
    CHECK(apply("[]", json_patch(R"([{"op":"add","path":"","value":)" + deep_value + "}]")) == deep_value);
    // Each add one level deeper: refused at the limit, never a stack overflow.
    std::string doc = "[]", path;
    bool refused = false;
    for (std::size_t level = 0; level < kMaxDepth + 2 && !refused; ++level) {
        try {
            doc = apply(doc, json_patch(R"([{"op":"add","path":")" + path + R"(/-","value":[]}])"));
            path += "/0";
        } catch (const Error&) {
            refused = true;
        }
    }
    CHECK(refused);
}

TEST_CASE("copies may not grow the doc past its base and the patch together") {
    // Each copy of the root into itself would double the doc: 40 of them, 2^40 times its size.
    std::string patch = "[";
    for (int i = 0; i < 40; ++i)
        patch +=
            std::string(i ? "," : "") + R"({"op":"copy","from":"","path":"/c)" + std::to_string(i) + "\"}";
    patch += "]";
    CHECK_THROWS_WITH_AS(apply(R"({"a":"0123456789"})", json_patch(patch)),
                         doctest::Contains("copies more than its base and itself hold together"), Error);
    // One copy within the budget is taken.
    CHECK(apply(R"({"a":[1,2,3]})", json_patch(R"([{"op":"copy","from":"/a","path":"/b"}])")) ==
          R"({"a":[1,2,3],"b":[1,2,3]})");
}

TEST_CASE("apply takes RFC 7386 merge patches") {
    std::string doc = R"({"a":"b","c":{"d":"e","f":"g"}})";
    CHECK(apply(doc, merge_patch(R"({"a":"z","c":{"f":null}})")) == R"({"a":"z","c":{"d":"e"}})");
    CHECK(apply(doc, merge_patch(R"({"n":{"x":null,"y":{"z":null,"w":1}}})")) ==
          R"({"a":"b","c":{"d":"e","f":"g"},"n":{"y":{"w":1}}})");
    CHECK(apply(doc, merge_patch(R"({"a":[1,{"x":null}]})")) ==
          R"({"a":[1,{"x":null}],"c":{"d":"e","f":"g"}})");
    CHECK(apply(doc, merge_patch("[1]")) == "[1]");
    CHECK(apply("[1]", merge_patch(R"({"a":1})")) == R"({"a":1})");
    CHECK(apply(doc, merge_patch("{}")) == doc);
    CHECK(apply(R"({"\u00e9":1})", merge_patch(R"({"é":2})")) == R"({"\u00e9":2})");
    // RFC 7386's appendix A, as compact text.
    struct Case {
        const char* target;
        const char* patch;
        const char* result;
    };
    for (Case c :
         {Case{R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
          Case{R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
          Case{R"({"a":"b"})", R"({"a":null})", R"({})"},
          Case{R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
          Case{R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
          Case{R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
          Case{R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
          Case{R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
          Case{R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"}, Case{R"({"a":"b"})", R"(["c"])", R"(["c"])"},
          Case{R"({"a":"foo"})", "null", "null"}, Case{R"({"a":"foo"})", R"("bar")", R"("bar")"},
          Case{R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
          Case{R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
          Case{R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"}}) {
        CAPTURE(c.patch);
        CHECK(apply(c.target, merge_patch(c.patch)) == c.result);
    }
}

TEST_CASE("diff returns the shorter form, JSON Patch on a tie, and merge patches only where they are exact") {
    // One changed member of a small object: the merge patch is shorter.
    auto p = diff(R"({"a":1,"b":2})", R"({"a":1,"b":3})");
    REQUIRE(p);
    CHECK(p->form == Form::MergePatch);
    CHECK(p->text == R"({"b":3})");
    // One changed item of a long array: the merge patch would carry the whole array.
    std::string a = R"({"xs":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]})";
    std::string b = R"({"xs":[1,2,3,4,5,6,7,8,0,10,11,12,13,14,15]})";
    p = diff(a, b);
    REQUIRE(p);
    CHECK(p->form == Form::JsonPatch);
    CHECK(p->text == R"([{"op":"replace","path":"/xs/8","value":0}])");
    // A value set to null, or an object holding a null member where there was none: no merge patch.
    for (auto [x, y_bound] : {std::pair{R"({"a":1,"b":2})", R"({"a":1,"b":null})"},
                        std::pair{R"({"a":1})", R"({"a":{"n":null}})"},
                        std::pair{R"({"a":1,"b":2})", R"({"b":2,"a":1})"},  // reordered keys
                        std::pair{R"({"a":1})", R"([1])"}}) {
        const char* y = y_bound;  // CAPTURE takes a variable, not a structured binding
        CAPTURE(y);
        docsync::patch::Tree tx(x, "x"), ty(y, "y");
        CHECK_FALSE(docsync::patch::merge_patch_between(tx, ty));
        auto q = diff(x, y);
        REQUIRE(q);
        CHECK(q->form == Form::JsonPatch);
        CHECK(apply(x, *q) == y);
    }
    // A new key in the middle: the object is replaced whole.
    p = diff(R"({"o":{"a":1,"c":3},"z":[1,2,3,4,5,6,7,8]})",
             R"({"o":{"a":1,"b":2,"c":3},"z":[1,2,3,4,5,6,7,8]})");
    REQUIRE(p);
    CHECK(p->text == R"([{"op":"replace","path":"/o","value":{"a":1,"b":2,"c":3}}])");
    // Equal sizes (42 bytes each): the JSON Patch.
    std::string x = R"({"a":[1,"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]})",
                y = R"({"a":[2,"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]})";
    docsync::patch::Tree ta(x, "a"), tb(y, "b");
    auto jp = docsync::patch::json_patch_between(ta, tb);
    auto mp = docsync::patch::merge_patch_between(ta, tb);
    REQUIRE(jp);
    REQUIRE(mp);
    REQUIRE(jp->size() == mp->size());
    CHECK(diff(x, y)->form == Form::JsonPatch);
}

TEST_CASE("objects with a key twice are replaced whole, or get no patch at the root") {
    CHECK_FALSE(diff(R"({"a":1,"a":2})", R"({"a":1,"a":3})"));
    CHECK_FALSE(diff(R"({"a":1})", R"({"a":1,"a":3})"));
    std::string a = R"({"o":{"a":1,"a":2},"p":1})", b = R"({"o":{"a":1,"a":3},"p":1})";
    auto p = diff(a, b);
    REQUIRE(p);
    CHECK(p->text == R"([{"op":"replace","path":"/o","value":{"a":1,"a":3}}])");
    CHECK(apply(a, *p) == b);
}

TEST_CASE("arrays: the common ends are kept, the middle is patched item by item or removed and added") {
    struct Case {
        const char* a;
        const char* b;
        const char* patch;
    };
    for (
        Case c :
        {Case{"[1,2,3,4,5,6,7,8,9]", "[1,2,3,4,0,5,6,7,8,9]", R"([{"op":"add","path":"/4","value":0}])"},
         Case{"[1,2,3,4,5,6,7,8,9]", "[1,2,3,4,6,7,8,9]", R"([{"op":"remove","path":"/4"}])"},
         Case{"[1,2,3,4,5,6,7,8,9]", "[1,2,3,4,5,6,7,8,9,10]", R"([{"op":"add","path":"/9","value":10}])"},
         Case{R"([{"id":1,"v":"aaaaaaaaaaaa"},{"id":2,"v":"bbbbbbbbbbbb"}])",
              R"([{"id":1,"v":"aaaaaaaaaaaa"},{"id":2,"v":"bbbbbbbbbbbc"}])",
              R"([{"op":"replace","path":"/1/v","value":"bbbbbbbbbbbc"}])"},
         Case{R"(["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",5,6,"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"])",
              R"(["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"])",
              R"([{"op":"remove","path":"/2"},{"op":"remove","path":"/1"}])"},
         Case{"[1,2,3,4,5,6,7,8,9]", "[1,2,3,4,7,8,9]",
              R"([{"op":"replace","path":"","value":[1,2,3,4,7,8,9]}])"},
         Case{
             R"(["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",5,6,"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"])",
             R"(["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",7,"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"])",
             R"([{"op":"remove","path":"/2"},{"op":"remove","path":"/1"},{"op":"add","path":"/1","value":7}])"}}) {
        CAPTURE(c.b);
        auto p = diff(c.a, c.b);
        REQUIRE(p);
        CHECK(p->form == Form::JsonPatch);
        CHECK(p->text == c.patch);
        CHECK(apply(c.a, *p) == c.b);
    }
}

namespace {

// The address space this process holds now (VmSize), in bytes.
std::size_t address_space() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
    return 0;
}

// Runs `body` in a child whose address space may grow by at most `extra` bytes; its exit status
// (0: done, 2: out of memory, 3: a check failed).
template <class Body>
int within_memory(std::size_t extra, Body body) {
    pid_t pid = fork();
    if (pid == 0) {
        rlimit limit{};
        limit.rlim_cur = limit.rlim_max = address_space() + extra;
        setrlimit(RLIMIT_AS, &limit);
        try {
            _exit(body() ? 0 : 3);
        } catch (const std::bad_alloc&) {
            _exit(2);
        } catch (...) {
            _exit(4);
        }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("a long path over many changed items: diff's work and patch stay within the docs' size") {
    // One 30 000-byte key over 8 000 items that all change: a patch op per item would write the
    // path 8 000 times (240 MB); replacing the array whole costs the new doc's size.
    const std::string key(30000, 'k');
    std::string a = "{\"" + key + "\":[", b = a;
    for (int k = 0; k < 8000; ++k) {
        a += (k ? "," : "") + std::to_string(k);
        b += (k ? "," : "") + std::to_string(k + 1);
    }
    a += "],\"n\":1}";
    b += "],\"n\":2}";
    int status = within_memory(64u << 20, [&] {
        docsync::patch::Tree ta(a, "a"), tb(b, "b");
        auto jp = docsync::patch::json_patch_between(ta, tb);
        if (!jp || jp->size() > b.size() + 64 || apply(a, json_patch(*jp)) != b) return false;
        auto p = diff(a, b);
        return p && p->text.size() <= b.size() + 64 && apply(a, *p) == b;
    });
    CHECK(status == 0);

    // Nested: each item an object whose one field changes, under the long key; the array is
    // replaced whole (its items' ops would repeat the path), the other member is patched.
    std::string c = "{\"" + key + "\":[", d = c;
    for (int k = 0; k < 4000; ++k) {
        c += std::string(k ? "," : "") + "{\"v\":" + std::to_string(k) + "}";
        d += std::string(k ? "," : "") + "{\"v\":" + std::to_string(k + 1) + "}";
    }
    c += "],\"x\":\"" + std::string(200, 'a') + "\"}";
    d += "],\"x\":\"" + std::string(200, 'b') + "\"}";
    status = within_memory(64u << 20, [&] {
        docsync::patch::Tree tc(c, "c"), td(d, "d");
        auto jp = docsync::patch::json_patch_between(tc, td);
        return jp && jp->size() <= d.size() + 64 && apply(c, json_patch(*jp)) == d;
    });
    CHECK(status == 0);

    // A few changed items under the long path still get their own ops.
    std::string e = a, f = a;
    f.replace(f.find(",17,"), 4, ",71,");
    auto p = diff(e, f);
    REQUIRE(p);
    CHECK(p->form == Form::JsonPatch);
    CHECK(p->text.size() < key.size() + 100);
    CHECK(apply(e, *p) == f);
}

TEST_CASE("a patch that would make apply work far past its size is refused, not run for seconds") {
    // A hostile publisher's patch: thousands of operations on one large value. Each step (a node
    // walked, an item shifted, a member scanned) is counted against 16 per byte of the texts.
    auto array_doc = [](std::size_t items, const std::string& tail) {
        std::string doc = "{\"a\":[";
        for (std::size_t i = 0; i < items; ++i) doc += i ? ",0" : "0";
        return doc + "]" + tail + "}";
    };
    auto ops = [](std::size_t n, const std::string& a, const std::string& b) {
        std::string out = "[";
        for (std::size_t i = 0; i < n; ++i) out += std::string(i ? "," : "") + (i % 2 ? b : a);
        return out + "]";
    };
    const std::string base = array_doc(200000, ",\"b\":0");
    // moves of the array back and forth: each one walked the whole moved subtree
    const std::string moves = ops(2000, R"({"op":"move","from":"/a","path":"/c"})", R"({"op":"move","from":"/c","path":"/a"})");
    CHECK_THROWS_WITH_AS(apply(base, Patch{Form::JsonPatch, moves}), doctest::Contains("more work"), Error);
    // removals at the front of a long array: each one shifted every item after it
    const std::string removes = ops(2000, R"({"op":"remove","path":"/a/0"})", R"({"op":"remove","path":"/a/0"})");
    CHECK_THROWS_WITH_AS(apply(base, Patch{Form::JsonPatch, removes}), doctest::Contains("more work"), Error);
    // a merge patch removing members of an object with a key twice: each removal scanned them all
    std::string object = "{\"k\":0";
    for (int i = 0; i < 100000; ++i) object += ",\"m" + std::to_string(i) + "\":0";
    object += ",\"k\":1}";
    std::string merge = "{";
    for (int i = 0; i < 2000; ++i) merge += std::string(i ? "," : "") + "\"m" + std::to_string(i) + "\":null";
    merge += "}";
    CHECK_THROWS_WITH_AS(apply(object, Patch{Form::MergePatch, merge}), doctest::Contains("more work"), Error);
    // The same kinds of operations within the texts' size apply.
    const std::string small = array_doc(2000, "");
    const std::string fronts = ops(500, R"({"op":"remove","path":"/a/0"})", R"({"op":"remove","path":"/a/0"})");
    CHECK(apply(small, Patch{Form::JsonPatch, fronts}) == array_doc(1500, ""));
}
