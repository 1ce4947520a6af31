// The portable status table's names; see portable_names.hpp.
#include "status/portable_names.hpp"

namespace docsync::status {

std::string portable_state_name(WorkerState state) {
    switch (state) {
        case WorkerState::Starting: return "starting";
        case WorkerState::Connecting: return "connecting";
        case WorkerState::Streaming: return "streaming";
        case WorkerState::Reconnecting: return "reconnecting";
        case WorkerState::ValveReset: return "reconnecting";  // the slot is being made anew
        case WorkerState::Draining: return "draining";
        case WorkerState::Stopped: return "stopped";
    }
    return "starting";
}

std::optional<std::string> portable_recompute_name(std::uint32_t reason) {
    switch (reason) {
        case DOCSYNC_RECOMPUTE_STARTUP: return "startup";
        case DOCSYNC_RECOMPUTE_VALVE: return "valve";
        // Changes the stream never delivers: a new slot or server, a publication that gained tables.
        case DOCSYNC_RECOMPUTE_NEW_SLOT:
        case DOCSYNC_RECOMPUTE_NEW_SERVER:
        case DOCSYNC_RECOMPUTE_PUBLICATION: return "gap";
        case DOCSYNC_RECOMPUTE_SINK_RESET: return "sink";
        case DOCSYNC_RECOMPUTE_SETTINGS: return "definitions";
    }
    return std::nullopt;
}

}  // namespace docsync::status
