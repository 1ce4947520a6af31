// The Prometheus text exposition format (version 0.0.4): escaping, number formatting and the
// grouping of samples under their family's HELP and TYPE lines.
#include "metrics/exposition.hpp"

#include <charconv>
#include <cmath>
#include <limits>

namespace docsync::metrics {

namespace {

// name{k="v",…} value
void write_sample(std::string& out, std::string_view name, const Labels& labels, std::string_view value) {
    out += name;
    if (!labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (i) out += ',';
            out += labels[i].first;
            out += "=\"";
            out += escape_label_value(labels[i].second);
            out += '"';
        }
        out += '}';
    }
    out += ' ';
    out += value;
    out += '\n';
}

}  // namespace

std::string escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string escape_help(std::string_view help) {
    std::string out;
    out.reserve(help.size());
    for (char c : help) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string format_value(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    // Counts are whole numbers: written as such up to 2^53, where a double stops holding every one.
    if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0)
        return std::to_string(static_cast<long long>(value));
    char buffer[32];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

std::string& Exposition::family(std::string_view name, std::string_view type, std::string_view help) {
    for (auto& f : families_)
        if (f.name == name) return f.lines;
    Family f;
    f.name = std::string(name);
    f.lines = "# HELP " + f.name + " " + escape_help(help) + "\n# TYPE " + f.name + " " + std::string(type) + "\n";
    families_.push_back(std::move(f));
    return families_.back().lines;
}

void Exposition::counter(std::string_view name, std::string_view help, const Labels& labels, double value) {
    write_sample(family(name, "counter", help), name, labels, format_value(value));
}

void Exposition::gauge(std::string_view name, std::string_view help, const Labels& labels, double value) {
    write_sample(family(name, "gauge", help), name, labels, format_value(value));
}

void Exposition::histogram(std::string_view name, std::string_view help, const Labels& labels,
                           const Histogram& histogram) {
    std::string& out = family(name, "histogram", help);
    std::string base(name);
    Labels with_le = labels;
    with_le.emplace_back("le", "");
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= histogram.bounds.size(); ++i) {
        cumulative += i < histogram.counts.size() ? histogram.counts[i] : 0;
        with_le.back().second =
            format_value(i < histogram.bounds.size() ? histogram.bounds[i] : std::numeric_limits<double>::infinity());
        write_sample(out, base + "_bucket", with_le, format_value(static_cast<double>(cumulative)));
    }
    write_sample(out, base + "_sum", labels, format_value(histogram.sum));
    write_sample(out, base + "_count", labels, format_value(static_cast<double>(histogram.count)));
}

std::string Exposition::text() const {
    std::string out;
    for (const auto& f : families_) out += f.lines;
    return out;
}

}  // namespace docsync::metrics
