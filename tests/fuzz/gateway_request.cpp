// Fuzz target: what a client sends the gateway. The first byte picks the input:
//   0  an HTTP request, parsed by Beast as the gateway does, then its target, token and cursor
//   1  a WebSocket client message
//   2  a token, verified under a fixed secret
//   3  a channel pattern and a channel (split at the first newline)
// Nothing may crash; what is accepted must hold up (a granted token's patterns are valid, a cursor
// reads back as it prints, a valid pattern matches only channels with its prefix).
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/access.hpp"
#include "gateway/request.hpp"
#include "gateway/session.hpp"

using namespace docsync;
using namespace docsync::gateway;
namespace http = boost::beast::http;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

const TokenVerifier& verifier() {
    static const TokenVerifier v("fuzz-secret-fuzz-secret-fuzz-secret-0123");
    return v;
}

void request(std::string_view bytes) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(16 * 1024);
    parser.eager(true);
    boost::beast::error_code ec;
    std::size_t used = 0;
    while (used < bytes.size() && !parser.is_done()) {
        auto n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
        if (ec == http::error::need_more) break;
        if (ec) return;
        if (n == 0) break;
        used += n;
    }
    if (!parser.is_header_done()) return;
    const auto& req = parser.get();
    auto target = parse_target(std::string_view(req.target().data(), req.target().size()));
    if (!target) return;
    auto token = request_token(req, *target);
    Caller caller = identify(verifier(), token, std::chrono::system_clock::now());
    Patterns open({"db:public:*"});
    for (const auto& channel : target->all("channel")) {
        if (!channel_error(channel).empty()) continue;
        Verdict v = authorize(caller, open, channel);
        check(v.allowed || v.status == 401 || v.status == 403);
    }
    if (auto it = req.find("Last-Event-ID"); it != req.end()) {
        std::string_view cursor(it->value().data(), it->value().size());
        for (std::size_t channels = 1; channels <= 3; ++channels)
            if (auto parsed = parse_cursor(cursor, channels)) check(parse_cursor(format_cursor(*parsed), channels) == parsed);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 4) {
        case 0:
            request(input);
            break;
        case 1: {
            auto m = parse_client_message(input);
            check(m.message.has_value() != !m.error.empty());
            if (m.message && m.message->type == ClientMessage::Type::Auth) check(!m.message->token.empty());
            check(!json_string(input).empty());
            break;
        }
        case 2: {
            auto r = verifier().verify(input, std::chrono::system_clock::now());
            check(r.grant.has_value() == r.refusal.code.empty());
            if (r.grant)
                for (const auto& p : r.grant->channels.list()) check(pattern_error(p).empty());
            break;
        }
        case 3: {
            auto nl = input.find('\n');
            std::string_view pattern = input.substr(0, nl);
            std::string_view channel = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
            if (pattern_error(pattern).empty() && pattern_matches(pattern, channel)) {
                std::string_view prefix = pattern.back() == '*' ? pattern.substr(0, pattern.size() - 1) : pattern;
                check(channel.substr(0, prefix.size()) == prefix);
            }
            break;
        }
    }
    return 0;
}
