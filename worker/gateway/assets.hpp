#pragma once
// The files the gateway serves itself (worker/gateway/assets/), built into the executable.

#include <string_view>

namespace docsync::gateway {

struct Asset {
    std::string_view body;
    std::string_view content_type;
};

// The asset served at `path` ("/" is index.html), or nullptr.
const Asset* find_asset(std::string_view path);

}  // namespace docsync::gateway
