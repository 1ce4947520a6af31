#pragma once
// The sink's watch while the worker starts: between opening its sink and streaming, a worker may
// wait long (reading definitions behind a migration's lock). Its status file says from the start
// that the sink is unchecked (waits hold); this watch checks the sink every second meanwhile and
// says in the file whether it is, so docsync.wait_published answers for what the sink holds, and a
// sink that loses its docs meanwhile (a Redis FLUSHALL) holds the waits until the worker, started,
// has recomputed them (docs/design.md, "The spare and its peers").

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/seams.hpp"
#include "status/status_board.hpp"

namespace docsync::status {

class SinkStartWatch {
public:
    SinkStartWatch(Publisher& publisher, StatusBoard& board);
    ~SinkStartWatch();  // stop()
    SinkStartWatch(const SinkStartWatch&) = delete;
    SinkStartWatch& operator=(const SinkStartWatch&) = delete;

    // Ends the watch; the sink's loss it saw, if any (the caller recomputes every live doc).
    std::optional<std::string> stop();

private:
    void run();

    Publisher& publisher_;
    StatusBoard& board_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::optional<std::string> lost_;
    std::thread thread_;
};

}  // namespace docsync::status
