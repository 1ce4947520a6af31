// A Redis subscriber that rebuilds docs from the channel messages alone (docs/patches.md), for the
// scenarios: it PSUBSCRIBEs to a pattern, applies each patch to the doc it holds when it holds the
// patch's base, takes each whole doc, and GETs the key on any mismatch. On SIGTERM it reads what is
// still buffered (until the channel has been quiet for a second), then compares every doc it holds
// with its key, byte for byte, prints one summary line and exits 0 when all are equal.
//
//   patch_follower PORT PATTERN   e.g. patch_follower 6390 'db:order:*'
#include <poll.h>
#include <signal.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <string>

#include "envelope/envelope.hpp"
#include "patch/json_patch.hpp"
#include "redis/connection.hpp"

using namespace docsync;
using namespace std::chrono_literals;

namespace {

volatile std::sig_atomic_t stop_asked = 0;
void on_term(int) { stop_asked = 1; }

struct Held {
    std::string envelope;  // the whole envelope as the key would hold it
    std::string doc;
    DocVersion version;
};

// The next pub/sub message's (channel, payload), or nothing within `wait`.
bool next_message(redisContext* c, std::chrono::milliseconds wait, std::string& channel, std::string& payload) {
    for (;;) {
        void* raw = nullptr;
        if (redisGetReplyFromReader(c, &raw) != REDIS_OK) throw Error("the subscription broke");
        if (!raw) {
            pollfd p{c->fd, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
            if (redisBufferRead(c) != REDIS_OK) throw Error("the subscription broke");
            continue;
        }
        publish::Reply reply(static_cast<redisReply*>(raw));
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4) continue;  // subscribe confirmations
        if (publish::reply_text(reply->element[0]) != "pmessage") continue;
        channel = publish::reply_text(reply->element[2]);
        payload = publish::reply_text(reply->element[3]);
        return true;
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: patch_follower PORT PATTERN\n");
        return 2;
    }
    std::signal(SIGTERM, on_term);
    try {
        auto address = publish::parse_redis_url(std::string("redis://127.0.0.1:") + argv[1]);
        auto sub = publish::RedisConnection::connect(address, 5s, 10s);
        auto keys = publish::RedisConnection::connect(address, 5s, 10s);
        sub->command({"PSUBSCRIBE", argv[2]});
        std::fprintf(stdout, "subscribed\n");
        std::fflush(stdout);
        std::map<std::string, Held> held;
        std::uint64_t patches = 0, wholes = 0, gets = 0;
        auto get_key = [&](const std::string& channel, Held& h) {
            ++gets;
            auto reply = keys->command({"GET", channel});
            h = Held{};
            if (reply->type != REDIS_REPLY_STRING) return;
            h.envelope = publish::reply_text(reply.get());
            auto whole = publish::retained_doc(h.envelope, channel);
            if (!whole) return;
            h.doc = whole->doc.value_or("null");
            h.version = whole->version;
        };
        for (;;) {
            std::string channel, payload;
            if (!next_message(sub->context(), stop_asked ? 1000ms : 200ms, channel, payload)) {
                if (stop_asked) break;
                continue;
            }
            auto head = publish::parse_envelope(payload);
            if (!head) throw Error("not a docsync envelope on " + channel + ": " + payload);
            Held& h = held[channel];
            std::string body = payload.substr(head->doc_at, head->doc_size);
            if (!head->is_patch()) {
                ++wholes;
                h = Held{payload, body, head->version};
                continue;
            }
            if (h.envelope.empty() || h.version != *head->base) {
                get_key(channel, h);
                continue;
            }
            ++patches;
            h.doc = patch::apply(h.doc, {head->kind == publish::EnvelopeKind::JsonPatch ? patch::Form::JsonPatch
                                                                                        : patch::Form::MergePatch,
                                         body});
            h.version = head->version;
            h.envelope = publish::make_envelope(channel, h.doc, h.version);
        }
        std::uint64_t mismatches = 0;
        for (const auto& [channel, h] : held) {
            auto reply = keys->command({"GET", channel});
            std::string key = reply->type == REDIS_REPLY_STRING ? publish::reply_text(reply.get()) : "(nil)";
            if (key == h.envelope) continue;
            ++mismatches;
            std::fprintf(stdout, "MISMATCH %s\n  held: %s\n  key:  %s\n", channel.c_str(), h.envelope.c_str(), key.c_str());
        }
        std::fprintf(stdout, "channels=%zu patches=%llu wholes=%llu gets=%llu mismatches=%llu\n", held.size(),
                     static_cast<unsigned long long>(patches), static_cast<unsigned long long>(wholes),
                     static_cast<unsigned long long>(gets), static_cast<unsigned long long>(mismatches));
        return mismatches == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stdout, "ERROR %s\n", e.what());
        return 1;
    }
}
