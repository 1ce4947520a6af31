// Fuzz target: parse_snapshot on arbitrary text; an accepted snapshot has xmin <= xmax and sorted xip.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "executor/snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    auto snapshot = docsync::parse_snapshot(input);
    if (snapshot) {
        if (snapshot->xmin > snapshot->xmax || !std::is_sorted(snapshot->xip.begin(), snapshot->xip.end()))
            __builtin_trap();
        (void)snapshot->sees_committed(snapshot->xmin);
    }
    return 0;
}
