// Channel keys in canonical text at the gateway; see key_forms.hpp.
#include "gateway/key_forms.hpp"

#include "engine/channel.hpp"
#include "engine/key_text.hpp"

namespace docsync::gateway {

bool KeyForms::update(std::string_view json) {
    Types parsed;
    if (!parse_key_types_json(json, parsed)) return false;
    auto next = std::make_shared<const Types>(std::move(parsed));
    std::lock_guard<std::mutex> lock(mutex_);
    types_ = std::move(next);
    return true;
}

void KeyForms::forget() {
    auto next = std::make_shared<const Types>();
    std::lock_guard<std::mutex> lock(mutex_);
    types_ = std::move(next);
}

std::string KeyForms::error(std::string_view channel) const {
    std::shared_ptr<const Types> types;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        types = types_;
    }
    if (types->empty()) return {};
    ParsedChannel parsed;
    if (!parse_channel(channel, parsed)) return {};  // channel_error has judged its form already
    auto it = types->find(parsed.query);
    if (it == types->end()) return {};
    if (it->second.size() != parsed.values.size())
        return "doc query \"" + parsed.query + "\" has " + std::to_string(it->second.size()) + " param(s), the channel " +
               std::to_string(parsed.values.size());
    KeyCheck check = check_channel_key(parsed.query, it->second, parsed.values);
    if (check.ok) return {};
    return check.problem + " (a doc has one channel: its key as PostgreSQL prints it)";
}

KeyForms& key_forms() {
    static KeyForms forms;
    return forms;
}

}  // namespace docsync::gateway
