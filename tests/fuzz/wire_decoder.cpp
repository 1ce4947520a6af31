// libFuzzer target: the wire decoder must turn any bytes into a record or a DecodeError, never
// undefined behaviour. Input: several messages, each prefixed by a one-byte length, decoded with one
// Decoder so RELATION state carries over to later changes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "replication/decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    docsync::Decoder decoder;
    std::span<const std::uint8_t> rest(data, size);
    while (!rest.empty()) {
        std::size_t n = rest[0];
        rest = rest.subspan(1);
        if (n > rest.size()) n = rest.size();
        try {
            docsync::Record record = decoder.decode(rest.first(n));
            (void)docsync::describe(record);
        } catch (const docsync::DecodeError&) {
        }
        rest = rest.subspan(n);
    }
    return 0;
}
