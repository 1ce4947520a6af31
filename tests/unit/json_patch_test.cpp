// The patch core (worker/patch/): diff and apply keep bytes exact over random docs and random
// edits, take every RFC 6902 operation and RFC 7386 merge patch, and refuse bad patches by name.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "json_gen.hpp"
#include "patch/forms.hpp"
#include "patch/json_patch.hpp"
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
    MESSAGE(versions << " versions: " << json_patches << " JSON Patches, " << merge_patches << " merge patches ("
                     << merge_chosen << " chosen), " << none << " without a patch");
    CHECK(versions >= 5000);
    CHECK(merge_chosen > 100);
    CHECK(none > 0);  // the generator made root objects with a key twice
    CHECK(none < versions / 20);
}
