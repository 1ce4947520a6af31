#pragma once
// Patches between two versions of a doc's JSON text (docs/patches.md): an RFC 6902 JSON Patch or
// an RFC 7386 merge patch, whichever is shorter, made so that applying it to the old text gives the
// new text byte for byte (key order, number spelling and string escapes included).
//
// Both texts are compact JSON as envelope/envelope.hpp's compact_json writes it. Nothing here
// recurses on the doc's depth without a bound: a doc nested deeper than kMaxDepth gets no patch
// (diff returns nullopt) and a patch against one is refused (apply throws).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace docsync::patch {

// Deeper docs are sent whole.
inline constexpr std::size_t kMaxDepth = 256;

enum class Form { JsonPatch, MergePatch };

struct Patch {
    Form form = Form::JsonPatch;
    // Compact JSON: an array of operations (JsonPatch) or an object (MergePatch).
    std::string text;
};

// The shorter patch that turns `from` into `to`, or nullopt when none exists that reproduces `to`
// byte for byte (a doc nested deeper than kMaxDepth, an object with a key twice) or when `from` and
// `to` are the same text. Both must be valid compact JSON (throws docsync::Error otherwise).
std::optional<Patch> diff(std::string_view from, std::string_view to);

// `base` with `patch` applied, as compact JSON text. Takes any valid RFC 6902 patch (add, remove,
// replace, move, copy, test) or RFC 7386 merge patch, not only what diff makes. Throws
// docsync::Error naming the operation and the path when the patch does not apply (a path that does
// not exist, a failed test, a malformed operation, a base deeper than kMaxDepth).
std::string apply(std::string_view base, const Patch& patch);

}  // namespace docsync::patch
