// Fuzz target: the config file parser, the size/duration/count/boolean parsers and the command line.
// The first byte picks the parser; the rest is its input. Every failure must be a SettingError (or a
// ParsedSettings with exit code 2), never a crash; what parses must print and read back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"

using namespace docsync;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 5) {
        case 0:
            try {
                auto values = parse_config_text(input, "fuzz.json");
                for (const auto& [key, value] : values) check(!key.empty() && key != "config");
            } catch (const SettingError&) {
            }
            break;
        case 1:
            try {
                auto bytes = parse_size(input);
                check(parse_size(format_size(bytes)) == bytes);
            } catch (const SettingError&) {
            }
            break;
        case 2:
            try {
                auto duration = parse_duration(input);
                check(duration.count() >= 0);
                check(parse_duration(format_duration(duration)) == duration);
            } catch (const SettingError&) {
            }
            break;
        case 3:
            try {
                parse_count(input);
            } catch (const SettingError&) {
            }
            try {
                parse_bool(input);
            } catch (const SettingError&) {
            }
            break;
        case 4: {
            // Arguments separated by newlines. Config files are not read: a fuzzed path could name a
            // device that blocks.
            if (input.find("config") != std::string_view::npos) break;
            std::vector<std::string> args{"docsync-worker"};
            std::size_t start = 0;
            while (start <= input.size() && args.size() < 64) {
                auto end = input.find('\n', start);
                if (end == std::string_view::npos) end = input.size();
                args.emplace_back(input.substr(start, end - start));
                start = end + 1;
            }
            std::vector<const char*> argv;
            for (auto& a : args) argv.push_back(a.c_str());
            const char* envp[] = {nullptr};
            auto parsed = parse_settings(static_cast<int>(argv.size()), argv.data(), envp);
            if (parsed.run) check(parsed.settings.pool >= 1 && parsed.settings.threads >= 1);
            else check(parsed.exit_code == 0 || (parsed.exit_code == 2 && !parsed.error.empty() &&
                                                 parsed.error.find('\n') == std::string::npos));
            break;
        }
    }
    return 0;
}
