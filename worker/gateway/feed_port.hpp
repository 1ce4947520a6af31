#pragma once
// The hub's port in front of Redis: what it asks of the feed (follow a channel, read its retained
// doc, announce a subscriber, probe Redis) and how it is answered. The Feed implements it over
// Redis or a Redis Cluster; the hub's unit tests implement it with a fake.
//
// Answers (`done`) may run on any thread: the hub posts them onto its own.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace docsync::gateway {

// The outcome of a read: the value (nullopt for a missing key), or why it failed.
struct FeedRead {
    bool ok = false;
    std::optional<std::string> value;
    std::string error;
};

class FeedPort {
public:
    virtual ~FeedPort() = default;
    // Follow `channel` or stop following it. Cheap; each subscription put in place (again) is
    // reported through the feed's events, and the hub then reads the retained doc.
    virtual void set_following(const std::string& channel, bool follow) = 0;
    // The retained envelope of `channel` (nullopt when Redis holds none), by the command timeout.
    virtual void read(const std::string& channel, std::function<void(FeedRead)> done) = 0;
    // PUBLISH docsync:warm (warm) or docsync:touch `channel`; failures are logged.
    virtual void announce(const std::string& channel, bool warm) = 0;
    // A round trip to every Redis node the gateway depends on, each within `timeout`; the error
    // names the ones that did not answer.
    virtual void probe(std::chrono::milliseconds timeout, std::function<void(FeedRead)> done) = 0;
    // Whether the subscriptions are in place (every subscriber connection answered).
    virtual bool up() const = 0;
};

}  // namespace docsync::gateway
