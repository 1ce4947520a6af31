// The gateway's routes: who may follow what, and each request's answer or hand-off (no I/O).
#include "gateway/router.hpp"

#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>

#include "common/log.hpp"
#include "gateway/assets.hpp"

namespace docsync::gateway {

namespace beast = boost::beast;
namespace http = beast::http;
using wall_clock = std::chrono::system_clock;

namespace {

constexpr const char* kTooManyConnections =
    "this gateway holds --max-connections connections: retry later, or raise --max-connections";

std::string_view header(const Request& req, http::field f) {
    auto it = req.find(f);
    return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

// Whether an If-None-Match header names `etag` (or is `*`).
bool etag_matches(std::string_view header_value, std::string_view etag) {
    while (!header_value.empty()) {
        auto comma = header_value.find(',');
        std::string_view item = header_value.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (item.rfind("W/", 0) == 0) item.remove_prefix(2);
        if (item == "*" || item == etag) return true;
        if (comma == std::string_view::npos) break;
        header_value.remove_prefix(comma + 1);
    }
    return false;
}

Response json(const Request& req, const ServerOptions& options, unsigned status, std::string body) {
    Response res(static_cast<http::status>(status), req.version());
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    add_cors(res, options, header(req, http::field::origin));
    res.body() = std::move(body);
    res.keep_alive(req.keep_alive());
    return res;
}

Routed answer(Response res) {
    Routed r;
    r.response = std::move(res);
    return r;
}

Routed refusal(const Request& req, const ServerOptions& options, unsigned status, std::string_view code,
               const std::string& message, std::string_view channel = {}) {
    Routed r = answer(error_answer(&req, options, status, code, message, channel));
    r.refused = status == 401 || status == 403;
    return r;
}

Routed preflight(const Request& req, const ServerOptions& options) {
    Response res(http::status::no_content, req.version());
    add_cors(res, options, header(req, http::field::origin));
    if (res.find(http::field::access_control_allow_origin) != res.end()) {
        res.set(http::field::access_control_allow_methods, "GET, HEAD, OPTIONS");
        res.set(http::field::access_control_allow_headers, "Authorization, Last-Event-ID, If-None-Match");
        res.set(http::field::access_control_max_age, "600");
    }
    res.keep_alive(req.keep_alive());
    return answer(std::move(res));
}

Routed doc(const Request& req, const Target& target, std::string channel, const RouteContext& ctx) {
    if (auto why = channel_error(channel); !why.empty())
        return refusal(req, ctx.options, 400, "bad_request", "/v1/docs/" + channel.substr(0, 200) + ": " + why);
    Caller caller = identify(ctx.verifier, request_token(req, target), ctx.now);
    Verdict verdict = authorize(caller, ctx.options.public_channels, channel);
    if (!verdict.allowed) return refusal(req, ctx.options, verdict.status, verdict.code, verdict.message, channel);
    Routed r;
    r.kind = Routed::Kind::ReadDoc;
    r.channel = std::move(channel);
    return r;
}

// The `patches` parameter of a stream's request (docs/patches.md): absent, 0 or false, whole docs
// only; 1 or true, patches to the clients that hold their base; else a refusal, naming the values.
std::optional<bool> patches_wanted(const Target& target) {
    auto value = target.first("patches");
    if (!value || *value == "0" || *value == "false") return false;
    if (*value == "1" || *value == "true") return true;
    return std::nullopt;
}

constexpr const char* kBadPatches = "patches= takes 1 (send patches when this client holds their base) or 0";

// The channels of an SSE request, each checked: the refusal of the first that is refused.
std::optional<Routed> check_channels(const Request& req, const std::vector<std::string>& channels,
                                     const Caller& caller, const ServerOptions& options) {
    if (channels.size() > options.max_channels)
        return refusal(req, options, 400, "too_many_channels",
                       std::to_string(channels.size()) + " channels asked for; one connection follows at most " +
                           std::to_string(options.max_channels) + " (--max-channels)");
    for (std::size_t i = 0; i < channels.size(); ++i) {
        std::string shown = channels[i].substr(0, 200);
        if (auto why = channel_error(channels[i]); !why.empty())
            return refusal(req, options, 400, "bad_request", "channel " + json_string(shown) + ": " + why, shown);
        if (std::find(channels.begin(), channels.begin() + static_cast<std::ptrdiff_t>(i), channels[i]) !=
            channels.begin() + static_cast<std::ptrdiff_t>(i))
            return refusal(req, options, 400, "bad_request", "channel " + shown + " is given twice", shown);
        Verdict verdict = authorize(caller, options.public_channels, channels[i]);
        if (!verdict.allowed) return refusal(req, options, verdict.status, verdict.code, verdict.message, channels[i]);
    }
    return std::nullopt;
}

Routed sse(const Request& req, const Target& target, const RouteContext& ctx) {
    auto channels = target.all("channel");
    if (channels.empty())
        return refusal(req, ctx.options, 400, "bad_request", "name the channels to follow: /v1/sse?channel=db:order:42");
    auto patches = patches_wanted(target);
    if (!patches) return refusal(req, ctx.options, 400, "bad_request", kBadPatches);
    Caller caller = identify(ctx.verifier, request_token(req, target), ctx.now);
    if (auto refused = check_channels(req, channels, caller, ctx.options)) return std::move(*refused);
    // Where the client is: Last-Event-ID (sent by EventSource when it reconnects), or the
    // last-event-id parameter of a client that opened a new stream.
    std::string cursor;
    if (auto it = req.find("Last-Event-ID"); it != req.end()) cursor = std::string(it->value());
    if (cursor.empty()) cursor = target.first("last-event-id").value_or("");
    std::vector<std::optional<DocVersion>> floors(channels.size());
    if (!cursor.empty()) {
        if (auto parsed = parse_cursor(cursor, channels.size())) floors = std::move(*parsed);
        else log_debug("gateway", "ignored a Last-Event-ID that is not a cursor of this stream's channels");
    }
    if (req.method() == http::verb::head) {
        // What a GET would open, without the stream: the header alone.
        Response res(http::status::ok, req.version());
        res.set(http::field::content_type, "text/event-stream");
        res.set(http::field::cache_control, "no-cache");
        add_cors(res, ctx.options, header(req, http::field::origin));
        res.keep_alive(req.keep_alive());
        Routed r = answer(std::move(res));
        r.as_is = true;
        return r;
    }
    Routed r;
    r.kind = Routed::Kind::Sse;
    for (const auto& c : channels)
        if (needs_token(ctx.options.public_channels, c) && caller.grant) r.expires = caller.grant->expires;
    r.channels = std::move(channels);
    r.floors = std::move(floors);
    r.patches = *patches;
    return r;
}

Routed websocket(const Request& req, const Target& target, const RouteContext& ctx) {
    if (!beast::websocket::is_upgrade(req))
        return refusal(req, ctx.options, 426, "upgrade_required", "/v1/ws is a WebSocket: connect with a WebSocket client");
    auto patches = patches_wanted(target);
    if (!patches) return refusal(req, ctx.options, 400, "bad_request", kBadPatches);
    // A refused token is told over the WebSocket (an error message, then a close): a browser
    // sees nothing of an HTTP answer to its upgrade.
    Routed r;
    r.kind = Routed::Kind::WebSocket;
    r.patches = *patches;
    r.caller = identify(ctx.verifier, request_token(req, target), ctx.now);
    r.refused = r.caller.refusal.has_value();
    return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Who may follow what.

std::optional<std::string> request_token(const Request& req, const Target& target) {
    if (auto it = req.find(http::field::authorization); it != req.end()) {
        if (auto token = bearer_token(std::string_view(it->value().data(), it->value().size()))) return token;
    }
    return target.first("token");
}

Caller identify(const TokenVerifier& verifier, const std::optional<std::string>& token, wall_clock::time_point now) {
    Caller caller;
    if (!token) return caller;
    auto result = verifier.verify(*token, now);
    if (result.grant) caller.grant = std::move(result.grant);
    else caller.refusal = std::move(result.refusal);
    return caller;
}

Verdict authorize(const Caller& caller, const Patterns& public_channels, std::string_view channel) {
    Verdict v;
    if (caller.refusal) {
        v.status = 401;
        v.code = caller.refusal->code;
        v.message = caller.refusal->message;
        return v;
    }
    if (public_channels.covers(channel) || (caller.grant && caller.grant->channels.covers(channel))) {
        v.allowed = true;
        return v;
    }
    std::string shown(channel.substr(0, 200));
    if (caller.grant) {
        v.status = 403;
        v.code = "forbidden";
        v.message = "the token does not open " + shown +
                    ": mint one whose \"channels\" claim names it (or a pattern such as db:order:*)";
    } else {
        v.status = 401;
        v.code = "missing_token";
        v.message = shown + " is not public: present a token, as the header Authorization: Bearer TOKEN or the "
                            "query parameter token=TOKEN";
    }
    return v;
}

std::string error_json(std::string_view code, std::string_view message, std::string_view channel) {
    std::string out = "{\"error\":" + json_string(code);
    if (!channel.empty()) out += ",\"channel\":" + json_string(channel);
    out += ",\"message\":" + json_string(message) + "}";
    return out;
}

void add_cors(http::fields& fields, const ServerOptions& options, std::string_view origin) {
    if (origin.empty()) return;
    bool any = std::find(options.allow_origins.begin(), options.allow_origins.end(), "*") != options.allow_origins.end();
    bool listed = std::find(options.allow_origins.begin(), options.allow_origins.end(), origin) != options.allow_origins.end();
    if (!any && !listed) return;
    fields.set(http::field::access_control_allow_origin, any ? beast::string_view("*") : beast::string_view(origin.data(), origin.size()));
    fields.set(http::field::access_control_expose_headers, "ETag");
    if (!any) fields.set(http::field::vary, "Origin");
}

// ---------------------------------------------------------------------------------------------
// Routes and answers.

Response error_answer(const Request* req, const ServerOptions& options, unsigned status, std::string_view code,
                      const std::string& message, std::string_view channel) {
    Request none;
    Response res = json(req ? *req : none, options, status, error_json(code, message, channel));
    if (!req) res.keep_alive(false);
    if (status == 401)
        res.set(http::field::www_authenticate,
                "Bearer error=\"" + std::string(code == "missing_token" ? "invalid_request" : "invalid_token") + "\"");
    return res;
}

Routed route_request(const Request& req, const RouteContext& ctx) {
    auto target = parse_target(std::string_view(req.target().data(), req.target().size()));
    if (!target) return refusal(req, ctx.options, 400, "bad_request", "the request's target holds a malformed %-escape");
    if (ctx.overflow && target->path != "/healthz") {
        // Past --max-connections only /healthz is answered.
        Response res = json(req, ctx.options, 503, error_json("too_many_connections", kTooManyConnections));
        res.set(http::field::retry_after, "5");
        res.keep_alive(false);
        Routed r = answer(std::move(res));
        r.refused_connection = true;
        return r;
    }
    if (req.method() == http::verb::options) return preflight(req, ctx.options);
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
        Response res = json(req, ctx.options, 405, error_json("method_not_allowed", "only GET is served here"));
        res.set(http::field::allow, "GET, HEAD, OPTIONS");
        return answer(std::move(res));
    }
    const std::string& path = target->path;
    if (path == "/healthz") {
        Routed r;
        r.kind = Routed::Kind::Health;
        return r;
    }
    if (path == "/v1/sse") return sse(req, *target, ctx);
    if (path == "/v1/ws") return websocket(req, *target, ctx);
    if (path.rfind("/v1/docs/", 0) == 0) return doc(req, *target, path.substr(9), ctx);
    if (const Asset* asset = find_asset(path)) {
        Response res(http::status::ok, req.version());
        res.set(http::field::content_type, beast::string_view(asset->content_type.data(), asset->content_type.size()));
        res.set(http::field::cache_control, "no-cache");
        res.set("X-Content-Type-Options", "nosniff");
        res.body() = std::string(asset->body);
        res.keep_alive(req.keep_alive());
        return answer(std::move(res));
    }
    return refusal(req, ctx.options, 404, "not_found",
                   "no such path; the gateway serves /v1/docs/{channel}, /v1/sse?channel=…, /v1/ws, /healthz and /");
}

Response doc_answer(const Request& req, const ServerOptions& options, const std::string& channel, const DocPtr& doc,
                    const std::string& error) {
    if (!error.empty()) return error_answer(&req, options, 503, "unavailable", "Redis cannot be read now: " + error, channel);
    if (!doc)
        return error_answer(&req, options, 404, "not_found",
                            "docsync holds no doc for " + channel.substr(0, 200) +
                                " yet; the worker has been asked to compute it: retry shortly, or "
                                "follow it with /v1/sse or /v1/ws to get it when it comes",
                            channel);
    std::string etag = "\"" + doc->version_text + "\"";
    Response res = json(req, options, 200, {});
    res.set(http::field::etag, etag);
    res.set(http::field::cache_control, "no-cache");
    if (etag_matches(header(req, http::field::if_none_match), etag)) {
        res.result(http::status::not_modified);
        res.erase(http::field::content_type);
        return res;
    }
    res.body() = doc->envelope;
    return res;
}

Response health_answer(const Request& req, const ServerOptions& options, bool up, const std::string& why,
                       const ServerStats& s, const HubStats& h) {
    std::string body = std::string("{\"status\":\"") + (up ? "ok" : "unavailable") + "\",\"redis\":\"" +
                       (up ? "up" : "down") + "\"";
    if (!up) body += ",\"redis_error\":" + json_string(why);
    auto field = [&body](const char* name, std::uint64_t value) {
        body.append(",\"").append(name).append("\":").append(std::to_string(value));
    };
    field("connections", s.connections);
    field("sse_streams", s.sse_streams);
    field("websockets", s.websockets);
    field("channels", h.channels);
    field("followers", h.followers);
    field("slow_disconnects", s.slow_disconnects);
    field("expired_disconnects", s.expired_disconnects);
    field("idle_disconnects", s.idle_disconnects);
    field("refused_connections", s.refused_connections);
    field("docs_received", h.messages);
    field("older_docs_dropped", h.stale);
    field("queued_docs_replaced", h.replaced);
    field("queue_overflows", h.overflowed);
    field("missing_docs", h.missing);
    field("deferred_channels", h.deferred);
    field("warms_deferred", h.warms_dropped);
    field("patches_received", h.patches_received);
    field("patches_applied", h.patches_applied);
    field("patch_base_rereads", h.patch_base_rereads);
    field("patches_refused", h.patches_refused);
    field("patches_sent", s.patches_sent);
    field("whole_docs_to_patch_clients", s.whole_docs_to_patch_clients);
    body += "}";
    return json(req, options, up ? 200 : 503, std::move(body));
}

}  // namespace docsync::gateway
