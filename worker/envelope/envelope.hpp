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

// What a sink reads back from an envelope it wrote: the channel, the version, and where the doc's
// JSON text lies in the envelope (never copied: a sink reads every line of its file at start).
struct EnvelopeHead {
    std::string channel;
    DocVersion version;
    std::size_t doc_at = 0;
    std::size_t doc_size = 0;
};

// Parses an envelope; nullopt when the text is not one (not JSON, or a field is missing or of the
// wrong type). Used to read back what a sink holds at start.
std::optional<EnvelopeHead> parse_envelope(std::string_view text);

// The doc and version of an envelope, as Publisher::read_back reports them (a null doc is nullopt);
// nullopt when the text is not an envelope of `channel`.
std::optional<RetainedDoc> retained_doc(std::string_view text, std::string_view channel);

}  // namespace docsync::publish
