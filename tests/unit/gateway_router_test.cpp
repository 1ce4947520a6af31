// The gateway's router without sockets: each request's answer or hand-off, and the answers built
// once a doc was read or Redis probed.
#include <doctest/doctest.h>

#include <jwt.h>

#include <boost/beast/http.hpp>

#include "gateway/hub.hpp"
#include "gateway/router.hpp"

using namespace docsync;
using namespace docsync::gateway;
namespace http = boost::beast::http;

namespace {

const std::string kSecret = "a-secret-of-at-least-thirty-two-bytes!!";

std::string mint(const std::string& channels_json) {
    jwt_t* jwt = nullptr;
    jwt_new(&jwt);
    jwt_add_grants_json(jwt, ("{\"channels\":" + channels_json + ",\"exp\":4102444800}").c_str());
    jwt_set_alg(jwt, JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(kSecret.data()), static_cast<int>(kSecret.size()));
    char* text = jwt_encode_str(jwt);
    std::string token = text ? text : "";
    std::free(text);
    jwt_free(jwt);
    return token;
}

Request get(const std::string& target, http::verb verb = http::verb::get) {
    Request req(verb, target, 11);
    req.set(http::field::host, "gateway");
    return req;
}

struct Router {
    ServerOptions options;
    TokenVerifier verifier{kSecret};
    Router() { options.public_channels = Patterns({"db:menu:*"}); }
    Routed route(const Request& req, bool overflow = false) {
        return route_request(req, RouteContext{options, verifier, overflow, std::chrono::system_clock::now()});
    }
};

std::string error_of(const Response& res) {
    auto at = res.body().find("\"error\":\"");
    if (at == std::string::npos) return "";
    at += 9;
    return res.body().substr(at, res.body().find('"', at) - at);
}

}  // namespace

TEST_CASE("gateway router: paths, methods and the seats past --max-connections") {
    Router r;
    auto unknown = r.route(get("/nowhere"));
    CHECK(unknown.kind == Routed::Kind::Answer);
    CHECK(unknown.response.result_int() == 404);
    CHECK(error_of(unknown.response) == "not_found");
    auto post = r.route(get("/healthz", http::verb::post));
    CHECK(post.response.result_int() == 405);
    CHECK(post.response[http::field::allow] == "GET, HEAD, OPTIONS");
    CHECK(r.route(get("/healthz")).kind == Routed::Kind::Health);
    CHECK(r.route(get("/healthz"), true).kind == Routed::Kind::Health);  // answered past the limit
    auto full = r.route(get("/v1/docs/db:menu:1"), true);
    CHECK(full.response.result_int() == 503);
    CHECK(full.refused_connection);
    CHECK_FALSE(full.response.keep_alive());
    CHECK(r.route(get("/v1/docs/db:menu:%zz")).response.result_int() == 400);
    auto page = r.route(get("/"));
    CHECK(page.response.result_int() == 200);
    CHECK(page.response[http::field::content_type].starts_with("text/html"));
}

TEST_CASE("gateway router: docs are read only for channels the caller may follow") {
    Router r;
    auto open = r.route(get("/v1/docs/db:menu:1"));
    CHECK(open.kind == Routed::Kind::ReadDoc);
    CHECK(open.channel == "db:menu:1");
    auto closed = r.route(get("/v1/docs/db:order:42"));
    CHECK(closed.response.result_int() == 401);
    CHECK(closed.refused);
    CHECK(error_of(closed.response) == "missing_token");
    CHECK(closed.response[http::field::www_authenticate] == "Bearer error=\"invalid_request\"");
    auto other = r.route(get("/v1/docs/db:order:42?token=" + mint("[\"db:user:*\"]")));
    CHECK(other.response.result_int() == 403);
    CHECK(r.route(get("/v1/docs/db:order:42?token=" + mint("[\"db:order:*\"]"))).kind == Routed::Kind::ReadDoc);
    auto bad = r.route(get("/v1/docs/db:order:42?token=nonsense"));
    CHECK(bad.response.result_int() == 401);
    CHECK(bad.response[http::field::www_authenticate] == "Bearer error=\"invalid_token\"");
}

TEST_CASE("gateway router: SSE and WebSocket requests are handed off, checked first") {
    Router r;
    auto token = mint("[\"db:order:*\"]");
    auto sse = r.route(get("/v1/sse?channel=db:order:1&channel=db:menu:2&token=" + token));
    REQUIRE(sse.kind == Routed::Kind::Sse);
    CHECK(sse.channels == std::vector<std::string>{"db:order:1", "db:menu:2"});
    CHECK(sse.floors.size() == 2);
    CHECK(sse.expires == std::chrono::system_clock::time_point(std::chrono::seconds(4102444800)));
    auto resumed = get("/v1/sse?channel=db:menu:2");
    resumed.set("Last-Event-ID", "1/0/10");
    auto again = r.route(resumed);
    REQUIRE(again.kind == Routed::Kind::Sse);
    CHECK(again.expires == std::chrono::system_clock::time_point::max());  // public: no token to expire
    REQUIRE(again.floors.front());
    CHECK(format_version(*again.floors.front()) == "1/0/10");
    CHECK(r.route(get("/v1/sse")).response.result_int() == 400);
    CHECK(error_of(r.route(get("/v1/sse?channel=db:menu:1&channel=db:menu:1")).response) == "bad_request");
    r.options.max_channels = 1;
    CHECK(error_of(r.route(get("/v1/sse?channel=db:menu:1&channel=db:menu:2")).response) == "too_many_channels");
    auto head = r.route(get("/v1/sse?channel=db:menu:1", http::verb::head));
    CHECK(head.kind == Routed::Kind::Answer);
    CHECK(head.as_is);
    CHECK(head.response[http::field::content_type] == "text/event-stream");

    CHECK(r.route(get("/v1/ws")).response.result_int() == 426);
    auto upgrade = get("/v1/ws?token=nonsense");
    upgrade.set(http::field::connection, "Upgrade");
    upgrade.set(http::field::upgrade, "websocket");
    upgrade.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    upgrade.set(http::field::sec_websocket_version, "13");
    auto ws = r.route(upgrade);
    CHECK(ws.kind == Routed::Kind::WebSocket);
    CHECK(ws.refused);  // told over the WebSocket, counted here
    CHECK(ws.caller.refusal);
}

TEST_CASE("gateway router: patches= opts a stream in, and takes 1 or 0 only") {
    Router r;
    CHECK_FALSE(r.route(get("/v1/sse?channel=db:menu:1")).patches);
    CHECK(r.route(get("/v1/sse?channel=db:menu:1&patches=1")).patches);
    CHECK(r.route(get("/v1/sse?channel=db:menu:1&patches=true")).patches);
    CHECK_FALSE(r.route(get("/v1/sse?channel=db:menu:1&patches=0")).patches);
    auto bad = r.route(get("/v1/sse?channel=db:menu:1&patches=2"));
    CHECK(bad.response.result_int() == 400);
    CHECK(error_of(bad.response) == "bad_request");
    auto upgrade = get("/v1/ws?patches=1");
    upgrade.set(http::field::connection, "Upgrade");
    upgrade.set(http::field::upgrade, "websocket");
    upgrade.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    upgrade.set(http::field::sec_websocket_version, "13");
    auto ws = r.route(upgrade);
    CHECK(ws.kind == Routed::Kind::WebSocket);
    CHECK(ws.patches);
    upgrade.target("/v1/ws?patches=maybe");
    CHECK(r.route(upgrade).response.result_int() == 400);
}

TEST_CASE("gateway router: a doc's answer, its ETag and Redis's errors") {
    ServerOptions options;
    auto doc = make_doc("db:menu:1", R"({"channel":"db:menu:1","doc":{"n":1},"generation":1,"lsn":"0/10"})");
    REQUIRE(doc);
    auto ok = doc_answer(get("/v1/docs/db:menu:1"), options, "db:menu:1", doc, {});
    CHECK(ok.result_int() == 200);
    CHECK(ok[http::field::etag] == "\"1/0/10\"");
    CHECK(ok.body() == doc->envelope);
    auto conditional = get("/v1/docs/db:menu:1");
    conditional.set(http::field::if_none_match, "W/\"1/0/10\"");
    CHECK(doc_answer(conditional, options, "db:menu:1", doc, {}).result_int() == 304);
    CHECK(doc_answer(get("/"), options, "db:menu:1", nullptr, {}).result_int() == 404);
    auto down = doc_answer(get("/"), options, "db:menu:1", nullptr,
                           "Redis Cluster node 127.0.0.1:7001 did not answer GET within 5000 ms");
    CHECK(down.result_int() == 503);
    CHECK(down.body().find("Redis cannot be read now: Redis Cluster node 127.0.0.1:7001") != std::string::npos);

    auto health = health_answer(get("/healthz"), options, false, "Redis Cluster node 127.0.0.1:7001 did not answer PING within 1000 ms",
                                ServerStats{}, HubStats{});
    CHECK(health.result_int() == 503);
    CHECK(health.body().find("\"redis\":\"down\"") != std::string::npos);
    CHECK(health.body().find("127.0.0.1:7001") != std::string::npos);
    CHECK(health_answer(get("/healthz"), options, true, {}, ServerStats{}, HubStats{}).result_int() == 200);
}
