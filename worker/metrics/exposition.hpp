#pragma once
// The Prometheus text exposition format, version 0.0.4: a tiny writer, no client library (Debian 12
// packages no prometheus-cpp, and the worker exposes a few dozen series it already counts).
//
//   Exposition out;
//   out.counter("docsync_changes_total", "Row changes handled.", {}, 42);
//   out.gauge("docsync_dirty_docs", "Docs waiting for a compute.", {}, 3);
//   std::string text = out.text();
//
// A family's samples come out together under one `# HELP` and one `# TYPE` line, in the order the
// families were first written, however the calls interleave. Label values and help texts are
// escaped as the format requires; names are the caller's (fixed strings in the worker).
//
// Threads: one Exposition belongs to one thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/histogram.hpp"

namespace docsync::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A label value as the format writes it between quotes: \ as \\, " as \", a line feed as \n.
std::string escape_label_value(std::string_view value);
// A help text: \ as \\, a line feed as \n (quotes stay).
std::string escape_help(std::string_view help);
// A sample value: integers without a fraction, others in the shortest form that reads back the
// same, +Inf, -Inf and NaN as the format spells them.
std::string format_value(double value);

class Exposition {
public:
    void counter(std::string_view name, std::string_view help, const Labels& labels, double value);
    void gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
    // name_bucket{le="…"} cumulative up to le="+Inf" (the count), then name_sum and name_count.
    void histogram(std::string_view name, std::string_view help, const Labels& labels, const Histogram& histogram);

    // The whole exposition, every line ending in a line feed.
    std::string text() const;

private:
    struct Family {
        std::string name;
        std::string lines;
    };
    // The family `name` (its HELP and TYPE lines written when it is new).
    std::string& family(std::string_view name, std::string_view type, std::string_view help);

    std::vector<Family> families_;
};

}  // namespace docsync::metrics
