// The worker's settings from flags, environment variables and the config file: the precedence
// rule, defaults, validation with exit status 2 and one line naming the setting and the fix.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "config/settings.hpp"

using namespace docsync;
using namespace std::chrono_literals;

namespace {

const char* const kDsn = "--dsn=host=/tmp dbname=app user=docsync_repl";
const char* const kPoolDsn = "--pool-dsn=host=/tmp dbname=app user=docsync_reader";

ParsedSettings parse(std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<const char*> argv{"docsync-worker"};
    for (auto& a : args) argv.push_back(a.c_str());
    std::vector<const char*> envp;
    for (auto& e : env) envp.push_back(e.c_str());
    envp.push_back(nullptr);
    return parse_settings(static_cast<int>(argv.size()), argv.data(), envp.data());
}

// A config file in a temporary directory, removed at the end of the test.
struct TempConfig {
    std::string path;
    explicit TempConfig(const std::string& text) {
        char tmpl[] = "/tmp/docsync-config-XXXXXX";
        int fd = mkstemp(tmpl);
        REQUIRE(fd >= 0);
        close(fd);
        path = tmpl;
        std::ofstream(path) << text;
    }
    ~TempConfig() { std::remove(path.c_str()); }
};

bool is_one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

}  // namespace

TEST_CASE("defaults apply when a setting is given nowhere") {
    auto p = parse({kDsn, kPoolDsn});
    REQUIRE(p.run);
    const Settings& s = p.settings;
    CHECK(s.dsn == "host=/tmp dbname=app user=docsync_repl");
    CHECK(s.pool_dsn == "host=/tmp dbname=app user=docsync_reader");
    CHECK(s.slot == "docsync");
    CHECK_FALSE(s.create_slot);
    CHECK(s.plugin == "docsync");
    CHECK(s.sink == "stdout");
    CHECK(s.live == LiveMode::All);
    CHECK(s.live_poll == 5s);
    CHECK(s.pool == 4);
    CHECK(s.statement_timeout == 5s);
    CHECK(s.max_doc_bytes == 1ull << 20);
    CHECK(s.max_keys == 10000);
    CHECK(s.batch == 128);
    CHECK(s.max_retained_wal == 1ull << 30);
    CHECK(s.status_dir == "/run/docsync");
    CHECK(s.status_interval == 10s);
    CHECK(s.max_pending_txns == 100000);
    CHECK(s.max_pending_bytes == 256ull << 20);
    CHECK(s.config.empty());
    CHECK_FALSE(s.allow_unsafe_pool);
    CHECK(s.log_format == LogFormat::Text);
    CHECK(s.log_file.empty());
    CHECK(s.log_level == LogLevel::Info);
    CHECK(s.threads == 4);
    CHECK(s.warm.empty());
    CHECK(s.metrics_address.empty());
    CHECK(s.metrics_port == 0);
}

TEST_CASE("every setting is read from its flag") {
    auto p = parse({kDsn, kPoolDsn, "--slot", "shop_docs", "--create-slot", "--plugin", "PgOutput", "--sink", "redis://127.0.0.1:6390",
                    "--live", "subscribers", "--live-poll", "250ms", "--pool", "8", "--statement-timeout", "2min",
                    "--max-doc-bytes", "512kB", "--max-keys", "50", "--max-retained-wal", "64MB", "--status-dir",
                    "/tmp/st", "--status-interval", "1s", "--max-pending-txns", "7", "--max-pending-bytes", "1MB",
                    "--allow-unsafe-pool", "--log-format", "json", "--log-file", "/tmp/w.log", "--log-level",
                    "debug", "--threads", "3", "--warm", "db:order:42"});
    REQUIRE_MESSAGE(p.run, p.error);
    const Settings& s = p.settings;
    CHECK(s.slot == "shop_docs");
    CHECK(s.create_slot);
    CHECK(s.plugin == "pgoutput");
    CHECK(s.sink == "redis://127.0.0.1:6390");
    CHECK(s.live == LiveMode::Subscribers);
    CHECK(s.live_poll == 250ms);
    CHECK(s.pool == 8);
    CHECK(s.statement_timeout == 2min);
    CHECK(s.max_doc_bytes == 512 * 1024);
    CHECK(s.max_keys == 50);
    CHECK(s.max_retained_wal == 64ull << 20);
    CHECK(s.status_dir == "/tmp/st");
    CHECK(s.status_interval == 1s);
    CHECK(s.max_pending_txns == 7);
    CHECK(s.max_pending_bytes == 1ull << 20);
    CHECK(s.allow_unsafe_pool);
    CHECK(s.log_format == LogFormat::Json);
    CHECK(s.log_file == "/tmp/w.log");
    CHECK(s.log_level == LogLevel::Debug);
    CHECK(s.threads == 3);
    CHECK(s.warm == std::vector<std::string>{"db:order:42"});
}

TEST_CASE("threads default to the pool size wherever the pool size comes from") {
    CHECK(parse({kDsn, kPoolDsn, "--pool", "6"}).settings.threads == 6);
    CHECK(parse({kDsn, kPoolDsn}, {"DOCSYNC_POOL=9"}).settings.threads == 9);
    CHECK(parse({kDsn, kPoolDsn, "--pool", "6", "--threads", "2"}).settings.threads == 2);
}

TEST_CASE("precedence: flag > environment > config file > default") {
    TempConfig file(R"({"max-retained-wal": "2GB", "pool": 3, "slot": "from_file", "sink": "file:/tmp/f.jsonl"})");
    std::string config = "--config=" + file.path;

    // Only the file: the file wins over the defaults.
    auto p = parse({kDsn, kPoolDsn, config});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_retained_wal == 2ull << 30);
    CHECK(p.settings.pool == 3);
    CHECK(p.settings.slot == "from_file");
    CHECK(p.settings.sink == "file:/tmp/f.jsonl");
    CHECK(p.settings.config == file.path);

    // The environment wins over the file.
    p = parse({kDsn, kPoolDsn, config}, {"DOCSYNC_MAX_RETAINED_WAL=3GB", "DOCSYNC_SLOT=from_env"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_retained_wal == 3ull << 30);
    CHECK(p.settings.slot == "from_env");
    CHECK(p.settings.pool == 3);

    // The flag wins over both.
    p = parse({kDsn, kPoolDsn, config, "--max-retained-wal", "4GB"}, {"DOCSYNC_MAX_RETAINED_WAL=3GB"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_retained_wal == 4ull << 30);
}

TEST_CASE("the config file can hold every setting but config, including the connection strings") {
    TempConfig file(R"({
        "dsn": "host=/tmp user=docsync_repl", "pool-dsn": "host=/tmp user=docsync_reader",
        "create-slot": true, "allow-unsafe-pool": false, "max-doc-bytes": 2048, "live-poll": "2s",
        "log-format": "json", "log-level": "warning", "threads": "5"
    })");
    auto p = parse({"--config", file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.dsn == "host=/tmp user=docsync_repl");
    CHECK(p.settings.pool_dsn == "host=/tmp user=docsync_reader");
    CHECK(p.settings.create_slot);
    CHECK(p.settings.max_doc_bytes == 2048);
    CHECK(p.settings.live_poll == 2s);
    CHECK(p.settings.log_format == LogFormat::Json);
    CHECK(p.settings.log_level == LogLevel::Warning);
    CHECK(p.settings.threads == 5);
}

TEST_CASE("DOCSYNC_CONFIG names the config file, --config wins over it") {
    TempConfig a(R"({"slot": "from_a"})");
    TempConfig b(R"({"slot": "from_b"})");
    auto p = parse({kDsn, kPoolDsn}, {"DOCSYNC_CONFIG=" + a.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.slot == "from_a");
    p = parse({kDsn, kPoolDsn, "--config", b.path}, {"DOCSYNC_CONFIG=" + a.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.slot == "from_b");
}

TEST_CASE("flags as environment variables take true and false, and a flag can say false") {
    CHECK(parse({kDsn, kPoolDsn}, {"DOCSYNC_CREATE_SLOT=true"}).settings.create_slot);
    CHECK_FALSE(parse({kDsn, kPoolDsn}, {"DOCSYNC_CREATE_SLOT=0"}).settings.create_slot);
    CHECK_FALSE(parse({kDsn, kPoolDsn, "--create-slot=false"}, {"DOCSYNC_CREATE_SLOT=1"}).settings.create_slot);
    auto bad = parse({kDsn, kPoolDsn}, {"DOCSYNC_ALLOW_UNSAFE_POOL=perhaps"});
    CHECK_FALSE(bad.run);
    CHECK(bad.exit_code == 2);
    CHECK(bad.error == "docsync-worker: DOCSYNC_ALLOW_UNSAFE_POOL=\"perhaps\": not a boolean; give true or false");
}

TEST_CASE("--help lists every setting with its default, the precedence rule and exits 0") {
    auto p = parse({"--help"});
    CHECK_FALSE(p.run);
    CHECK(p.exit_code == 0);
    CHECK(p.error.empty());
    for (auto flag : {"--dsn", "--pool-dsn", "--slot", "--create-slot", "--sink", "--live ", "--live-poll", "--pool ",
                      "--statement-timeout", "--max-doc-bytes", "--max-keys", "--batch", "--max-retained-wal", "--status-dir",
                      "--status-interval", "--max-pending-txns", "--max-pending-bytes", "--config",
                      "--allow-unsafe-pool", "--log-format", "--log-file", "--log-level", "--threads", "--warm",
                      "--version"})
        CHECK_MESSAGE(p.output.find(flag) != std::string::npos, flag);
    for (auto value : {"[docsync]", "[1GB]", "[/run/docsync]", "[5s]", "[10000]", "[1MB]", "[256MB]", "[100000]",
                       "[text]", "[info]", "[all]", "[stdout]", "[10s]"})
        CHECK_MESSAGE(p.output.find(value) != std::string::npos, value);
    CHECK(p.output.find("Precedence: flag > environment variable > config file > default.") != std::string::npos);
    CHECK(p.output.find("DOCSYNC_MAX_RETAINED_WAL") != std::string::npos);
    CHECK(p.output == settings_help());
    // --help needs no other setting, even with invalid ones in the environment.
    CHECK(parse({"-h"}, {"DOCSYNC_POOL=zero"}).exit_code == 0);
}

TEST_CASE("--version prints the version and exits 0") {
    auto p = parse({"--version"});
    CHECK_FALSE(p.run);
    CHECK(p.exit_code == 0);
    CHECK(p.output.rfind("docsync-worker ", 0) == 0);
    CHECK(p.output.find('.') != std::string::npos);
}

TEST_CASE("invalid settings exit 2 with one line naming the setting and the fix") {
    struct Case {
        std::vector<std::string> args;
        std::vector<std::string> env;
        std::string expected;
    };
    std::vector<Case> cases = {
        {{kPoolDsn}, {}, "docsync-worker: --dsn is required"},
        {{kDsn}, {}, "docsync-worker: --pool-dsn is required"},
        {{"--dsn", "", kPoolDsn}, {}, "docsync-worker: --dsn \"\": must not be empty; give e.g. 'host="},
        {{"--dsn", "host", kPoolDsn}, {}, "docsync-worker: --dsn \"host\": not a libpq connection string"},
        {{kDsn, kPoolDsn, "--max-retained-wal", "lots"}, {}, "docsync-worker: --max-retained-wal \"lots\": not a size"},
        {{kDsn, kPoolDsn, "--max-retained-wal", "0"}, {}, "docsync-worker: --max-retained-wal \"0\": out of range; give a value from 1B to 1024TB"},
        {{kDsn, kPoolDsn, "--pool", "0"}, {}, "docsync-worker: --pool \"0\": out of range; give a value from 1 to 1000"},
        {{kDsn, kPoolDsn, "--statement-timeout", "5"}, {}, "docsync-worker: --statement-timeout \"5\": duration without a unit"},
        {{kDsn, kPoolDsn, "--live", "some"}, {}, "docsync-worker: --live \"some\": unknown live mode; give all or subscribers"},
        {{kDsn, kPoolDsn, "--plugin", "wal2json"}, {}, "docsync-worker: --plugin \"wal2json\": unknown plugin; give docsync, pgoutput or auto"},
        {{kDsn, kPoolDsn, "--sink", "kafka://x"}, {}, "docsync-worker: --sink \"kafka://x\": unknown sink; give stdout, file:/path/docs.jsonl, redis://127.0.0.1:6379 or redis-cluster://10.0.0.1:7000,10.0.0.2:7000"},
        {{kDsn, kPoolDsn, "--sink", "file:"}, {}, "docsync-worker: --sink \"file:\": file sink without a path"},
        {{kDsn, kPoolDsn, "--slot", "Docs-1"}, {}, "docsync-worker: --slot \"Docs-1\": not a slot name"},
        {{kDsn, kPoolDsn, "--log-format", "xml"}, {}, "docsync-worker: --log-format \"xml\": unknown log format; give text or json"},
        {{kDsn, kPoolDsn, "--log-level", "loud"}, {}, "docsync-worker: --log-level \"loud\": unknown log level"},
        {{kDsn, kPoolDsn, "--threads", "4x"}, {}, "docsync-worker: --threads \"4x\": not a whole number"},
        {{kDsn, kPoolDsn, "--status-interval", "1ms"}, {}, "docsync-worker: --status-interval \"1ms\": out of range; give a duration from 10ms to 10min"},
        {{kDsn, kPoolDsn}, {"DOCSYNC_MAX_KEYS=-5"}, "docsync-worker: DOCSYNC_MAX_KEYS=\"-5\": not a whole number: no sign allowed"},
        {{kDsn, kPoolDsn, "--bogus"}, {}, "docsync-worker: unknown option --bogus; docsync-worker --help lists the settings"},
        {{kDsn, kPoolDsn, "stray"}, {}, "docsync-worker: unexpected argument \"stray\": settings are given as --name VALUE"},
        {{kDsn, kPoolDsn, "--pool"}, {}, "docsync-worker: --pool needs a value, e.g. --pool 4"},
        {{kDsn, kPoolDsn, "--config", "/nonexistent/docsync.json"}, {}, "docsync-worker: config file \"/nonexistent/docsync.json\": cannot open (No such file or directory); give a readable file"},
        {{kDsn, kPoolDsn}, {"DOCSYNC_CONFIG="}, "docsync-worker: --config: must not be empty"},
        {{kDsn, kPoolDsn, "--metrics-listen", "9464"}, {}, "docsync-worker: --metrics-listen \"9464\": not ADDR:PORT; give ADDR:PORT with an IP address and a port from 1 to 65535, e.g. 127.0.0.1:9464 or [::]:9464"},
        {{kDsn, kPoolDsn, "--metrics-listen", "localhost:9464"}, {}, "docsync-worker: --metrics-listen \"localhost:9464\": \"localhost\" is not an IP address; give ADDR:PORT"},
        {{kDsn, kPoolDsn, "--metrics-listen", "::1:9464"}, {}, "docsync-worker: --metrics-listen \"::1:9464\": \"::1\" is not an IP address (write IPv6 in brackets)"},
        {{kDsn, kPoolDsn, "--metrics-listen", "127.0.0.1:0"}, {}, "docsync-worker: --metrics-listen \"127.0.0.1:0\": port 0 is out of range"},
        {{kDsn, kPoolDsn}, {"DOCSYNC_METRICS_LISTEN=127.0.0.1:65536"}, "docsync-worker: DOCSYNC_METRICS_LISTEN=\"127.0.0.1:65536\": port 65536 is out of range"},
        {{kDsn, kPoolDsn, "--metrics-listen", "127.0.0.1:http"}, {}, "docsync-worker: --metrics-listen \"127.0.0.1:http\": \"http\" is not a port"},
    };
    for (const auto& c : cases) {
        auto p = parse(c.args, c.env);
        INFO(c.expected);
        CHECK_FALSE(p.run);
        CHECK(p.exit_code == 2);
        CHECK(is_one_line(p.error));
        CHECK_MESSAGE(p.error.rfind(c.expected, 0) == 0, p.error);
    }
}

TEST_CASE("an invalid value in the config file names the file and the key") {
    TempConfig file(R"({"max-retained-wal": "1 gigabyte"})");
    auto p = parse({kDsn, kPoolDsn, "--config", file.path});
    CHECK(p.exit_code == 2);
    CHECK(p.error == "docsync-worker: config file \"" + file.path +
                         "\": \"max-retained-wal\": \"1 gigabyte\": unknown size unit \"gigabyte\"; did you mean 1GB? (units: B, kB, MB, GB, "
                         "TB)");
    // A value the flag overrides is not read, so it cannot fail.
    CHECK(parse({kDsn, kPoolDsn, "--config", file.path, "--max-retained-wal", "1GB"}).run);
}

TEST_CASE("an unknown key in the config file exits 2 and suggests the closest setting") {
    TempConfig typo(R"({"max-retaind-wal": "1GB"})");
    auto p = parse({kDsn, kPoolDsn, "--config", typo.path});
    CHECK(p.exit_code == 2);
    CHECK(p.error == "docsync-worker: config file \"" + typo.path +
                         "\": unknown setting \"max-retaind-wal\"; did you mean \"max-retained-wal\"?");
    TempConfig underscores(R"({"max_retained_wal": "1GB"})");
    p = parse({kDsn, kPoolDsn, "--config", underscores.path});
    CHECK(p.error.find("did you mean \"max-retained-wal\"?") != std::string::npos);
    TempConfig unrelated(R"({"colour": "blue"})");
    p = parse({kDsn, kPoolDsn, "--config", unrelated.path});
    CHECK(p.error.find("unknown setting \"colour\"; remove it") != std::string::npos);
}

TEST_CASE("docs/worker.md's settings table lists every setting with its flag, key and variable") {
    std::ifstream in(DOCSYNC_SOURCE_DIR "/docs/worker.md");
    std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE_FALSE(readme.empty());
    std::string help = settings_help();
    // Every "  --name" line of --help has its row in docs/worker.md.
    std::size_t rows = 0;
    for (std::size_t at = help.find("\n  --"); at != std::string::npos; at = help.find("\n  --", at + 1)) {
        std::size_t end = help.find_first_of(" \n", at + 5);
        std::string name = help.substr(at + 5, end - (at + 5));
        if (name == "version") continue;
        std::string env = "DOCSYNC_";
        for (char c : name) env.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
        std::string row = "| `--" + name + "` · " + (name == "config" ? std::string("—") : "`" + name + "`") + " · `" + env + "` |";
        CHECK_MESSAGE(readme.find(row) != std::string::npos, row);
        ++rows;
    }
    CHECK(rows == 36);
}

TEST_CASE("--audit-rate takes a percentage of the live docs per minute, or 0, and says what it wants") {
    auto p = parse({kDsn, kPoolDsn});
    REQUIRE(p.run);
    CHECK(p.settings.audit_rate == 1.0);
    CHECK_FALSE(p.settings.audit_rate_given);
    p = parse({kDsn, kPoolDsn, "--audit-rate", "0.5%"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.audit_rate == 0.5);
    CHECK(p.settings.audit_rate_given);
    p = parse({kDsn, kPoolDsn}, {"DOCSYNC_AUDIT_RATE=200%"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.audit_rate == 200.0);
    CHECK(p.settings.audit_rate_given);
    TempConfig file(R"({"audit-rate": "0"})");
    p = parse({kDsn, kPoolDsn, "--config", file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.audit_rate == 0.0);
    p = parse({kDsn, kPoolDsn, "--audit-rate", "0%"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.audit_rate == 0.0);
    for (const char* bad : {"5", "1 %", "%", "-1%", "1.%", "1.2345%", "0.0001%", "6001%", "1e2%", "abc"}) {
        p = parse({kDsn, kPoolDsn, "--audit-rate", bad});
        CHECK_MESSAGE(p.exit_code == 2, bad);
        CHECK_MESSAGE(is_one_line(p.error), bad);
        CHECK_MESSAGE(p.error.find("--audit-rate") != std::string::npos, p.error);
        CHECK_MESSAGE(p.error.find("such as 1% or 0.5%, or 0 to turn the audit off") != std::string::npos, p.error);
    }
    CHECK(settings_help().find("--audit-rate PERCENT") != std::string::npos);
}

TEST_CASE("--metrics-listen takes an IP address and a port from its flag, variable or key, and empty is off") {
    auto p = parse({kDsn, kPoolDsn, "--metrics-listen", "127.0.0.1:9464"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.metrics_address == "127.0.0.1");
    CHECK(p.settings.metrics_port == 9464);
    p = parse({kDsn, kPoolDsn}, {"DOCSYNC_METRICS_LISTEN=[::]:9100"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.metrics_address == "::");
    CHECK(p.settings.metrics_port == 9100);
    TempConfig file(R"({"metrics-listen": "0.0.0.0:9464"})");
    p = parse({kDsn, kPoolDsn, "--config", file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.metrics_address == "0.0.0.0");
    // An empty value turns off what the config file turned on.
    p = parse({kDsn, kPoolDsn, "--config", file.path}, {"DOCSYNC_METRICS_LISTEN="});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.metrics_address.empty());
    CHECK(p.settings.metrics_port == 0);
    CHECK(settings_help().find("--metrics-listen ADDR:PORT") != std::string::npos);
}

TEST_CASE("an unopenable log file is an invalid setting naming the file and the fix") {
    auto p = parse({kDsn, kPoolDsn, "--log-file", "/nonexistent-dir/worker.log"});
    REQUIRE(p.run);
    CHECK(apply_log_settings(p.settings) ==
          "docsync-worker: --log-file \"/nonexistent-dir/worker.log\": cannot open (No such file or directory); give "
          "a writable path, e.g. /var/log/docsync/worker.log");
    auto ok = parse({kDsn, kPoolDsn, "--log-level", "error"});
    CHECK(apply_log_settings(ok.settings).empty());
    set_log_level(LogLevel::Info);
}

TEST_CASE("command line mistakes name the option and the fix on one line, exit 2") {
    struct Case {
        std::vector<std::string> args;
        std::string expected;  // the whole line
    };
    std::vector<Case> cases = {
        {{"--max-retaind-wal", "1GB"}, "unknown option --max-retaind-wal; did you mean --max-retained-wal?"},
        {{"--max_retained_wal=1GB"}, "unknown option --max_retained_wal; did you mean --max-retained-wal?"},
        {{"-slot", "s"}, "unknown option -slot; did you mean --slot?"},
        {{"-x"}, "unknown option -x; docsync-worker --help lists the settings"},
        {{"--create-slot", "yes"},
         "--create-slot takes no separate value (\"yes\"): write --create-slot to turn it on, or --create-slot=false "
         "to turn it off"},
        {{"--pool"}, "--pool needs a value, e.g. --pool 4"},
        {{"--pool", "--slot", "s"}, "--pool needs a value, e.g. --pool 4"},
        {{"--statement-timeout"}, "--statement-timeout needs a value, e.g. --statement-timeout 5s"},
        {{"--slot"}, "--slot needs a value, as in --slot NAME"},
        {{"--pool", "four"}, "--pool \"four\": not a whole number; give digits only, e.g. 4"},
        {{"--max-keys", "4k"}, "--max-keys \"4k\": not a whole number; give digits only, e.g. 4"},
        {{"--slot", "a", "--slot", "b"}, "--slot is given twice (\"a\", then \"b\"); keep one"},
        {{"--sink", "stdout", "dbname=app"},
         "unexpected argument \"dbname=app\": a value that holds spaces needs quotes, e.g. --dsn "
         "'host=/run/postgresql dbname=app'"},
        {{"--live-poll", "5sec"},
         "--live-poll \"5sec\": unknown duration unit \"sec\"; did you mean 5s? (units: ms, s, min, h, d)"},
        {{"--max-retained-wal", "1G"},
         "--max-retained-wal \"1G\": unknown size unit \"G\"; did you mean 1GB? (units: B, kB, MB, GB, TB)"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args{kDsn, kPoolDsn};
        args.insert(args.end(), c.args.begin(), c.args.end());
        auto p = parse(args);
        INFO(c.expected);
        CHECK_FALSE(p.run);
        CHECK(p.exit_code == 2);
        CHECK(is_one_line(p.error));
        CHECK(p.error == "docsync-worker: " + c.expected);
    }
    // Odd arguments are still one line.
    for (std::string odd : std::vector<std::string>{"--", "-", "---", "-=", "--=x", "--a\nb", "-\x01"}) {
        auto p = parse({kDsn, kPoolDsn, odd});
        CHECK(p.exit_code == 2);
        CHECK_MESSAGE(is_one_line(p.error), p.error);
    }
    // A switch still takes =false, and a value may start with one dash.
    CHECK_FALSE(parse({kDsn, kPoolDsn, "--create-slot=no"}).settings.create_slot);
    CHECK(parse({kDsn, kPoolDsn, "--max-keys", "-5"}).error.find("no sign allowed") != std::string::npos);
}

TEST_CASE("--warm takes doc channels: repeated flags, one per line in the environment, an array in the file") {
    auto p = parse({kDsn, kPoolDsn, "--warm", "db:order:42", "--warm=db:order:7"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.warm == std::vector<std::string>{"db:order:42", "db:order:7"});

    p = parse({kDsn, kPoolDsn}, {"DOCSYNC_WARM=db:order:1\ndb:pair:a b:%3A\n"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.warm == std::vector<std::string>{"db:order:1", "db:pair:a b:%3A"});

    TempConfig file(R"({"warm": ["db:order:3", "db:order:4"]})");
    p = parse({kDsn, kPoolDsn, "--config", file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.warm == std::vector<std::string>{"db:order:3", "db:order:4"});
    // The flags win over the file as a whole.
    p = parse({kDsn, kPoolDsn, "--config", file.path, "--warm", "db:order:9"});
    CHECK(p.settings.warm == std::vector<std::string>{"db:order:9"});

    // A pattern cannot be resolved into docs: it is refused, saying why and how to list channels.
    p = parse({kDsn, kPoolDsn, "--warm", "db:order:1", "--warm", "db:post:*"});
    CHECK(p.exit_code == 2);
    CHECK(is_one_line(p.error));
    CHECK(p.error.rfind("docsync-worker: --warm \"db:post:*\": a pattern cannot be warmed: docsync cannot list which "
                        "docs of a query exist",
                        0) == 0);
    CHECK(p.error.find("--warm db:post:42") != std::string::npos);
    CHECK(p.error.find("docsync.channel('post', id::text)") != std::string::npos);
    p = parse({kDsn, kPoolDsn, "--warm", "order:42"});
    CHECK(p.error.rfind("docsync-worker: --warm \"order:42\": not a doc channel; give db:<query>:<value>", 0) == 0);
    p = parse({kDsn, kPoolDsn, "--warm", "db:order:50%"});
    CHECK(p.error.find("not a doc channel") != std::string::npos);
    TempConfig bad(R"({"warm": ["db:order:1", 2]})");
    p = parse({kDsn, kPoolDsn, "--config", bad.path});
    CHECK(p.error.find("\"warm\": expected an array of strings") != std::string::npos);
}

TEST_CASE("--patches, --patch-memory and --patch-min-bytes: off, 64MB and 1kB by default; bad values name the fix") {
    auto p = parse({kDsn, kPoolDsn});
    REQUIRE(p.run);
    CHECK_FALSE(p.settings.patches);
    CHECK(p.settings.patch_memory == 64ull << 20);
    CHECK(p.settings.patch_min_bytes == 1024);
    p = parse({kDsn, kPoolDsn, "--patches", "on", "--patch-memory", "256MB", "--patch-min-bytes", "4kB"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.patches);
    CHECK(p.settings.patch_memory == 256ull << 20);
    CHECK(p.settings.patch_min_bytes == 4096);
    p = parse({kDsn, kPoolDsn}, {"DOCSYNC_PATCHES=ON", "DOCSYNC_PATCH_MEMORY=1GB", "DOCSYNC_PATCH_MIN_BYTES=100"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.patches);
    CHECK(p.settings.patch_memory == 1ull << 30);
    CHECK(p.settings.patch_min_bytes == 100);
    TempConfig file(R"({"patches": "on", "patch-memory": "1MB"})");
    p = parse({kDsn, kPoolDsn, "--config", file.path, "--patches", "off"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK_FALSE(p.settings.patches);  // the flag wins
    CHECK(p.settings.patch_memory == 1ull << 20);

    auto fails = [](std::vector<std::string> args, const std::string& expected) {
        std::vector<std::string> all{kDsn, kPoolDsn};
        all.insert(all.end(), args.begin(), args.end());
        auto q = parse(all);
        CHECK_FALSE(q.run);
        CHECK(q.exit_code == 2);
        CHECK(is_one_line(q.error));
        CHECK_MESSAGE(q.error.rfind(expected, 0) == 0, q.error);
    };
    fails({"--patches", "yes"}, "docsync-worker: --patches \"yes\": unknown patches mode; give on or off");
    fails({"--patch-memory", "1kB"}, "docsync-worker: --patch-memory \"1kB\": out of range; give a value from 64kB to");
    fails({"--patch-memory", "lots"}, "docsync-worker: --patch-memory \"lots\": not a size");
    fails({"--patch-min-bytes", "10"}, "docsync-worker: --patch-min-bytes \"10\": out of range; give a value from 64B to 1GB");
}

TEST_CASE("--pgoutput-streaming takes auto or off, --stream-memory a size from 0") {
    auto p = parse({kDsn, kPoolDsn});
    REQUIRE(p.run);
    CHECK(p.settings.pgoutput_streaming);
    CHECK(p.settings.stream_memory == std::uint64_t{64} << 20);
    p = parse({kDsn, kPoolDsn, "--pgoutput-streaming", "OFF", "--stream-memory", "0"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK_FALSE(p.settings.pgoutput_streaming);
    CHECK(p.settings.stream_memory == 0);
    p = parse({kDsn, kPoolDsn}, {"DOCSYNC_PGOUTPUT_STREAMING=auto", "DOCSYNC_STREAM_MEMORY=1GB"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.pgoutput_streaming);
    CHECK(p.settings.stream_memory == std::uint64_t{1} << 30);
    for (const char* bad : {"on", "2", ""}) {
        p = parse({kDsn, kPoolDsn, "--pgoutput-streaming", bad});
        CHECK_MESSAGE(p.exit_code == 2, bad);
        CHECK_MESSAGE(p.error.find("--pgoutput-streaming") != std::string::npos, p.error);
        CHECK_MESSAGE(p.error.find("give auto or off") != std::string::npos, p.error);
    }
    p = parse({kDsn, kPoolDsn, "--stream-memory", "lots"});
    CHECK(p.exit_code == 2);
    CHECK(p.error.find("--stream-memory") != std::string::npos);
}
