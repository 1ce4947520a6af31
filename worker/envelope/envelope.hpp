#pragma once
// The published form of a doc, shared by every sink: one JSON object per doc,
//   {"channel":"db:order:42","doc":{…}|null,"generation":1,"lsn":"0/16B3F28"}
// The doc is embedded as JSON (compacted, never re-quoted as a string), so a JSONL line and a Redis
// message are the same bytes and a client orders them by (generation, lsn).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/lsn.hpp"
#include "engine/seams.hpp"

namespace docsync::publish {

// Re-writes JSON text in compact form: no whitespace between tokens (so no raw newline can reach a
// JSONL line), numbers kept digit for digit, strings re-escaped. Throws docsync::Error (permanent)
// naming the offset when `json` is not exactly one valid JSON value.
std::string compact_json(std::string_view json);

// The envelope of one doc. `doc` is JSON text (validated and compacted here); nullopt writes null.
// Throws docsync::Error (permanent) when the doc is not valid JSON.
std::string make_envelope(std::string_view channel, const std::optional<std::string>& doc, DocVersion version);

// What an envelope carries (docs/patches.md): the whole doc, or a patch from `base` to its version.
enum class EnvelopeKind { Doc, JsonPatch, MergePatch };

// The envelope of a patch from the version `base` to `version` (docs/patches.md):
//   {"channel":"db:board:7","patch":[…],"base_generation":3,"base_lsn":"0/16B3E00","generation":3,"lsn":"0/16B3F28"}
// with "merge":{…} in place of "patch":[…] for a merge patch. `patch_text` is compact JSON as
// docsync::patch::diff makes it (checked here: throws docsync::Error when it is not valid JSON of the
// form's type). Ends with "generation":G,"lsn":"X/Y"} as every envelope does.
std::string make_patch_envelope(std::string_view channel, EnvelopeKind kind, std::string_view patch_text,
                                DocVersion base, DocVersion version);

// What a sink reads back from an envelope it wrote: the channel, the version, what it carries, and
// where the doc's (or the patch's) JSON text lies in the envelope (never copied: a sink reads every
// line of its file at start).
struct EnvelopeHead {
    std::string channel;
    DocVersion version;
    EnvelopeKind kind = EnvelopeKind::Doc;
    // A patch's base version; nullopt for a whole doc.
    std::optional<DocVersion> base;
    std::size_t doc_at = 0;    // the doc's JSON text, or the patch's (kind != Doc)
    std::size_t doc_size = 0;
    bool is_patch() const { return kind != EnvelopeKind::Doc; }
};

// Parses an envelope, a whole doc's or a patch's; nullopt when the text is not one (not JSON, or a
// field is missing or of the wrong type, or it holds none or more than one of doc, patch, merge).
std::optional<EnvelopeHead> parse_envelope(std::string_view text);

// The doc and version of a whole doc's envelope, as Publisher::read_back reports them (a null doc is
// nullopt); nullopt when the text is not a whole doc's envelope of `channel` (a patch's included).
std::optional<RetainedDoc> retained_doc(std::string_view text, std::string_view channel);

}  // namespace docsync::publish
