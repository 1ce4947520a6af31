// Channel patterns and HS256 tokens (libjwt verifies the signature).
#include "gateway/access.hpp"

#include <jwt.h>
#include <rapidjson/document.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "engine/channel.hpp"
#include "gateway/key_forms.hpp"

namespace docsync::gateway {

namespace {

// A byte a channel may hold as is: anything but a control byte, which docsync.channel() and
// build_channel write as %XX (engine/channel.hpp). A space is a plain byte: PostgreSQL prints one
// inside a timestamp key ("db:ev:2026-01-01 00%3A00%3A00"); in a URL it is written %20, Redis takes
// it inside one argument.
bool plain_byte(char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u != 0x7f;
}

struct JwtFree {
    void operator()(jwt_t* jwt) const { jwt_free(jwt); }
};
struct CharFree {
    void operator()(char* text) const { std::free(text); }
};

// The claim `name` as JSON text, or empty when the token has no such claim.
std::string claim_json(jwt_t* jwt, const char* name) {
    std::unique_ptr<char, CharFree> text(jwt_get_grants_json(jwt, name));
    return text ? std::string(text.get()) : std::string();
}

// A NumericDate claim (`exp`, `nbf`): seconds since the epoch, integer or not; nullopt when absent.
// Throws std::invalid_argument when present but not a number.
std::optional<double> date_claim(jwt_t* jwt, const char* name) {
    std::string json = claim_json(jwt, name);
    if (json.empty()) return std::nullopt;
    rapidjson::Document doc;
    doc.Parse(json.data(), json.size());
    if (doc.HasParseError() || !doc.IsNumber() || !std::isfinite(doc.GetDouble()))
        throw std::invalid_argument(std::string("its \"") + name + "\" claim is not a number of seconds since 1970");
    return doc.GetDouble();
}

std::chrono::system_clock::time_point at_seconds(double seconds) {
    // Clamped so that a far-future date cannot overflow the clock's representation: the system
    // clock counts int64 nanoseconds, which end in 2262 (9.22e9 s), so the clamp stays below that.
    // A date past it (exp 9999999999, the year 2286) still reads as far in the future.
    constexpr double limit = 9e9;  // the year 2255
    static_assert(limit * 1e9 < static_cast<double>(std::chrono::system_clock::duration::max().count()));
    seconds = std::fmax(-limit, std::fmin(limit, seconds));
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds)));
}

TokenVerifier::Result refuse(std::string code, std::string message) {
    TokenVerifier::Result result;
    result.refusal = {std::move(code), std::move(message)};
    return result;
}

}  // namespace

std::string channel_error(std::string_view channel) {
    if (channel.rfind("db:", 0) != 0) return "a docsync channel starts with \"db:\", as docsync.channel() spells it";
    if (channel.size() <= 3) return "the channel names no doc query after \"db:\"";
    if (channel.size() > kMaxChannelBytes)
        return "the channel is longer than " + std::to_string(kMaxChannelBytes) + " bytes";
    for (char c : channel)
        if (!plain_byte(c)) return "the channel holds a control byte; a channel writes one as %XX (docsync.channel())";
    // the query name, as define_query allows it: [A-Za-z0-9_], then '.' and '-' too
    std::string_view query = channel.substr(3, channel.find(':', 3) - 3);
    for (std::size_t i = 0; i < query.size(); ++i) {
        char c = query[i];
        bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (!word && !(i > 0 && (c == '.' || c == '-')))
            return "the channel's query name \"" + std::string(query.substr(0, 80)) +
                   "\" is not one define_query allows (letters, digits, '_', then '.' or '-')";
    }
    // its escapes as build_channel writes them: "db:country:FR%20" is no spelling of any doc
    ParsedChannel parsed;
    if (!parse_channel(channel, parsed))
        return "the channel is not spelled as docsync.channel() spells one: a % writes only %25, %3A, "
               "a control byte's %XX, or %00 alone for NULL (a space is written as is)";
    return key_forms().error(channel);  // its keys as PostgreSQL prints them (key_forms.hpp)
}

std::string pattern_error(std::string_view pattern) {
    if (pattern.empty()) return "the pattern is empty; write a channel (db:order:42) or a prefix ending in * (db:order:*)";
    auto star = pattern.find('*');
    if (star != std::string_view::npos && star != pattern.size() - 1)
        return "a * may only end a pattern (db:customer_orders:7:*), not stand inside it";
    if (star == std::string_view::npos) return channel_error(pattern);
    std::string_view prefix = pattern.substr(0, star);
    if (prefix.size() < 3 && std::string_view("db:").substr(0, prefix.size()) == prefix)
        return "a pattern covers docsync channels only: start it with \"db:\" (db:* for every channel)";
    if (prefix.rfind("db:", 0) != 0) return "a docsync pattern starts with \"db:\" (db:order:* or db:*)";
    if (prefix.size() > kMaxChannelBytes) return "the pattern is longer than " + std::to_string(kMaxChannelBytes) + " bytes";
    for (char c : prefix)
        if (!plain_byte(c)) return "the pattern holds a control byte; a channel writes one as %XX (docsync.channel())";
    return {};
}

bool pattern_matches(std::string_view pattern, std::string_view channel) {
    if (!pattern.empty() && pattern.back() == '*') return channel.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0;
    return pattern == channel;
}

bool Patterns::covers(std::string_view channel) const {
    for (const auto& p : patterns_)
        if (pattern_matches(p, channel)) return true;
    return false;
}

TokenVerifier::Result TokenVerifier::verify(std::string_view token, std::chrono::system_clock::time_point now) const {
    if (!enabled())
        return refuse("invalid_token", "this gateway accepts no tokens (it was started without --jwt-secret-file)");
    if (token.size() > kMaxTokenBytes)
        return refuse("invalid_token", "the token is longer than " + std::to_string(kMaxTokenBytes) + " bytes");
    if (token.find('\0') != std::string_view::npos) return refuse("invalid_token", "the token holds a NUL byte");
    std::string text(token);
    jwt_t* raw = nullptr;
    int rc = jwt_decode(&raw, text.c_str(), reinterpret_cast<const unsigned char*>(secret_.data()),
                        static_cast<int>(secret_.size()));
    std::unique_ptr<jwt_t, JwtFree> jwt(raw);
    if (rc != 0 || !jwt)
        return refuse("invalid_token",
                      "the token is not a JWT signed with HS256 under this gateway's secret (malformed, forged, or "
                      "signed with another key): mint it with the secret of --jwt-secret-file");
    // Only HS256: a token naming another algorithm (none, RS256 with the secret as a "public key")
    // is refused whatever the library made of it.
    if (jwt_get_alg(jwt.get()) != JWT_ALG_HS256)
        return refuse("invalid_token", std::string("the token is signed with ") + jwt_alg_str(jwt_get_alg(jwt.get())) +
                                           "; this gateway accepts HS256 only");
    Result result;
    try {
        auto exp = date_claim(jwt.get(), "exp");
        if (!exp) return refuse("invalid_token", "the token has no \"exp\" claim: every token must expire");
        auto expires = at_seconds(*exp);
        if (now >= expires) return refuse("token_expired", "the token has expired: mint a new one");
        if (auto nbf = date_claim(jwt.get(), "nbf"); nbf && now < at_seconds(*nbf))
            return refuse("token_not_yet_valid", "the token is not valid yet (its \"nbf\" lies ahead): check the clocks");
        std::string json = claim_json(jwt.get(), "channels");
        if (json.empty())
            return refuse("invalid_token",
                          "the token has no \"channels\" claim: list the channels it opens, e.g. [\"db:order:42\"]");
        rapidjson::Document doc;
        doc.Parse(json.data(), json.size());
        if (doc.HasParseError() || !doc.IsArray())
            return refuse("invalid_token", "the token's \"channels\" claim is not an array of channel patterns");
        if (doc.Size() > kMaxTokenPatterns)
            return refuse("invalid_token",
                          "the token's \"channels\" claim lists more than " + std::to_string(kMaxTokenPatterns) +
                              " patterns; use prefix patterns (db:customer_orders:7:*)");
        std::vector<std::string> patterns;
        for (const auto& item : doc.GetArray()) {
            if (!item.IsString())
                return refuse("invalid_token", "the token's \"channels\" claim holds a value that is not a string");
            std::string pattern(item.GetString(), item.GetStringLength());
            if (auto why = pattern_error(pattern); !why.empty())
                return refuse("invalid_token", "the token's \"channels\" claim holds \"" + pattern.substr(0, 80) +
                                                   "\": " + why);
            patterns.push_back(std::move(pattern));
        }
        result.grant = Grant{Patterns(std::move(patterns)), expires};
    } catch (const std::invalid_argument& e) {
        return refuse("invalid_token", std::string("the token is malformed: ") + e.what());
    }
    return result;
}

std::string read_secret_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot read the secret file \"" + path + "\" (" + std::strerror(errno) +
                                 "): give a file readable by the gateway holding at least 32 random bytes, e.g. made "
                                 "with: openssl rand -hex 32 > " + path);
    std::ostringstream text;
    text << in.rdbuf();
    std::string secret = text.str();
    if (secret.size() > 4096)
        throw std::runtime_error("the secret file \"" + path + "\" is larger than 4096 bytes: it should hold the key only");
    if (!secret.empty() && secret.back() == '\n') secret.pop_back();
    if (!secret.empty() && secret.back() == '\r') secret.pop_back();
    if (secret.size() < 32)
        throw std::runtime_error("the secret in \"" + path + "\" is " + std::to_string(secret.size()) +
                                 " bytes; HS256 needs at least 32: make one with: openssl rand -hex 32 > " + path);
    return secret;
}

}  // namespace docsync::gateway
