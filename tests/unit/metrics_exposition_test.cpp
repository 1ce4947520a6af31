// The Prometheus text format writer: escaping, one HELP and TYPE per family with its samples
// together, number formatting, and histograms (cumulative buckets up to +Inf, _sum, _count).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/histogram.hpp"
#include "metrics/exposition.hpp"

using namespace docsync;
using namespace docsync::metrics;

namespace {

std::size_t occurrences(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("label values escape backslash, double quote and line feed, help texts backslash and line feed") {
    CHECK(escape_label_value("plain") == "plain");
    CHECK(escape_label_value("a\\b") == "a\\\\b");
    CHECK(escape_label_value("say \"hi\"") == "say \\\"hi\\\"");
    CHECK(escape_label_value("two\nlines") == "two\\nlines");
    CHECK(escape_help("C:\\ \"q\"\nnext") == "C:\\\\ \"q\"\\nnext");

    Exposition out;
    out.counter("docsync_query_publishes_total", "Docs.", {{"query", "we\"ird\\na\nme"}}, 3);
    CHECK(out.text().find("docsync_query_publishes_total{query=\"we\\\"ird\\\\na\\nme\"} 3\n") != std::string::npos);
}

TEST_CASE("values: whole numbers without a fraction, others read back exactly, infinities and NaN spelled out") {
    CHECK(format_value(0) == "0");
    CHECK(format_value(42) == "42");
    CHECK(format_value(-3) == "-3");
    CHECK(format_value(0.25) == "0.25");
    CHECK(std::stod(format_value(0.1)) == 0.1);
    CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
    CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
    CHECK(format_value(std::nan("")) == "NaN");
}

TEST_CASE("each family gets one HELP and one TYPE line, its samples together, in first-written order") {
    Exposition out;
    out.counter("a_total", "A things.", {{"query", "x"}}, 1);
    out.gauge("b", "B now.", {}, 7);
    out.counter("a_total", "A things.", {{"query", "y"}}, 2);
    std::string text = out.text();
    CHECK(text ==
          "# HELP a_total A things.\n"
          "# TYPE a_total counter\n"
          "a_total{query=\"x\"} 1\n"
          "a_total{query=\"y\"} 2\n"
          "# HELP b B now.\n"
          "# TYPE b gauge\n"
          "b 7\n");
    CHECK(occurrences(text, "# TYPE a_total") == 1);
}

TEST_CASE("a histogram's buckets are cumulative, end with +Inf equal to the count, then _sum and _count") {
    static constexpr double bounds[] = {1, 2, 4};
    Histogram h(bounds);
    for (double v : {0.5, 1.0, 3.0, 3.5, 100.0}) h.observe(v);  // 1 is "le 1": the first bucket
    Exposition out;
    out.histogram("docsync_batch_size", "Docs per statement.", {}, h);
    out.histogram("docsync_compute_duration_seconds", "Seconds.", {{"query", "order"}}, h);
    out.histogram("docsync_compute_duration_seconds", "Seconds.", {{"query", "user"}}, Histogram(bounds));
    std::string text = out.text();
    CHECK(text.find("# HELP docsync_batch_size Docs per statement.\n"
                    "# TYPE docsync_batch_size histogram\n"
                    "docsync_batch_size_bucket{le=\"1\"} 2\n"
                    "docsync_batch_size_bucket{le=\"2\"} 2\n"
                    "docsync_batch_size_bucket{le=\"4\"} 4\n"
                    "docsync_batch_size_bucket{le=\"+Inf\"} 5\n"
                    "docsync_batch_size_sum 108\n"
                    "docsync_batch_size_count 5\n") == 0);
    // The query label comes first, le last; an empty histogram still shows every bucket at 0.
    CHECK(text.find("docsync_compute_duration_seconds_bucket{query=\"order\",le=\"+Inf\"} 5\n") != std::string::npos);
    CHECK(text.find("docsync_compute_duration_seconds_bucket{query=\"user\",le=\"4\"} 0\n") != std::string::npos);
    CHECK(text.find("docsync_compute_duration_seconds_count{query=\"user\"} 0\n") != std::string::npos);
    CHECK(occurrences(text, "# TYPE docsync_compute_duration_seconds histogram") == 1);
    CHECK(occurrences(text, "# HELP ") == 2);
}
