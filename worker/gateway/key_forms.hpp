#pragma once
// Channel keys in canonical text at the gateway (docs/design.md, "one doc, one name, one answer").
//
// The gateway has no database connection. The worker writes the key types of every doc query to
// Redis at each definitions load, and again whenever Redis no longer holds them (docsync:key_types,
// publish/redis_script.hpp's kKeyTypesKey: a JSON object {"order":["int4"],…}); the gateway reads
// it at start and every few seconds after (an absent key: not loaded, nothing checked), and
// refuses to follow a channel whose key is not spelled as PostgreSQL prints it (db:order:01,
// db:order:+1) or is not of its type (db:order:abc), naming the canonical spelling
// (engine/key_text.hpp, the worker's own check). A channel of a query the list does not hold (yet)
// is let through: the worker, which knows its definitions, computes nothing for a channel it refuses.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace docsync::gateway {

class KeyForms {
public:
    // Replaces the list with what the worker wrote; false (the list kept) when `json` is malformed.
    bool update(std::string_view json);
    // Redis holds no list (restarted empty, flushed): not loaded, every channel is let through
    // until the worker writes it again (it does within a second or two) and the next refresh.
    void forget();
    // Empty when the channel's keys are in canonical text (or its query is not listed); else why,
    // for a 400 or a WebSocket error.
    std::string error(std::string_view channel) const;

private:
    using Types = std::map<std::string, std::vector<std::string>>;
    mutable std::mutex mutex_;
    std::shared_ptr<const Types> types_ = std::make_shared<const Types>();
};

// The process's list, which access.cpp's channel_error consults; gateway/main.cpp refreshes it.
KeyForms& key_forms();

// How often the gateway reads docsync:key_types again.
inline constexpr std::chrono::seconds kKeyFormsRefresh{5};

}  // namespace docsync::gateway
