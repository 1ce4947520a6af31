#pragma once
// A fixed-bucket histogram: counts of observations at or below each upper bound, plus their sum
// and count, the shape a Prometheus histogram exposes. A plain value: whoever owns one guards it
// (the engine updates its histograms under its own mutex and copies them out in stats()), so the
// hot path pays one search of a short array and no extra lock.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace docsync {

struct Histogram {
    std::span<const double> bounds;      // ascending upper bounds; the last bucket (+Inf) is implied
    std::vector<std::uint64_t> counts;   // per bucket, not cumulative: bounds.size() + 1 of them
    double sum = 0;
    std::uint64_t count = 0;

    // No default: a histogram without its bounds would have no bucket to count in.
    explicit Histogram(std::span<const double> upper_bounds)
        : bounds(upper_bounds), counts(upper_bounds.size() + 1, 0) {}

    void observe(double value) {
        // The first bucket whose bound is at least the value: Prometheus buckets are "le".
        auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
        ++counts[static_cast<std::size_t>(at)];
        sum += value;
        ++count;
    }
};

// Seconds one doc's compute took: from a millisecond to past the longest sensible statement_timeout.
inline constexpr double kComputeSecondsBounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,    1,     2.5,  5,     10,   30};
// Seconds from a transaction's commit to its docs published: a millisecond to five minutes (a
// stalled sink, a lock).
inline constexpr double kCommitPublishSecondsBounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                         0.5,   1,      2.5,   5,    10,    30,    60,  300};
// Docs computed by one statement: powers of two up to past --batch's default of 128.
inline constexpr double kBatchSizeBounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

}  // namespace docsync
