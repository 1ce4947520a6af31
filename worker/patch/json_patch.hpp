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
// byte for byte (a doc nested deeper than kMaxDepth, a root object with a key twice; a nested one
// is replaced whole) or when `from` and `to` are the same text. Both must be valid JSON (throws
// docsync::Error otherwise); the round trip is byte for byte for compact texts.
std::optional<Patch> diff(std::string_view from, std::string_view to);

// `base` with `patch` applied, as compact JSON text. Takes any valid RFC 6902 patch (add, remove,
// replace, move, copy, test) or RFC 7386 merge patch, not only what diff makes. Throws
// docsync::Error naming the operation and the path when the patch does not apply (a path that does
// not exist, a failed test, a malformed operation, a base deeper than kMaxDepth or a result that
// would be, `copy`s that together copy more bytes than the base and the patch hold). What the patch
// does not touch keeps the base's text; a new member goes last, its key written as PostgreSQL's
// escape_json writes it (JSON Patch) or as the patch spells it (merge patch); keys are matched
// decoded, a repeated key by its last occurrence (docs/patches.md, "What a patch is").
std::string apply(std::string_view base, const Patch& patch);

}  // namespace docsync::patch
