#pragma once
// Who may follow which channel: channel patterns, and the HS256 tokens that carry them.
//
// A pattern is an exact channel (`db:order:42`) or a prefix ending in `*` (`db:customer_orders:7:*`
// matches every channel that starts with `db:customer_orders:7:`). The gateway is deny by default: a
// channel is followed only when a `--public` pattern or the client's token names it.
//
// A token is a JWT signed with HS256 under the gateway's secret (`--jwt-secret-file`), with the claims
//   exp       required: seconds since the epoch after which the token is refused
//   nbf       optional: seconds since the epoch before which the token is refused
//   channels  required: an array of patterns
// Verification goes through libjwt; nothing here computes a signature.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/channel.hpp"

namespace docsync::gateway {

// Channels are at most kMaxChannelBytes long (engine/channel.hpp: the worker's own limit).
// Tokens are at most this long; a longer one is refused before it is decoded.
inline constexpr std::size_t kMaxTokenBytes = 8192;
// A token names at most this many patterns.
inline constexpr std::size_t kMaxTokenPatterns = 1000;

// Empty when `channel` can be followed through the gateway: it starts with `db:`, is at most
// kMaxChannelBytes long and holds no byte below 0x21 or 0x7f; else what is wrong, for a message.
std::string channel_error(std::string_view channel);
// Empty when `pattern` is a valid pattern: a channel (as above), or a prefix of one followed by one
// `*` at the very end (`db:*` included); else what is wrong and how to write it.
std::string pattern_error(std::string_view pattern);
// Whether `pattern` (valid) covers `channel`.
bool pattern_matches(std::string_view pattern, std::string_view channel);

class Patterns {
public:
    Patterns() = default;
    explicit Patterns(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}
    bool covers(std::string_view channel) const;
    bool empty() const { return patterns_.empty(); }
    const std::vector<std::string>& list() const { return patterns_; }

private:
    std::vector<std::string> patterns_;
};

// A verified token.
struct Grant {
    Patterns channels;
    std::chrono::system_clock::time_point expires;
};

// Why a token was refused: the HTTP status (401) and a code for the JSON error, with a message that
// says what to fix.
struct TokenRefusal {
    std::string code;     // "invalid_token", "token_expired", "token_not_yet_valid"
    std::string message;  // one sentence
};

class TokenVerifier {
public:
    // No secret: every token is refused (only --public channels can be followed).
    TokenVerifier() = default;
    explicit TokenVerifier(std::string secret) : secret_(std::move(secret)) {}
    bool enabled() const { return !secret_.empty(); }

    // The grant of a valid token, or the refusal. `now` is the time to check `exp` and `nbf` against.
    struct Result {
        std::optional<Grant> grant;
        TokenRefusal refusal;
    };
    Result verify(std::string_view token, std::chrono::system_clock::time_point now) const;

private:
    std::string secret_;
};

// The secret in `path`: the file's bytes with one trailing newline removed. Throws SettingError-like
// std::runtime_error naming the file and the fix when it cannot be read, is empty, or is shorter
// than 32 bytes (HS256 needs a key at least as long as its hash).
std::string read_secret_file(const std::string& path);

}  // namespace docsync::gateway
