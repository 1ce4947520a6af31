// A compute's statements and its snapshot check; the contract is in compute_statements.hpp.
#include "executor/compute_statements.hpp"

#include "common/error.hpp"
#include "executor/runner.hpp"
#include "executor/snapshot.hpp"

namespace docsync {

ComputeStatements compute_statements(const std::string& search_path, const std::string& reader_role,
                                     const std::string& sql, const SqlArgs& args, ComputeForm form) {
    // The transaction's snapshot is taken by its first statement, the check's.
    // The position is where WAL is inserted, not written: an asynchronous commit is visible before
    // its WAL is written, and the version must still cover every commit the snapshot sees.
    pg::Params search{search_path.empty() ? std::nullopt : std::optional<std::string>(search_path)};
    // A portable install's compute_as lends the reader role by a GRANT, which needs a read-write
    // transaction; it makes the transaction read-only itself once lent, before the query runs.
    pg::Statement begin{form.lend ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ WRITE"
                             : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                        {}};
    // With a reader role, docsync.compute_as sets the role and the search_path for the rest of the
    // transaction and refuses any other role change in it (plugin/reader.c), so the query reads only
    // what its definer was granted through docsync.grant_reader. The position is read before it, in
    // a subquery: a lending may wait for another transaction.
    if (!reader_role.empty()) search.push_back(reader_role);
    // The SELECTs stay prepared on the connection: a compute is planned once, not every time.
    // Not in a portable install: prepared statements are the session's, outside any transaction, and
    // a query can PREPARE and DEALLOCATE (compute_as there is no security-restricted operation), so
    // another definer's compute could replace one under its name and run as the next reader role lent
    // on this connection. There every statement is unnamed, and the cleanup deallocates whatever the
    // query prepared.
    const bool keep_prepared = form.keep_prepared;
    pg::Statement snapshot_check{
        reader_role.empty()
            ? "SELECT pg_catalog.pg_current_snapshot()::text, pg_catalog.pg_is_in_recovery(),"
              " CASE WHEN $1::text IS NOT NULL THEN pg_catalog.set_config('search_path', $1, true) END,"
              " CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()"
              "      ELSE pg_catalog.pg_current_wal_insert_lsn() END"
            : "SELECT s.snapshot, s.recovery, docsync.compute_as($2, $1), s.lsn FROM ("
              " SELECT pg_catalog.pg_current_snapshot()::text AS snapshot, pg_catalog.pg_is_in_recovery() AS recovery,"
              "  CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()"
              "       ELSE pg_catalog.pg_current_wal_insert_lsn() END AS lsn OFFSET 0) s",
        search, false, keep_prepared};
    std::vector<pg::Statement> cleanup{{"ROLLBACK", {}}, {"SELECT pg_catalog.pg_advisory_unlock_all()", {}, true, keep_prepared}};
    if (!keep_prepared) cleanup.push_back({"DEALLOCATE ALL", {}, true});
    return ComputeStatements{
        std::move(begin),
        std::move(snapshot_check),
        form.lend ? pg::Statement{runner::call(reader_role), runner::call_params(sql, args), !form.reader_check, false}
                  : pg::Statement{sql, args, !form.reader_check, keep_prepared},
        pg::Statement{"SELECT current_user::pg_catalog.text, pg_catalog.current_setting('search_path')", {}, true,
                      keep_prepared},
        std::move(cleanup),
    };
}

OutcomeKind judge_snapshot(const std::vector<pg::Step>& steps, const Visibility& need, bool& standby,
                           Lsn& snapshot_lsn) {
    for (std::size_t i : {0u, 1u})
        if (steps[i].error) throw *steps[i].error;
    const pg::Result& r = steps[1].result;
    bool in_recovery = r.get(0, 1) == "t";
    if (!r.is_null(0, 3)) snapshot_lsn = parse_lsn(r.get(0, 3)).value_or(0);
    if (in_recovery != standby) {
        standby = in_recovery;  // promoted or demoted under us: check again the right way
        return OutcomeKind::NotVisible;
    }
    if (!in_recovery) {
        auto snapshot = parse_snapshot(r.get(0, 0));
        if (!snapshot) throw Error("could not parse pg_current_snapshot(): " + std::string(r.get(0, 0)));
        for (auto xid : need.xids)
            if (!snapshot->sees_committed(xid)) return OutcomeKind::NotVisible;
    }
    return OutcomeKind::Ok;
}

}  // namespace docsync
