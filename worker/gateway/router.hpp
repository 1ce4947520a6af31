#pragma once
// The gateway's routes as functions, apart from the sockets: a parsed request (with what the
// connection knows: its seat, the clock) becomes an answer to write now, or a hand-off the session
// carries out (read a doc, probe Redis, open an SSE stream or a WebSocket), and the answers of the
// hand-offs that read something are built here too. The HTTP session (server.cpp) only reads and
// writes; the router's unit tests need no socket (tests/unit/gateway_router_test.cpp).
//
//   GET /v1/docs/{channel}   the retained doc; ETag = its version, If-None-Match answers 304
//   GET /v1/sse?channel=…    Server-Sent Events (hand-off)
//   GET /v1/ws               WebSocket (hand-off)
//   GET /healthz             Redis reachability and the gateway's counts
//   GET /, /docsync-client.js  the demo page and the client library
//   OPTIONS                  CORS preflight; anything else but GET and HEAD is 405

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gateway/session.hpp"

namespace docsync::gateway {

using Response = boost::beast::http::response<boost::beast::http::string_body>;

// What the connection knows besides the request.
struct RouteContext {
    const ServerOptions& options;
    const TokenVerifier& verifier;
    bool overflow = false;  // the connection holds one of the seats past --max-connections
    std::chrono::system_clock::time_point now;
};

// What to do with one request.
struct Routed {
    enum class Kind {
        Answer,     // write `response`
        ReadDoc,    // read `channel` from Redis, then write doc_answer()
        Health,     // probe Redis, then write health_answer()
        Sse,        // hand the socket to an SSE stream of `channels` from `floors` until `expires`
        WebSocket,  // hand the socket to a WebSocket session of `caller`
    };
    Kind kind = Kind::Answer;
    Response response;  // Answer (keep-alive set)
    bool as_is = false; // Answer: its header goes out as it is (HEAD /v1/sse: no Content-Length)
    std::string channel;
    std::vector<std::string> channels;
    std::vector<std::optional<DocVersion>> floors;
    std::chrono::system_clock::time_point expires = std::chrono::system_clock::time_point::max();
    Caller caller;
    bool patches = false;             // Sse, WebSocket: the client asked for patches (patches=1)
    bool refused = false;             // a 401/403 answer, or a refused token at a WebSocket upgrade
    bool refused_connection = false;  // answered 503 for being past --max-connections
};

Routed route_request(const Request& req, const RouteContext& ctx);

// The answer to GET /v1/docs/{channel} once read: the doc (200, or 304 for a matching
// If-None-Match), 404 when Redis holds none, 503 naming the error when Redis could not be read.
Response doc_answer(const Request& req, const ServerOptions& options, const std::string& channel, const DocPtr& doc,
                    const std::string& error);
// The answer to /healthz: 200 with the counts when Redis answered, 503 naming why not.
Response health_answer(const Request& req, const ServerOptions& options, bool up, const std::string& why,
                       const ServerStats& server, const HubStats& hub);
// An error answer ({"error":…}); 401 carries WWW-Authenticate. `req` may be nullptr (a request that
// could not be parsed).
Response error_answer(const Request* req, const ServerOptions& options, unsigned status, std::string_view code,
                      const std::string& message, std::string_view channel = {});

}  // namespace docsync::gateway
