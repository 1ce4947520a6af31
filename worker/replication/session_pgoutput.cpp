// The session's pgoutput parts (see session.hpp): the decoder made for each session, and the
// read-back of committed streamed transactions.
#include "common/log.hpp"
#include "replication/pgoutput_publication.hpp"
#include "replication/session.hpp"

namespace docsync {

void Stream::Session::prepare_pgoutput() {
    std::optional<std::string> tables = options_.tables ? options_.tables() : std::nullopt;
    PgoutputPlan plan = plan_pgoutput(conn_, tables.value_or(""), cmd_deadline());
    const std::string publication = publication_name(options_.slot);
    info_.publication_changed = sync_publication(conn_, publication, plan, cmd_deadline());
    if (info_.publication_changed) {
        auto open = conn_.exec_simple("SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text "
                                      "FROM pg_catalog.pg_current_snapshot() s", cmd_deadline());
        if (open.get(0, 0) != open.get(0, 1)) info_.publication_open_below = std::stoull(std::string(open.get(0, 1)));
    } else if (publication_edited_since_slot(conn_, publication, options_.slot, cmd_deadline())) {
        // An edit since the slot's confirmed position, undone before this session (while no worker
        // looked, or since the last one did): what it hid was never sent. Recomputed as a gap.
        log_warning("stream", "publication " + publication +
                                  " was changed since the slot's last confirmed position (by hand, or by the last "
                                  "session's own set-up): recomputing every live doc for what it may have hidden");
        info_.publication_changed = true;
    }
    info_.publication_mark = publication_mark(conn_, publication, cmd_deadline());
    PgoutputOptions po;
    po.reference_xid = next_full_xid(conn_, cmd_deadline());
    // Protocol version 2 streams a transaction larger than the server's logical_decoding_work_mem
    // while it is in progress (PostgreSQL 14 and later); version 1 has the walsender spill it to
    // its own disk and send it at its commit.
    bool streaming = options_.pgoutput_streaming && conn_.server_version() >= 140000;
    po.proto_version = streaming ? pgoutput::kProtoVersionStream : 1;
    po.stream_memory = options_.stream_memory;
    pgoutput_.emplace(std::move(plan.watches), po);
    pgoutput_streaming_ = streaming;
}

void Stream::Session::replay_pgoutput() {
    // A committed streamed transaction, read back a held message at a time as if it came now: the
    // same caps hold it back, and the loop's timers keep running.
    decoded_.clear();
    std::size_t bytes = pgoutput_->replay(decoded_);
    for (std::size_t j = 0; j < decoded_.size(); ++j) {
        local_.records++;
        handle_record(decoded_[j], replay_wal_start_, j == 0 ? bytes : 0);
    }
}

}  // namespace docsync
