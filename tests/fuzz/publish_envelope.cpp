// Fuzz target: the doc JSON compactor (docs come from customer queries) and the envelope read-back
// (the JSONL file at start). Neither may crash; a compacted doc is stable under a second pass and its
// envelope reads back with the channel and version it was written with.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "envelope/envelope.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string input(reinterpret_cast<const char*>(data), size);
    (void)docsync::publish::parse_envelope(input);
    std::string compact;
    try {
        compact = docsync::publish::compact_json(input);
    } catch (const docsync::Error&) {
        return 0;
    }
    if (docsync::publish::compact_json(compact) != compact) std::abort();
    if (compact.size() > input.size()) std::abort();
    docsync::DocVersion version{size, (static_cast<std::uint64_t>(size) << 32) | 7};
    auto envelope = docsync::publish::make_envelope("db:fuzz:" + std::to_string(size), input, version);
    auto head = docsync::publish::parse_envelope(envelope);
    if (!head || head->channel != "db:fuzz:" + std::to_string(size) || head->version != version) std::abort();
    return 0;
}
