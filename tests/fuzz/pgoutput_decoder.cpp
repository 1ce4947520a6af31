// libFuzzer target: the pgoutput decoder must turn any bytes into records or a DecodeError, never
// undefined behaviour. Input: several messages, each prefixed by a one-byte length, decoded with one
// PgoutputDecoder (watching relation 16384's attnums 1, 3 and 99, and every column of 16385) so
// transaction, RELATION and streamed-transaction state carries over to later messages. Protocol
// version 2, whose messages outside a stream block are version 1's; streamed transactions held past
// 1kB go to temporary files, so a few messages reach that path too. Seeds: tests/fuzz/pgoutput_corpus.py.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/log.hpp"
#include "replication/pgoutput_decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    docsync::set_log_level(docsync::LogLevel::Warning);  // each spill is logged at info
    std::vector<docsync::PgoutputWatch> watches(2);
    watches[0].relid = 16384;
    watches[0].attnums = {3, 1, 99};
    watches[0].columns = {{1, "id"}, {2, "note"}, {3, "status"}};
    watches[1].relid = 16385;
    watches[1].all_columns = true;
    watches[1].columns = {{1, "id"}, {2, "v"}, {4, "w"}};
    docsync::PgoutputOptions options;
    options.reference_xid = (std::uint64_t{1} << 32) | 700;
    options.proto_version = 2;
    options.stream_memory = 1024;
    docsync::PgoutputDecoder decoder(watches, options);
    std::vector<docsync::Record> out;
    std::span<const std::uint8_t> rest(data, size);
    while (!rest.empty()) {
        std::size_t n = rest[0];
        rest = rest.subspan(1);
        if (n > rest.size()) n = rest.size();
        try {
            decoder.decode_all(rest.first(n), out);
        } catch (const docsync::DecodeError&) {
        }
        rest = rest.subspan(n);
    }
    for (const auto& record : out) (void)docsync::describe(record);
    return 0;
}
