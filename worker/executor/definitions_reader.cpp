// Reading contract B's document (docs/design.md) from the extension.
#include "executor/definitions_reader.hpp"

#include "common/error.hpp"
#include "common/sqlstate.hpp"

namespace docsync {

namespace {

// Whether the connection's role may stream a slot (REPLICATION, or a superuser): a role that may not
// and cannot read the definitions either is the reader role given as --dsn, not a missing grant.
bool may_replicate(pg::Connection& connection, pg::Deadline deadline) {
    Error error("");
    auto result = connection.try_exec(
        "SELECT rolreplication OR rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user", {}, deadline,
        &error);
    return !result || result.rows() != 1 || result.get(0, 0) == "t";  // unknown: the usual hint
}

}  // namespace

Definitions read_definitions(pg::Connection& connection, pg::Deadline deadline) {
    Error error("");
    auto result = connection.try_exec("SELECT docsync.worker_definitions()::text", {}, deadline, &error);
    if (!result) {
        if (error.sqlstate() == sqlstate::kInvalidSchemaName || error.sqlstate() == sqlstate::kUndefinedFunction)
            throw Error("docsync.worker_definitions() does not exist in this database: run CREATE EXTENSION docsync "
                        "(or ALTER EXTENSION docsync UPDATE) in the database --dsn connects to",
                        error.sqlstate());
        if (error.sqlstate() == sqlstate::kInsufficientPrivilege) {
            if (!may_replicate(connection, deadline))
                throw Error(std::string("could not read the definitions: ") + error.what() + ": the --dsn role \"" +
                                connection.user() +
                                "\" has no REPLICATION attribute, so it looks like the reader role: --dsn and "
                                "--pool-dsn look swapped (or both name the reader). --dsn takes the replication role "
                                "(the one docsync.grant_replication was given) and --pool-dsn the reader role "
                                "(docsync.grant_reader's)",
                            error.sqlstate());
            throw Error(std::string("could not read the definitions: ") + error.what() +
                            " (grant the --dsn role what it reads: SELECT docsync.grant_replication('<role>'))",
                        error.sqlstate());
        }
        throw Error(std::string("could not read the definitions: ") + error.what(), error.sqlstate(), error.transient());
    }
    if (result.rows() != 1 || result.columns() != 1 || result.is_null(0, 0))
        throw Error("docsync.worker_definitions() returned no document; the extension and the worker do not match");
    return parse_definitions(result.get(0, 0));
}

}  // namespace docsync
