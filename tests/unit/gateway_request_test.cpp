// The gateway's pure parts: channel patterns, token verification, request targets, SSE cursors,
// WebSocket client messages and the per-connection outbox.
#include <doctest/doctest.h>

#include <jwt.h>

#include <cstdlib>

#include "gateway/access.hpp"
#include "gateway/hub.hpp"
#include "gateway/key_forms.hpp"
#include "gateway/request.hpp"
#include "gateway/session.hpp"

using namespace docsync;
using namespace docsync::gateway;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "a-secret-of-at-least-thirty-two-bytes!!";

std::string mint(const std::string& claims_json, jwt_alg_t alg = JWT_ALG_HS256, const std::string& secret = kSecret) {
    jwt_t* jwt = nullptr;
    jwt_new(&jwt);
    jwt_add_grants_json(jwt, claims_json.c_str());
    jwt_set_alg(jwt, alg, alg == JWT_ALG_NONE ? nullptr : reinterpret_cast<const unsigned char*>(secret.data()),
                alg == JWT_ALG_NONE ? 0 : static_cast<int>(secret.size()));
    char* text = jwt_encode_str(jwt);
    std::string token = text ? text : "";
    std::free(text);
    jwt_free(jwt);
    return token;
}

const auto kNow = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));

DocPtr doc(const std::string& channel, std::uint64_t lsn) {
    return make_doc(channel, "{\"channel\":\"" + channel + "\",\"doc\":{\"n\":" + std::to_string(lsn) +
                                 "},\"generation\":1,\"lsn\":\"" + format_lsn(lsn) + "\"}");
}

}  // namespace

TEST_CASE("gateway patterns: exact channels and trailing-* prefixes, nothing else") {
    CHECK(pattern_error("db:order:42").empty());
    CHECK(pattern_error("db:customer_orders:7:*").empty());
    CHECK(pattern_error("db:*").empty());
    CHECK_FALSE(pattern_error("").empty());
    CHECK_FALSE(pattern_error("*").empty());
    CHECK_FALSE(pattern_error("d*").empty());
    CHECK_FALSE(pattern_error("db:*:42").empty());
    CHECK_FALSE(pattern_error("order:42").empty());
    CHECK_FALSE(pattern_error("db:order 42").empty());
    CHECK(pattern_matches("db:customer_orders:7:*", "db:customer_orders:7:3"));
    CHECK_FALSE(pattern_matches("db:customer_orders:7:*", "db:customer_orders:70:3"));
    CHECK(pattern_matches("db:order:42", "db:order:42"));
    CHECK_FALSE(pattern_matches("db:order:42", "db:order:420"));
    CHECK_FALSE(channel_error("db:order:4\x01").empty());
    CHECK_FALSE(channel_error("db:order:4\x7f").empty());
    CHECK_FALSE(channel_error("db:order 1:4").empty());  // no query is named so
    CHECK_FALSE(channel_error(std::string("db:") + std::string(2000, 'x')).empty());
}

TEST_CASE("gateway tokens: HS256 under the secret, with exp and channels, or a named refusal") {
    TokenVerifier verifier(kSecret);
    long exp = 1'800'000'060;
    auto ok = verifier.verify(mint(R"({"exp":)" + std::to_string(exp) + R"(,"channels":["db:order:*"]})"), kNow);
    REQUIRE(ok.grant);
    CHECK(ok.grant->channels.covers("db:order:1"));
    CHECK_FALSE(ok.grant->channels.covers("db:user:1"));
    CHECK(ok.grant->expires == std::chrono::system_clock::time_point(std::chrono::seconds(exp)));

    auto code = [&](const std::string& token) { return verifier.verify(token, kNow).refusal.code; };
    CHECK(code(mint(R"({"exp":1700000000,"channels":["db:x"]})")) == "token_expired");
    CHECK(code(mint(R"({"channels":["db:x"]})")) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000})")) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000,"channels":"db:x"})")) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000,"channels":[1]})")) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000,"channels":["db:*:x"]})")) == "invalid_token");
    CHECK(code(mint(R"({"exp":"soon","channels":["db:x"]})")) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000,"nbf":1900000000,"channels":["db:x"]})")) == "token_not_yet_valid");
    CHECK(code(mint(R"({"exp":1900000000,"channels":["db:x"]})", JWT_ALG_NONE)) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000,"channels":["db:x"]})", JWT_ALG_HS384)) == "invalid_token");
    CHECK(code(mint(R"({"exp":1900000000,"channels":["db:x"]})", JWT_ALG_HS256, kSecret + "x")) == "invalid_token");
    CHECK(code("") == "invalid_token");
    CHECK(code("a.b.c") == "invalid_token");
    CHECK(code(std::string(kMaxTokenBytes + 1, 'a')) == "invalid_token");
    // A fractional exp (NumericDate allows it) is read as a date.
    CHECK(verifier.verify(mint(R"({"exp":1800000060.5,"channels":["db:x"]})"), kNow).grant);
    // Without a secret nothing is accepted.
    CHECK(TokenVerifier().verify(mint(R"({"exp":1900000000,"channels":["db:x"]})"), kNow).refusal.code ==
          "invalid_token");
}

TEST_CASE("gateway request targets: percent-decoded path and repeated query parameters") {
    auto t = parse_target("/v1/sse?channel=db%3Aorder%3A42&channel=db:order:43&token=a.b.c&x");
    REQUIRE(t);
    CHECK(t->path == "/v1/sse");
    CHECK(t->all("channel") == std::vector<std::string>{"db:order:42", "db:order:43"});
    CHECK(t->first("token") == "a.b.c");
    CHECK(t->first("x") == "");
    CHECK_FALSE(t->first("y"));
    CHECK(parse_target("/v1/docs/db%3Aa%2Fb")->path == "/v1/docs/db:a/b");
    CHECK(parse_target("/?q=a+b")->first("q") == "a b");
    CHECK_FALSE(parse_target("/v1/docs/%zz"));
    CHECK_FALSE(parse_target("/v1/docs/%0"));
    CHECK_FALSE(parse_target("/v1/docs/a%00b"));
    CHECK(bearer_token("Bearer abc") == "abc");
    CHECK(bearer_token("bearer  abc ") == "abc");
    CHECK_FALSE(bearer_token("Basic abc"));
    CHECK_FALSE(bearer_token("Bearer "));
}

TEST_CASE("gateway SSE cursors: one version per channel, in order") {
    std::vector<std::optional<DocVersion>> v{DocVersion{1, 0x16B3F28}, std::nullopt, DocVersion{2, 1}};
    std::string text = format_cursor(v);
    CHECK(text == "1/0/16B3F28,-,2/0/1");
    CHECK(parse_cursor(text, 3) == v);
    CHECK_FALSE(parse_cursor(text, 2));
    CHECK_FALSE(parse_cursor("1/0/1,", 1));
    CHECK_FALSE(parse_cursor("x", 1));
    CHECK(parse_cursor("-", 1) == std::vector<std::optional<DocVersion>>{std::nullopt});
    CHECK(parse_version("3/A/B") == DocVersion{3, (0xAull << 32) | 0xB});
    CHECK_FALSE(parse_version("/0/1"));
    CHECK_FALSE(parse_version("1/0"));
}

TEST_CASE("gateway client messages: subscribe, unsubscribe, auth, or a reason") {
    auto s = parse_client_message(R"({"type":"subscribe","channel":"db:order:42","after":"1/0/10"})");
    REQUIRE(s.message);
    CHECK(s.message->type == ClientMessage::Type::Subscribe);
    CHECK(s.message->channel == "db:order:42");
    CHECK(s.message->after == DocVersion{1, 0x10});
    CHECK(parse_client_message(R"({"type":"unsubscribe","channel":"db:x"})").message->type ==
          ClientMessage::Type::Unsubscribe);
    CHECK(parse_client_message(R"({"type":"auth","token":"t"})").message->token == "t");
    CHECK_FALSE(parse_client_message("nope").message);
    CHECK_FALSE(parse_client_message(R"({"type":"subscribe"})").message);
    CHECK_FALSE(parse_client_message(R"({"type":"subscribe","channel":"db:x","after":"soon"})").message);
    CHECK_FALSE(parse_client_message(R"({"type":"dance"})").message.has_value());
    CHECK_FALSE(parse_client_message(std::string(100000, '[')).message);
}

TEST_CASE("gateway outbox: at most the newest pending doc per channel, versions only move forward") {
    Outbox box;
    box.add("db:a", std::nullopt);
    box.add("db:b", DocVersion{1, 0x50});
    CHECK(box.offer(doc("db:a", 0x10)));
    CHECK(box.offer(doc("db:a", 0x20)));   // replaces the pending one
    CHECK_FALSE(box.offer(doc("db:a", 0x15)));  // older than what waits
    CHECK_FALSE(box.offer(doc("db:b", 0x40)));  // at or below the floor
    CHECK(box.offer(doc("db:b", 0x60)));
    CHECK_FALSE(box.offer(doc("db:c", 0x60)));  // not followed
    auto first = box.next();
    REQUIRE(first);
    CHECK(first->channel == "db:a");
    CHECK(first->version.lsn == 0x20);
    CHECK(box.next()->channel == "db:b");
    CHECK_FALSE(box.next());
    CHECK_FALSE(box.offer(doc("db:a", 0x20)));  // sent already: no duplicate
    CHECK(format_cursor(box.floors()) == "1/0/20,1/0/60");
    CHECK(box.offer(doc("db:a", 0x30)));
    box.remove("db:a");
    CHECK_FALSE(box.next());
}

TEST_CASE("gateway outbox: a floor raised past a waiting doc drops it, and next() never lowers a floor") {
    Outbox box;
    Outbox::Slot& a = box.add("db:a", std::nullopt);
    box.add("db:b", std::nullopt);
    CHECK(box.offer(doc("db:a", 0x128)));
    CHECK(box.offer(doc("db:b", 0x10)));
    box.raise_floor(a, DocVersion{1, 0x1000});
    box.raise_floor(a, DocVersion{1, 0x500});  // never down
    auto only = box.next();
    REQUIRE(only);
    CHECK(only->channel == "db:b");
    CHECK_FALSE(box.next());
    CHECK(format_cursor(box.floors()) == "1/0/1000,1/0/10");
    // A floor set behind the outbox's back still holds: the waiting doc is skipped, not sent.
    CHECK(box.offer(doc("db:b", 0x20)));
    box.find("db:b")->floor = DocVersion{1, 0x30};
    CHECK_FALSE(box.next());
    CHECK(format_cursor(box.floors()) == "1/0/1000,1/0/30");
}

TEST_CASE("gateway inbox: the newest doc per channel, a byte bound past which the channel is read again") {
    Inbox inbox(4096);
    CHECK(inbox.put(doc("db:a", 0x10)));        // was empty: the taker is woken
    CHECK_FALSE(inbox.put(doc("db:a", 0x30)));  // replaces
    CHECK_FALSE(inbox.put(doc("db:a", 0x20)));  // older than what waits
    CHECK_FALSE(inbox.put(doc("db:b", 0x10)));
    CHECK(inbox.replaced() == 1);
    auto big = make_doc("db:c", "{\"channel\":\"db:c\",\"doc\":\"" + std::string(5000, 'x') +
                                    "\",\"generation\":1,\"lsn\":\"0/10\"}");
    REQUIRE(big);
    CHECK_FALSE(inbox.put(big));  // past the bound: not kept
    CHECK(inbox.overflowed() == 1);
    auto batch = inbox.take();
    REQUIRE(batch.docs.size() == 2);
    CHECK(batch.docs[0]->channel == "db:a");
    CHECK(batch.docs[0]->version.lsn == 0x30);
    CHECK(batch.docs[1]->channel == "db:b");
    CHECK(batch.reread == std::vector<std::string>{"db:c"});
    CHECK(inbox.take().docs.empty());
    CHECK(inbox.put(big));  // alone and still past the bound: read again (the taker is woken)
    CHECK(inbox.take().reread.size() == 1);
}

TEST_CASE("gateway docs: an envelope's line breaks become SSE data lines; a tombstone is marked") {
    auto d = make_doc("db:a", "{\"channel\":\"db:a\",\"doc\":{\n\"n\": 1,\r\n\"m\": 2\r},\"generation\":1,\"lsn\":\"0/10\"}");
    REQUIRE(d);
    CHECK(d->sse_data() == "{\"channel\":\"db:a\",\"doc\":{\ndata: \"n\": 1,\ndata: \"m\": 2\ndata: },\"generation\":1,\"lsn\":\"0/10\"}");
    CHECK_FALSE(d->tombstone);
    auto plain = doc("db:a", 0x10);
    CHECK(plain->sse_lines.empty());
    CHECK(&plain->sse_data() == &plain->envelope);
    auto gone = make_doc("db:a", "{\"channel\":\"db:a\",\"doc\":null,\"generation\":1,\"lsn\":\"0/10\"}");
    REQUIRE(gone);
    CHECK(gone->tombstone);
}

TEST_CASE("gateway docs: the WebSocket message is the envelope with its type and version in front") {
    auto d = doc("db:order:42", 0x16B3F28);
    REQUIRE(d);
    CHECK(d->version_text == "1/0/16B3F28");
    CHECK(d->ws_message ==
          R"({"type":"doc","version":"1/0/16B3F28","channel":"db:order:42","doc":{"n":23805736},"generation":1,"lsn":"0/16B3F28"})");
    CHECK_FALSE(make_doc("db:order:43", d->envelope));  // another channel's envelope
    CHECK_FALSE(make_doc("db:order:42", "garbage"));
}

TEST_CASE("gateway json_string: client bytes quoted back stay valid JSON, a cut UTF-8 sequence included") {
    CHECK(json_string("db:order:42") == "\"db:order:42\"");
    CHECK(json_string("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
    CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
    CHECK(json_string("caf\xc3") == "\"caf?\"");            // a sequence cut at the end
    CHECK(json_string(".\xf2" "1(") == "\".?1(\"");         // a lead byte without its continuation
    CHECK(json_string("\xc0\xaf") == "\"??\"");             // an overlong form
    CHECK(json_string("\xed\xa0\x80") == "\"???\"");        // a surrogate
}

TEST_CASE("gateway channels: a key holding a space (a timestamp) is followed; refusals name the channel escaped") {
    REQUIRE(key_forms().update(R"({"byat":["timestamp"],"order":["int4"]})"));
    CHECK(channel_error("db:byat:2026-01-01 00%3A00%3A00").empty());
    CHECK(pattern_error("db:byat:2026-01-01 00%3A00%3A00").empty());
    CHECK(pattern_error("db:byat:2026-01-01 *").empty());
    std::string t = channel_error("db:byat:2026-01-01T00%3A00%3A00");
    CHECK(t.find("\"db:byat:2026-01-01 00%3A00%3A00\"") != std::string::npos);
    CHECK(t.find("\"2026-01-01 00:00:00\"; ") != std::string::npos);  // the value, then the channel
    CHECK(channel_error("db:order:01").find("\"db:order:1\"") != std::string::npos);
    // network addresses, bit strings and ranges as the worker checks them
    REQUIRE(key_forms().update(R"j({"host":["inet"],"span":["int4range"],"flags":["bit(4)"]})j"));
    CHECK(channel_error("db:host:%3A%3A1").empty());
    CHECK(channel_error("db:host:0%3A0%3A%3A1").find("\"db:host:%3A%3A1\"") != std::string::npos);
    CHECK(channel_error("db:span:[1,3)").empty());
    CHECK(channel_error("db:span:[1,2]").find("\"db:span:[1,3)\"") != std::string::npos);
    CHECK(channel_error("db:flags:0101").empty());
    CHECK(channel_error("db:flags:X5").find("\"db:flags:0101\"") != std::string::npos);
    // an absent list (Redis restarted empty) is no list: channels pass, the worker refuses them
    key_forms().forget();
    CHECK(channel_error("db:order:01").empty());
}

TEST_CASE("gateway channels: a char(n) key is followed without trailing spaces; a padded one is refused naming it") {
    REQUIRE(key_forms().update(R"j({"country":["bpchar"],"zone":["bpchar(5)"],"codes":["_bpchar"]})j"));
    CHECK(channel_error("db:country:FR").empty());
    CHECK(channel_error("db:country:").empty());           // blanks alone: the empty value
    CHECK(channel_error("db:country:FR%09").empty());      // a tab is a character
    CHECK(channel_error("db:country:FR\xc2\xa0").empty());  // so is a no-break space
    CHECK(channel_error("db:country:FR ").find("\"db:country:FR\"") != std::string::npos);
    CHECK(channel_error("db:country:FR  ").find("\"db:country:FR\"") != std::string::npos);
    CHECK(channel_error("db:country:   ").find("\"db:country:\"") != std::string::npos);
    CHECK(channel_error("db:country:FR%20").find("\"db:country:FR\"") == std::string::npos);  // no channel at all
    CHECK_FALSE(channel_error("db:country:FR%20").empty());
    CHECK(pattern_error("db:country:FR*").empty());
    // a domain over char(5) is spelled padded; a bpchar[] with its elements' trailing spaces cut
    CHECK(channel_error("db:zone:FR   ").empty());
    CHECK(channel_error("db:zone:FR").find("\"db:zone:FR   \"") != std::string::npos);
    CHECK(channel_error("db:codes:{FR,DE}").empty());
    CHECK(channel_error("db:codes:{\"FR \"}").find("\"db:codes:{FR}\"") != std::string::npos);
    CHECK(channel_error("db:codes:{\"FR \",DE}").find("\"db:codes:{FR,DE}\"") != std::string::npos);
    key_forms().forget();
}
