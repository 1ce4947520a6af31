// patch_vectors: test vectors of the patch core (worker/patch/) for other implementations of the
// patch formats of docs/patches.md, such as docsync-client.js's tests.
//
//   patch_vectors SEED COUNT [--ordinary] [--all-forms]
//
// Prints COUNT lines of JSON, one per version of random docs edited at random, made by the same
// generator as the property test (tests/unit/json_gen.hpp), deterministic for SEED:
//
//   {"base":<doc>,"next":<doc>,"form":"patch"|"merge","patch":<the patch>}
//
// `base` and `next` are the two versions' compact JSON texts, `patch` the patch diff() makes from
// base to next (an RFC 6902 array when form is "patch", an RFC 7386 object when "merge"). Applying
// it to base gives next: byte for byte with the patch core, as equal values with a JSON parser. A doc
// changes one to three times between versions and is made anew every 25 versions; versions with no
// patch (a root object holding a key twice) are left out.
//
//   --ordinary   only numbers a double reads without overflow or a lost digit of an integer (no
//                1e400, no 30-digit integers, no 2^53+1, no -0) and no key twice in an object, for
//                a reader that compares parsed values (JSON.parse)
//   --all-forms  a line for each form the patch core can make for the version, not only the shorter
//
// Build: cmake --build build/dev --target patch_vectors; run: build/dev/patch_vectors 1 1000.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "patch/forms.hpp"
#include "patch/json_patch.hpp"
#include "patch/json_tree.hpp"
#include "unit/json_gen.hpp"

namespace {

int usage() {
    std::cerr << "usage: patch_vectors SEED COUNT [--ordinary] [--all-forms]\n";
    return 2;
}

bool read_number(const char* text, std::uint64_t& out) {
    char* end = nullptr;
    out = std::strtoull(text, &end, 10);
    return *text != '\0' && *end == '\0';
}

void print(const std::string& base, const std::string& next, std::string_view form,
           const std::string& patch) {
    std::cout << "{\"base\":" << base << ",\"next\":" << next << ",\"form\":\"" << form
              << "\",\"patch\":" << patch << "}\n";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) return usage();
    std::uint64_t seed = 0, count = 0;
    if (!read_number(argv[1], seed) || !read_number(argv[2], count)) return usage();
    docsync::testing::JsonGenOptions options;
    bool all_forms = false;
    for (int i = 3; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--ordinary")
            options.ordinary = true;
        else if (arg == "--all-forms")
            all_forms = true;
        else
            return usage();
    }
    docsync::testing::JsonGen gen(seed, options);
    docsync::testing::JsonValue doc = gen.doc();
    std::uint64_t printed = 0;
    for (std::uint64_t version = 1; printed < count; ++version) {
        if (version % 25 == 0) doc = gen.doc();
        docsync::testing::JsonValue next = doc;
        gen.edit(next);
        std::string base = doc.text(), text = next.text();
        doc = std::move(next);
        if (!all_forms) {
            auto patch = docsync::patch::diff(base, text);
            if (!patch) continue;
            print(base, text, patch->form == docsync::patch::Form::JsonPatch ? "patch" : "merge",
                  patch->text);
            ++printed;
            continue;
        }
        docsync::patch::Tree from(base, "the base"), to(text, "the next version");
        auto json = docsync::patch::json_patch_between(from, to);
        auto merge = docsync::patch::merge_patch_between(from, to);
        if (base == text || (!json && !merge)) continue;
        if (json && printed < count) {
            print(base, text, "patch", *json);
            ++printed;
        }
        if (merge && printed < count) {
            print(base, text, "merge", *merge);
            ++printed;
        }
    }
    return 0;
}
