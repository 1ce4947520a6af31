// The debug lines the fault tests' acknowledgement checker reads: the coordinator logs
// "register <end_lsn>" per transaction, "complete <end_lsn>" when its last item completes and
// "rebase <lsn>" on a new slot; nothing is built or written below the debug level.
#include <doctest/doctest.h>

#include <string>

#include "log_capture.hpp"
#include "progress/coordinator.hpp"

using namespace docsync;
using test::LogCapture;

TEST_CASE("log_enabled follows the level") {
    LogCapture log;
    set_log_level(LogLevel::Info);
    CHECK_FALSE(log_enabled(LogLevel::Debug));
    CHECK(log_enabled(LogLevel::Info));
    CHECK(log_enabled(LogLevel::Error));
    set_log_level(LogLevel::Debug);
    CHECK(log_enabled(LogLevel::Debug));
}

TEST_CASE("the coordinator logs register, complete and rebase at debug level only") {
    LogCapture log;
    DeliveryProgressCoordinator coordinator;
    set_log_level(LogLevel::Info);
    auto quiet = coordinator.register_txn(0x1000);
    coordinator.complete(quiet);
    CHECK(log.text().find("[progress]") == std::string::npos);

    set_log_level(LogLevel::Debug);
    auto first = coordinator.register_txn(0x16B3F28);
    auto second = coordinator.register_txn(0x16B4000);
    coordinator.complete(second);  // out of order: complete, not yet acknowledged
    std::string text = log.text();
    CHECK(text.find("DEBUG [progress] register 0/16B3F28\n") != std::string::npos);
    CHECK(text.find("DEBUG [progress] register 0/16B4000\n") != std::string::npos);
    CHECK(text.find("DEBUG [progress] complete 0/16B4000\n") != std::string::npos);
    CHECK(text.find("complete 0/16B3F28") == std::string::npos);
    coordinator.complete(first);
    coordinator.rebase(0x2000000);
    text = log.text();
    CHECK(text.find("DEBUG [progress] complete 0/16B3F28\n") != std::string::npos);
    CHECK(text.find("DEBUG [progress] rebase 0/2000000\n") != std::string::npos);
}
