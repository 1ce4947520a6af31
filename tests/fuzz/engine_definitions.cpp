// Fuzz target: parse_definitions (contract B's JSON, docs/design.md) must refuse bad input with
// docsync::Error, never crash, and whatever it accepts must yield a tables option.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.hpp"
#include "engine/definitions.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    try {
        auto definitions = docsync::parse_definitions(input);
        (void)docsync::plugin_tables(definitions);
    } catch (const docsync::Error&) {
    }
    return 0;
}
