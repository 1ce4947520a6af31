// Fuzz target: the patch core (worker/patch/). Patches arrive from Redis and from any program that
// writes envelopes, so apply() must take arbitrary bytes as base and patch: no crash, no read out of
// bounds, no stack overflow; either a docsync::Error or a result that is one JSON value. Where the
// two parts are JSON, their compact forms also go through diff(): applying its patch to the first
// gives the second byte for byte.
//
// Input: one byte choosing the form (even: JSON Patch, odd: merge patch), then the base, a NUL byte,
// then the patch (or the second doc).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "patch/json_patch.hpp"
#include "patch/json_tree.hpp"

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

std::optional<std::string> compact(std::string_view text) {
    try {
        docsync::patch::Tree tree(text, "the text");
        std::string out;
        tree.write(0, out);
        return out;
    } catch (const docsync::Error&) {
        return std::nullopt;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    using docsync::patch::Form;
    Form form = data[0] % 2 == 0 ? Form::JsonPatch : Form::MergePatch;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::size_t cut = input.find('\0');
    std::string_view base = input.substr(0, cut);
    std::string_view second = cut == std::string_view::npos ? std::string_view{} : input.substr(cut + 1);

    try {
        std::string result = docsync::patch::apply(base, docsync::patch::Patch{form, std::string(second)});
        std::optional<std::string> again = compact(result);
        check(again && *again == result);  // one value, written compact
    } catch (const docsync::Error&) {
    }

    std::optional<std::string> from = compact(base), to = compact(second);
    if (!from || !to) return 0;
    std::optional<docsync::patch::Patch> patch = docsync::patch::diff(*from, *to);
    if (patch) check(docsync::patch::apply(*from, *patch) == *to);
    return 0;
}
