// Sizes and durations with units, counts and booleans: what users type in flags, environment
// variables and the config file.
#include <doctest/doctest.h>

#include "config/settings.hpp"

using namespace docsync;
using namespace std::chrono_literals;

TEST_CASE("sizes take B, kB, MB, GB and TB as powers of 1024, a bare number is bytes") {
    CHECK(parse_size("4096") == 4096);
    CHECK(parse_size("0") == 0);
    CHECK(parse_size("10B") == 10);
    CHECK(parse_size("512kB") == 512 * 1024);
    CHECK(parse_size("1MB") == 1024 * 1024);
    CHECK(parse_size("1GB") == 1024ull * 1024 * 1024);
    CHECK(parse_size("2TB") == 2ull << 40);
    CHECK(parse_size("16 MB") == 16ull << 20);
    CHECK(parse_size(" 1gb ") == 1ull << 30);
    CHECK(parse_size("1KiB") == 1024);
    CHECK(parse_size("3GiB") == 3ull << 30);
}

TEST_CASE("other spellings of the units are refused, naming the one to write") {
    CHECK_THROWS_WITH_AS(parse_size("3G"), "unknown size unit \"G\"; did you mean 3GB? (units: B, kB, MB, GB, TB)", SettingError);
    CHECK_THROWS_WITH_AS(parse_size("16k"), doctest::Contains("did you mean 16kB?"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("2m"), doctest::Contains("did you mean 2MB?"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("5sec"), "unknown duration unit \"sec\"; did you mean 5s? (units: ms, s, min, h, d)",
                         SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("2 minutes"), doctest::Contains("did you mean 2min?"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("1hr"), doctest::Contains("did you mean 1h?"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("3days"), doctest::Contains("did you mean 3d?"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("20msec"), doctest::Contains("did you mean 20ms?"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("5m"), "\"m\" is ambiguous; write 5min for minutes or 5ms for milliseconds",
                         SettingError);
    // A unit is shown quoted, control bytes escaped: the message stays one line.
    CHECK_THROWS_WITH_AS(parse_size("1X\nY"), doctest::Contains("unknown size unit \"X\\x0aY\""), SettingError);
}

TEST_CASE("a malformed size is refused with the fix") {
    CHECK_THROWS_WITH_AS(parse_size(""), doctest::Contains("give a whole number with a unit, e.g. 1GB"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("GB"), doctest::Contains("not a size"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("1.5GB"), doctest::Contains("whole number with a smaller unit"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("-1MB"), doctest::Contains("no sign"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("1PB"), doctest::Contains("use B, kB, MB, GB or TB"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("5s"), doctest::Contains("unknown size unit"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("99999999999999999999"), doctest::Contains("too large"), SettingError);
    CHECK_THROWS_WITH_AS(parse_size("17179869184TB"), doctest::Contains("too large"), SettingError);
}

TEST_CASE("durations take ms, s, min, h and d, and require a unit") {
    CHECK(parse_duration("250ms") == 250ms);
    CHECK(parse_duration("5s") == 5s);
    CHECK(parse_duration("2min") == 2min);
    CHECK(parse_duration("1h") == 1h);
    CHECK(parse_duration("1d") == 24h);
    CHECK(parse_duration(" 10 s ") == 10s);
    CHECK(parse_duration("0s") == 0ms);
    CHECK_THROWS_WITH_AS(parse_duration("5"), doctest::Contains("without a unit; add ms, s, min, h or d"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("5m"), doctest::Contains("ambiguous"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("5 fortnights"), doctest::Contains("unknown duration unit"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("0.5s"), doctest::Contains("smaller unit"), SettingError);
    CHECK_THROWS_WITH_AS(parse_duration("999999999999999999d"), doctest::Contains("too large"), SettingError);
}

TEST_CASE("counts are plain digits and booleans take the usual spellings") {
    CHECK(parse_count("10000") == 10000);
    CHECK(parse_count(" 4 ") == 4);
    CHECK_THROWS_WITH_AS(parse_count("4k"), doctest::Contains("digits only"), SettingError);
    CHECK_THROWS_WITH_AS(parse_count("four"), "not a whole number; give digits only, e.g. 4", SettingError);
    for (auto t : {"true", "TRUE", "yes", "on", "1"}) CHECK(parse_bool(t));
    for (auto f : {"false", "No", "off", "0"}) CHECK_FALSE(parse_bool(f));
    CHECK_THROWS_WITH_AS(parse_bool("maybe"), doctest::Contains("give true or false"), SettingError);
}

TEST_CASE("sizes and durations print in the largest whole unit, and read back") {
    CHECK(format_size(1ull << 30) == "1GB");
    CHECK(format_size(512 * 1024) == "512kB");
    CHECK(format_size(1000) == "1000B");
    CHECK(format_size(0) == "0B");
    CHECK(format_duration(5s) == "5s");
    CHECK(format_duration(250ms) == "250ms");
    CHECK(format_duration(2min) == "2min");
    CHECK(format_duration(90s) == "90s");
    for (std::uint64_t v : {0ull, 1ull, 1023ull, 1024ull, 1536ull, 1ull << 40, 3ull << 20}) CHECK(parse_size(format_size(v)) == v);
    for (auto d : {0ms, 1ms, 999ms, 1000ms, 61000ms, 3600000ms, 86400000ms})
        CHECK(parse_duration(format_duration(d)) == d);
}
