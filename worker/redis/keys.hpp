#pragma once
// The names docsync-worker and docsync-gateway share in Redis: each written once, here.

#include <string_view>

namespace docsync::redis {

// The control channels clients publish on to ask the worker for a doc (publish/liveness.hpp).
inline constexpr const char* kWarmChannel = "docsync:warm";
inline constexpr const char* kTouchChannel = "docsync:touch";
// The key types of every doc query (engine/key_text.hpp's JSON), written by the sinks at every
// definitions load and read by docsync-gateway to refuse channels whose keys are not in canonical text.
inline constexpr std::string_view kKeyTypesKey = "docsync:key_types";

}  // namespace docsync::redis

// The publish sinks and the gateway name the client's parts publish::…, as before its move here.
namespace docsync::publish {
using namespace docsync::redis;
}
