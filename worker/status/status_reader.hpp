#pragma once
// Reads a status file the way the extension does (plugin/status_file.c): pread only, seq, body, seq with
// acquire barriers, judged by the shared docsync_status_check(), retried while an update is in
// progress. Used by the worker's tests and the status test tool; the extension has its own loop in C
// because its barriers, sleeps and error reporting are the server's.

#include <cstdint>
#include <filesystem>
#include <string>

#include "docsync_status.h"

namespace docsync::status {

struct ReadResult {
    DocsyncStatusCheck check = DOCSYNC_STATUS_SHORT;  // DOCSYNC_STATUS_OK: `file` is trustworthy
    bool abandoned_update = false;  // seq stayed odd (writer died mid-update) but the CRC matched
    std::uint32_t layout_version = 0;  // the file's version (meaningful for FOREIGN_VERSION)
    int attempts = 0;
    std::string error;  // open/read failure, empty otherwise
    DocsyncStatusFile file{};
};

// Reads the file with at most `max_attempts` tries while an update is in progress.
ReadResult read_status_file(const std::filesystem::path& path, int max_attempts = 100);

// A one-line description of a check result, as the extension words it.
std::string describe(const ReadResult& result);

}  // namespace docsync::status
