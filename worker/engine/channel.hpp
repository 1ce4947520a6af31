#pragma once
// Channel names: db:<query>:<v1>:<v2>…
//
// The specification, shared with the extension's docsync.channel() (tests/channel_vectors.tsv holds
// the test vectors both sides check):
//   - the query name is a valid channel segment already (define_query refuses anything but
//     [A-Za-z0-9_] and '.', '-' after the first character), so it is written as is;
//   - each value is its PostgreSQL text form with '%' written "%25", ':' written "%3A" and every
//     control byte (0x00–0x1F, 0x7F) written "%XX" (upper-case hex); every other byte is kept;
//   - SQL NULL is written "%00", which no text value can produce (PostgreSQL text holds no NUL byte);
//   - segments are joined with ':'.
// Escaping is injective, so two different docs never share a channel.

#include <string>
#include <string_view>

#include "engine/seams.hpp"

namespace docsync {

// Channels are at most this long: the worker refuses a longer one before reading it (remembering
// and logging only its length and a prefix), and docsync-gateway refuses to follow one.
inline constexpr std::size_t kMaxChannelBytes = 1024;

std::string build_channel(std::string_view query, const SqlArgs& values);

// The inverse of build_channel: the query name and the values of a channel, or false when `channel`
// is not a well-formed db: channel (no "db:" prefix, an empty query name, a bad %XX escape, or an
// escape build_channel never writes). For every query and values,
// parse_channel(build_channel(q, v)) yields q and v again.
struct ParsedChannel {
    std::string query;
    SqlArgs values;
};
bool parse_channel(std::string_view channel, ParsedChannel& out);

}  // namespace docsync
