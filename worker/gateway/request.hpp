#pragma once
// The pure parts of reading a client's request, apart from the sockets (and so unit-tested and
// fuzzed alone): the target's path and query, the bearer token, the SSE cursor, and the JSON messages
// a WebSocket client sends. HTTP itself is parsed by Boost.Beast.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/lsn.hpp"

namespace docsync::gateway {

// A request target split at `?`, both halves percent-decoded (`+` in the query is a space, as
// browsers encode forms). nullopt when an escape is malformed or decodes to a NUL byte.
struct Target {
    std::string path;
    std::vector<std::pair<std::string, std::string>> query;  // in order; a name may repeat
    // The values of `name`, in order.
    std::vector<std::string> all(std::string_view name) const;
    // The first value of `name`, if any.
    std::optional<std::string> first(std::string_view name) const;
};
std::optional<Target> parse_target(std::string_view target);
// Percent-decoding; `plus_is_space` for query strings. nullopt when malformed or a NUL appears.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

// The token of an `Authorization: Bearer TOKEN` header (scheme case-insensitive); nullopt when the
// header is of another scheme or empty.
std::optional<std::string> bearer_token(std::string_view authorization);

// An SSE stream's cursor: one entry per channel of the stream, in the request's order, each a version
// ("G/X/Y") or "-" (nothing delivered yet), joined with ",". For a one-channel stream it is that
// channel's version alone.
std::string format_cursor(const std::vector<std::optional<DocVersion>>& versions);
// The versions of a cursor; nullopt when it is malformed or has not `channels` entries (then the
// client's position is unknown and every channel starts from its retained doc).
std::optional<std::vector<std::optional<DocVersion>>> parse_cursor(std::string_view cursor, std::size_t channels);

// A message from a WebSocket client.
struct ClientMessage {
    enum class Type { Subscribe, Unsubscribe, Auth };
    Type type = Type::Subscribe;
    std::string channel;                // subscribe, unsubscribe
    std::optional<DocVersion> after;    // subscribe: versions at or below it are skipped
    std::string token;                  // auth
};
// Parses one message; on failure `error` says what is wrong (for the error message back).
struct ClientMessageResult {
    std::optional<ClientMessage> message;
    std::string error;
};
ClientMessageResult parse_client_message(std::string_view text);

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

}  // namespace docsync::gateway
