#pragma once
// What the status thread reads from the stream, the coordinator and the engine, as the plain values
// the status component takes (the board and the /metrics body).

#include "common/clock.hpp"
#include "engine/engine.hpp"
#include "progress/commit_latency.hpp"
#include "progress/coordinator.hpp"
#include "replication/stream.hpp"
#include "status/snapshot.hpp"

namespace docsync::lifecycle {

// The stream's state in the status view's terms.
status::StreamPhase stream_phase(StreamState state);

status::Readings read_status(const Stream& stream, const DeliveryProgressCoordinator& coordinator,
                             const Engine& engine, const CommitLatency& latency, const Clock& clock);

}  // namespace docsync::lifecycle
