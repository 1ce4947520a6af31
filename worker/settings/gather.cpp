// The sources of settings, read against a table and ranked: the command line, the <PREFIX><NAME>
// environment variables and the config file, each setting taking the values of its first source
// given (flag > environment > config file).
#include <algorithm>
#include <map>

#include "settings/table.hpp"

namespace docsync::settings {

namespace {

// The command line as given: each setting's values (a switch without a value is "true").
struct CommandLine {
    bool help = false;
    bool version = false;
    std::vector<std::vector<std::string>> values;  // per setting, in table order
    std::string error;                             // the first problem, one line, without the program name
};

// How to write a setting with a value: "--pool 4" (its default, when that reads back) or "--dsn CONNINFO".
std::string usage_of(const Entry& entry) {
    std::string flag = "--" + std::string(entry.name);
    if (entry.default_reads_back) return "e.g. " + flag + " " + entry.shown_default;
    return "as in " + flag + " " + std::string(entry.value_name);
}

// An option as typed, for a message: quoted when it holds a control byte, so the message stays one line.
std::string shown_option(const std::string& text) {
    bool plain = std::none_of(text.begin(), text.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
    });
    return plain ? text : quote_text(text);
}

// Reads --name VALUE, --name=VALUE and switches (--name, --name=false). -h/--help and --version
// anywhere win over everything else.
CommandLine read_command_line(const Program& program, const Table& table, const std::vector<std::string>& args) {
    CommandLine line;
    line.values.resize(table.size());
    for (const auto& arg : args) {
        if (arg == "-h" || arg == "--help") {
            line.help = true;
            return line;
        }
        if (arg == "--version") {
            line.version = true;
            return line;
        }
    }
    const std::string help = std::string(program.name) + " --help lists the settings";
    // "unknown option --x; did you mean --y?" when a setting is close, else the pointer to --help.
    auto unknown = [&](const std::string& shown, const Entry* close) {
        return "unknown option " + shown_option(shown) +
               (close ? "; did you mean --" + std::string(close->name) + "?" : "; " + help);
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        bool long_option = arg.size() > 2 && arg.rfind("--", 0) == 0;
        if (!long_option && arg.size() > 1 && arg[0] == '-') {
            auto letters = arg.find_first_not_of('-');
            std::string name = letters == std::string::npos ? std::string() : arg.substr(letters);
            name = name.substr(0, name.find('='));
            const Entry* close = name.empty() ? nullptr : find(table, name);
            if (!close && !name.empty()) close = closest(table, name);
            line.error = unknown(arg.substr(0, arg.find('=')), close);
            return line;
        }
        if (!long_option) {
            line.error = "unexpected argument " + quote_text(arg) + ": ";
            if (arg.find('=') != std::string::npos && i > 0)
                line.error += "a value that holds spaces needs quotes, e.g. " + std::string(program.quoting_example);
            else
                line.error += "settings are given as --name VALUE (" + help + ")";
            return line;
        }
        auto eq = arg.find('=');
        std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        const Entry* entry = find(table, name);
        if (!entry) {
            line.error = unknown("--" + name, closest(table, name));
            return line;
        }
        std::string value;
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
        } else if (entry->kind == Kind::Flag) {
            if (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-')) {
                line.error = "--" + name + " takes no separate value (" + quote_text(args[i + 1]) + "): write --" +
                             name + " to turn it on, or --" + name + "=false to turn it off";
                return line;
            }
            value = "true";
        } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
            value = args[++i];
        } else {
            line.error = "--" + name + " needs a value, " + usage_of(*entry);
            return line;
        }
        auto& values = line.values[static_cast<std::size_t>(entry - table.data())];
        if (!values.empty() && entry->kind != Kind::List) {
            line.error = "--" + name + " is given twice (" + quote_text(values.front()) + ", then " + quote_text(value) +
                         "); keep one";
            return line;
        }
        values.push_back(value);
    }
    return line;
}

// The program's variables: NAME=value entries under its prefix, without another program's.
std::map<std::string, std::string> read_environment(const Program& program, const char* const* envp) {
    std::map<std::string, std::string> environment;
    for (auto p = envp; p && *p; ++p) {
        std::string_view entry(*p);
        if (entry.rfind(program.env_prefix, 0) != 0) continue;
        if (!program.foreign_env_prefix.empty() && entry.rfind(program.foreign_env_prefix, 0) == 0) continue;
        auto eq = entry.find('=');
        if (eq == std::string_view::npos) continue;
        environment.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    return environment;
}

}  // namespace

Gathered gather(const Program& program, const Table& table, const std::vector<std::string>& args,
                const char* const* envp) {
    Gathered gathered;
    // 1. The command line: every setting is captured as text when given.
    CommandLine line = read_command_line(program, table, args);
    gathered.help = line.help;
    gathered.version = line.version;
    gathered.error = line.error;
    if (line.help || line.version || !line.error.empty()) return gathered;

    // 2. The environment: <PREFIX><NAME>.
    std::map<std::string, std::string> environment = read_environment(program, envp);

    // 3. The config file named by --config or <PREFIX>CONFIG.
    std::vector<std::pair<std::string, std::string>> file_values;
    std::string config_path;
    if (const Entry* config = find(table, "config")) {
        const auto& flag = line.values[static_cast<std::size_t>(config - table.data())];
        auto variable = environment.find(env_name(program, "config"));
        if (!flag.empty()) config_path = flag.front();
        else if (variable != environment.end()) config_path = variable->second;
        if (!flag.empty() || variable != environment.end()) {
            if (trim(config_path).empty()) {
                gathered.error = "--config: must not be empty; give the path of a JSON config file, e.g. " +
                                 std::string(program.config_path_example);
                return gathered;
            }
            try {
                file_values = parse_config_text(program, table, read_config_file(program, config_path), config_path);
            } catch (const SettingError& e) {
                gathered.error = e.what();
                return gathered;
            }
        }
    }

    // 4. Rank: flag > environment > config file.
    gathered.values.resize(table.size());
    gathered.given.resize(table.size());
    for (std::size_t i = 0; i < table.size(); ++i) {
        const Entry& entry = table[i];
        // The values of the source that wins, each with where it came from for a message. A List
        // setting's environment variable and config key hold one value per line.
        auto& given = gathered.values[i];
        auto split = [&](const std::string& text, const std::string& prefix) {
            if (entry.kind != Kind::List) {
                given.push_back({text, prefix + quote_text(text)});
                return;
            }
            std::size_t start = 0;
            while (start <= text.size()) {
                auto end = std::min(text.find('\n', start), text.size());
                std::string item = text.substr(start, end - start);
                if (!trim(item).empty()) given.push_back({item, prefix + quote_text(item)});
                start = end + 1;
            }
        };
        if (!line.values[i].empty()) {
            for (const auto& value : line.values[i])
                given.push_back({value, "--" + std::string(entry.name) + " " + quote_text(value)});
        } else if (auto it = environment.find(env_name(program, entry.name)); it != environment.end()) {
            split(it->second, it->first + "=");
        } else {
            auto found = std::find_if(file_values.begin(), file_values.end(),
                                      [&](const auto& kv) { return kv.first == entry.name; });
            if (found == file_values.end()) continue;
            split(found->second, "config file " + quote_text(config_path) + ": " + quote_text(entry.name) + ": ");
        }
        gathered.given[i] = true;
    }
    return gathered;
}

}  // namespace docsync::settings
