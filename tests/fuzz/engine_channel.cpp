// Fuzz target: parse_channel on arbitrary channel names (liveness polls and warm requests come from
// outside). Whatever it accepts must be exactly what build_channel writes for the parsed values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/channel.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    docsync::ParsedChannel parsed;
    if (docsync::parse_channel(input, parsed)) {
        if (docsync::build_channel(parsed.query, parsed.values) != input) __builtin_trap();
    }
    return 0;
}
