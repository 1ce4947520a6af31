#pragma once
// Reads the definitions from the extension (contract B, docs/design.md) over the worker's --dsn connection.

#include "engine/definitions.hpp"
#include "pg/connection.hpp"

namespace docsync {

// Runs `SELECT docsync.worker_definitions()` and parses it. Throws docsync::Error: the server's error
// (transient when the connection failed), a clear one when the extension lacks the function (not
// installed in this database, or older than the worker), or parse_definitions' for a malformed
// document.
Definitions read_definitions(pg::Connection& connection, pg::Deadline deadline);

}  // namespace docsync
