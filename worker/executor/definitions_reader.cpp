// Reading contract B's document (docs/design.md) from the extension.
#include "executor/definitions_reader.hpp"

#include "common/error.hpp"
#include "common/sqlstate.hpp"

namespace docsync {

Definitions read_definitions(pg::Connection& connection, pg::Deadline deadline) {
    Error error("");
    auto result = connection.try_exec("SELECT docsync.worker_definitions()::text", {}, deadline, &error);
    if (!result) {
        if (error.sqlstate() == sqlstate::kInvalidSchemaName || error.sqlstate() == sqlstate::kUndefinedFunction)
            throw Error("docsync.worker_definitions() does not exist in this database: run CREATE EXTENSION docsync "
                        "(or ALTER EXTENSION docsync UPDATE) in the database --dsn connects to",
                        error.sqlstate());
        if (error.sqlstate() == sqlstate::kInsufficientPrivilege)
            throw Error(std::string("could not read the definitions: ") + error.what() +
                            " (grant the --dsn role what it reads: SELECT docsync.grant_replication('<role>'))",
                        error.sqlstate());
        throw Error(std::string("could not read the definitions: ") + error.what(), error.sqlstate(), error.transient());
    }
    if (result.rows() != 1 || result.columns() != 1 || result.is_null(0, 0))
        throw Error("docsync.worker_definitions() returned no document; the extension and the worker do not match");
    return parse_definitions(result.get(0, 0));
}

}  // namespace docsync
