// A table's names: finding a setting by name or by a typo of it, its environment variable, and the
// --help and --version texts.
#include <algorithm>
#include <cctype>
#include <sstream>

#include "settings/table.hpp"

namespace docsync::settings {

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

}  // namespace

const Entry* find(const Table& table, std::string_view name) {
    for (const auto& entry : table)
        if (name == entry.name) return &entry;
    return nullptr;
}

std::string env_name(const Program& program, std::string_view name) {
    std::string out(program.env_prefix);
    for (char c : name) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    return out;
}

const Entry* closest(const Table& table, std::string_view key) {
    std::string probe = lower(key);
    std::replace(probe.begin(), probe.end(), '_', '-');
    const Entry* best = nullptr;
    // Close means fewer than 4 edits, and fewer than half the name's length: "x" is no typo of "dsn".
    std::size_t best_distance = std::min<std::size_t>(4, probe.size() / 2 + 1);
    if (probe.size() <= 64) {
        for (const auto& entry : table) {
            auto d = edit_distance(probe, entry.name);
            if (d < best_distance) {
                best_distance = d;
                best = &entry;
            }
        }
    }
    return best;
}

std::string suggestion(const Program& program, const Table& table, std::string_view key) {
    if (const Entry* best = closest(table, key)) return "; did you mean \"" + std::string(best->name) + "\"?";
    return "; remove it (" + std::string(program.name) + " --help lists the settings)";
}

std::string help_text(const Program& program, const Table& table) {
    std::ostringstream out;
    out << program.help_intro << "Settings (default in brackets):\n";
    for (const auto& entry : table) {
        // Built by appending: GCC 12 reports a false -Wrestrict for "literal" + std::string at -O2.
        std::string left = "  --";
        left += entry.name;
        if (entry.kind != Kind::Flag) {
            left += ' ';
            left += entry.value_name;
        }
        out << left;
        if (left.size() < 34) out << std::string(34 - left.size(), ' ');
        else out << "\n" << std::string(34, ' ');
        // The description, wrapped at 100 columns under its column.
        std::string described(entry.help);
        described.append(" [").append(entry.shown_default).append("]");
        std::istringstream words(described);
        std::size_t column = 34;
        std::string word;
        bool first = true;
        while (words >> word) {
            if (!first && column + 1 + word.size() > 100) {
                out << "\n" << std::string(34, ' ');
                column = 34;
                first = true;
            }
            if (!first) {
                out << ' ';
                ++column;
            }
            out << word;
            column += word.size();
            first = false;
        }
        out << "\n";
    }
    out << "  -h, --help                      print this help and exit\n"
        << "  --version                       print the version and exit\n\n"
        << program.help_notes;
    return out.str();
}

std::string version_text(const Program& program) { return std::string(program.name) + " " + DOCSYNC_VERSION + "\n"; }

}  // namespace docsync::settings
