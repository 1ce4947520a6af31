// Fuzz target: any bytes as a status file through the reader (the pread loop and the shared
// judgement the extension uses). It must classify, never crash or read past the file, and a body
// it trusts must carry a matching CRC.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "status/status_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static std::string path = [] {
        char tmpl[] = "/tmp/docsync-fuzz-status.XXXXXX";
        int fd = ::mkstemp(tmpl);
        if (fd < 0) std::abort();
        ::close(fd);
        return std::string(tmpl);
    }();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    auto r = docsync::status::read_status_file(path, 3);
    if (r.check == DOCSYNC_STATUS_OK) {
        if (size != sizeof(DocsyncStatusFile)) std::abort();
        if (docsync_status_crc32c(&r.file.body, sizeof r.file.body) != r.file.body_crc) std::abort();
        if (r.file.layout_version != DOCSYNC_STATUS_LAYOUT_VERSION) std::abort();
    }
    (void)docsync::status::describe(r);
    return 0;
}
