#pragma once
// The statements of one compute's transaction, and the check of its snapshot: what Executor::in_compute
// sends, kept apart from how it sends them (the pool, the pipeline, the outcomes).

#include <string>
#include <vector>

#include "common/lsn.hpp"
#include "engine/seams.hpp"
#include "pg/connection.hpp"

namespace docsync {

struct ComputeStatements {
    pg::Statement begin;           // step 0
    pg::Statement snapshot_check;  // step 1: the snapshot, recovery state and position; sets the reader
    pg::Statement query;           // step 2
    pg::Statement held;            // step 3 when the reader is checked: current_user and search_path
    // Each a group of its own, so each runs whatever came before: no transaction, no advisory locks,
    // and in a portable install no statement prepared.
    std::vector<pg::Statement> cleanup;
};

struct ComputeForm {
    // A portable install: the reader role is lent by a GRANT (the transaction begins read-write), and
    // the query runs inside the reader role's runner (executor/runner.hpp), whose rows come back as
    // record texts for runner::unpack.
    bool lend = false;
    bool keep_prepared = true;  // the SELECTs stay prepared (never in a portable install)
    bool reader_check = false;  // `held` follows the query in its group
};

ComputeStatements compute_statements(const std::string& search_path, const std::string& reader_role,
                                     const std::string& sql, const SqlArgs& args, ComputeForm form);

// The check of a compute's snapshot (steps 0 and 1 of its pipeline): Ok, or NotVisible when it misses
// a transaction the compute completes (or the server changed role, which `standby` follows). Throws
// the error of either step.
OutcomeKind judge_snapshot(const std::vector<pg::Step>& steps, const Visibility& need, bool& standby,
                           Lsn& snapshot_lsn);

}  // namespace docsync
