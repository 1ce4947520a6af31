// The gateway's settings from flags, DOCSYNC_GATEWAY_* variables and the config file: the same rules
// as the worker's (precedence, one-line errors with exit status 2, --help), its own values, and the
// two programs sharing one environment without reading each other's variables.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "config/settings.hpp"
#include "gateway/settings.hpp"

using namespace docsync;
using namespace docsync::gateway;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef0123456789abcdef";

std::vector<const char*> pointers(const std::vector<std::string>& texts) {
    std::vector<const char*> out;
    for (const auto& t : texts) out.push_back(t.c_str());
    return out;
}

ParsedGatewaySettings parse(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), "docsync-gateway");
    auto argv = pointers(args);
    auto envp = pointers(env);
    envp.push_back(nullptr);
    return parse_gateway_settings(static_cast<int>(argv.size()), argv.data(), envp.data());
}

ParsedSettings parse_worker(std::vector<std::string> env) {
    std::vector<std::string> args{"docsync-worker", "--dsn=host=/tmp user=docsync_repl",
                                  "--pool-dsn=host=/tmp user=docsync_reader"};
    auto argv = pointers(args);
    auto envp = pointers(env);
    envp.push_back(nullptr);
    return parse_settings(static_cast<int>(argv.size()), argv.data(), envp.data());
}

// A file in a temporary directory, removed at the end of the test.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& text) {
        char tmpl[] = "/tmp/docsync-gateway-XXXXXX";
        int fd = mkstemp(tmpl);
        REQUIRE(fd >= 0);
        close(fd);
        path = tmpl;
        std::ofstream(path) << text;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

bool is_one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

}  // namespace

TEST_CASE("gateway settings: defaults apply when a setting is given nowhere") {
    auto p = parse({});
    REQUIRE_MESSAGE(p.run, p.error);
    const GatewaySettings& s = p.settings;
    CHECK(s.redis == "redis://127.0.0.1:6379");
    CHECK(s.listen_address == "127.0.0.1");
    CHECK(s.listen_port == 8080);
    CHECK(s.jwt_secret_file.empty());
    CHECK(s.jwt_secret.empty());
    CHECK(s.public_patterns.empty());
    CHECK(s.allow_origins.empty());
    CHECK(s.max_connections == 20000);
    CHECK(s.max_channels == 100);
    CHECK(s.slow_client_timeout == 30s);
    CHECK(s.heartbeat == 15s);
    CHECK(s.redis_connections == 2);
    CHECK(s.config.empty());
    CHECK(s.log_format == LogFormat::Text);
    CHECK(s.log_file.empty());
    CHECK(s.log_level == LogLevel::Info);
    CHECK(p.given.empty());
}

TEST_CASE("gateway settings: every setting is read from its flag") {
    TempFile secret(kSecret + "\n");
    auto p = parse({"--redis", "redis-cluster://10.0.0.1:7000,10.0.0.2:7000", "--listen", "[::]:0",
                    "--jwt-secret-file", secret.path, "--public", "db:menu:*", "--public=db:news:1", "--allow-origin",
                    "https://app.example.com", "--allow-origin", "http://localhost:3000", "--max-connections", "50000",
                    "--max-channels", "7", "--slow-client-timeout", "2min", "--heartbeat", "500s", "--redis-connections",
                    "64", "--log-format", "json", "--log-file", "/tmp/g.log", "--log-level", "debug"});
    REQUIRE_MESSAGE(p.run, p.error);
    const GatewaySettings& s = p.settings;
    CHECK(s.redis == "redis-cluster://10.0.0.1:7000,10.0.0.2:7000");
    CHECK(s.listen_address == "::");
    CHECK(s.listen_port == 0);
    CHECK(s.jwt_secret_file == secret.path);
    CHECK(s.jwt_secret == kSecret);  // without the trailing newline
    CHECK(s.public_patterns == std::vector<std::string>{"db:menu:*", "db:news:1"});
    CHECK(s.allow_origins == std::vector<std::string>{"https://app.example.com", "http://localhost:3000"});
    CHECK(s.max_connections == 50000);
    CHECK(s.max_channels == 7);
    CHECK(s.slow_client_timeout == 2min);
    CHECK(s.heartbeat == 500s);
    CHECK(s.redis_connections == 64);
    CHECK(s.log_format == LogFormat::Json);
    CHECK(s.log_file == "/tmp/g.log");
    CHECK(s.log_level == LogLevel::Debug);
    CHECK(p.was_given("heartbeat"));
    CHECK_FALSE(p.was_given("config"));
}

TEST_CASE("gateway settings: every setting is read from its DOCSYNC_GATEWAY_ variable, lists one per line") {
    TempFile secret(kSecret);
    auto p = parse({}, {"DOCSYNC_GATEWAY_REDIS=redis://10.1.1.1:6380/2", "DOCSYNC_GATEWAY_LISTEN=localhost:9000",
                        "DOCSYNC_GATEWAY_JWT_SECRET_FILE=" + secret.path,
                        "DOCSYNC_GATEWAY_PUBLIC=db:menu:*\n\ndb:news:1\n", "DOCSYNC_GATEWAY_ALLOW_ORIGIN=*",
                        "DOCSYNC_GATEWAY_MAX_CONNECTIONS=10", "DOCSYNC_GATEWAY_MAX_CHANNELS=20",
                        "DOCSYNC_GATEWAY_SLOW_CLIENT_TIMEOUT=5s", "DOCSYNC_GATEWAY_HEARTBEAT=1min",
                        "DOCSYNC_GATEWAY_REDIS_CONNECTIONS=3", "DOCSYNC_GATEWAY_LOG_FORMAT=json",
                        "DOCSYNC_GATEWAY_LOG_FILE=/tmp/g.log", "DOCSYNC_GATEWAY_LOG_LEVEL=warning"});
    REQUIRE_MESSAGE(p.run, p.error);
    const GatewaySettings& s = p.settings;
    CHECK(s.redis == "redis://10.1.1.1:6380/2");
    CHECK(s.listen_address == "localhost");
    CHECK(s.listen_port == 9000);
    CHECK(s.jwt_secret == kSecret);
    CHECK(s.public_patterns == std::vector<std::string>{"db:menu:*", "db:news:1"});
    CHECK(s.allow_origins == std::vector<std::string>{"*"});
    CHECK(s.max_connections == 10);
    CHECK(s.max_channels == 20);
    CHECK(s.slow_client_timeout == 5s);
    CHECK(s.heartbeat == 1min);
    CHECK(s.redis_connections == 3);
    CHECK(s.log_format == LogFormat::Json);
    CHECK(s.log_file == "/tmp/g.log");
    CHECK(s.log_level == LogLevel::Warning);
}

TEST_CASE("gateway settings: the config file holds every setting but config, lists are arrays") {
    TempFile secret(kSecret);
    TempFile file(R"({"redis": "redis://10.2.2.2:6379", "listen": "0.0.0.0:80", "jwt-secret-file": ")" + secret.path +
                  R"(", "public": ["db:a:*", "db:b:1"], "allow-origin": ["https://x.example"], "max-connections": 5,
                  "max-channels": "6", "slow-client-timeout": "3s", "heartbeat": "4s", "redis-connections": 1,
                  "log-format": "json", "log-level": "error"})");
    auto p = parse({"--config", file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    const GatewaySettings& s = p.settings;
    CHECK(s.redis == "redis://10.2.2.2:6379");
    CHECK(s.listen_address == "0.0.0.0");
    CHECK(s.listen_port == 80);
    CHECK(s.jwt_secret == kSecret);
    CHECK(s.public_patterns == std::vector<std::string>{"db:a:*", "db:b:1"});
    CHECK(s.allow_origins == std::vector<std::string>{"https://x.example"});
    CHECK(s.max_connections == 5);
    CHECK(s.max_channels == 6);
    CHECK(s.slow_client_timeout == 3s);
    CHECK(s.heartbeat == 4s);
    CHECK(s.redis_connections == 1);
    CHECK(s.log_format == LogFormat::Json);
    CHECK(s.log_level == LogLevel::Error);
    CHECK(s.config == file.path);

    TempFile with_config(R"({"config": "other.json"})");
    p = parse({"--config", with_config.path});
    CHECK(p.exit_code == 2);
    CHECK(p.error.find("\"config\" cannot be set in a config file; give it with --config or DOCSYNC_GATEWAY_CONFIG") !=
          std::string::npos);
    TempFile number(R"({"heartbeat": 15})");
    p = parse({"--config", number.path});
    CHECK(p.error == "docsync-gateway: config file \"" + number.path +
                         "\": \"heartbeat\": expected a duration string with a unit, such as \"5s\" or \"250ms\"");
}

TEST_CASE("gateway settings: precedence is flag > environment > config file > default") {
    TempFile file(R"({"max-connections": 100, "heartbeat": "20s", "public": ["db:file:*"], "max-channels": 9})");
    std::string config = "--config=" + file.path;

    auto p = parse({config});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_connections == 100);
    CHECK(p.settings.heartbeat == 20s);
    CHECK(p.settings.max_channels == 9);
    CHECK(p.settings.slow_client_timeout == 30s);  // given nowhere: the default

    p = parse({config}, {"DOCSYNC_GATEWAY_MAX_CONNECTIONS=200", "DOCSYNC_GATEWAY_PUBLIC=db:env:*"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_connections == 200);
    CHECK(p.settings.public_patterns == std::vector<std::string>{"db:env:*"});  // the file's list is not added
    CHECK(p.settings.heartbeat == 20s);

    p = parse({config, "--max-connections", "300", "--public", "db:flag:*"},
              {"DOCSYNC_GATEWAY_MAX_CONNECTIONS=200", "DOCSYNC_GATEWAY_PUBLIC=db:env:*"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_connections == 300);
    CHECK(p.settings.public_patterns == std::vector<std::string>{"db:flag:*"});
    CHECK(p.settings.max_channels == 9);

    // DOCSYNC_GATEWAY_CONFIG names the file; --config wins over it.
    TempFile other(R"({"max-connections": 400})");
    p = parse({}, {"DOCSYNC_GATEWAY_CONFIG=" + file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_connections == 100);
    p = parse({"--config", other.path}, {"DOCSYNC_GATEWAY_CONFIG=" + file.path});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.max_connections == 400);
    CHECK(p.settings.heartbeat == 15s);

    // A bad value the flag overrides is not read, so it cannot fail.
    p = parse({"--heartbeat", "5s"}, {"DOCSYNC_GATEWAY_HEARTBEAT=often"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.heartbeat == 5s);
}

TEST_CASE("gateway settings: an invalid value exits 2 with one line naming the setting, the value and the fix") {
    TempFile short_secret("too short\n");
    struct Case {
        std::vector<std::string> args;
        std::vector<std::string> env;
        std::string expected;  // how the line starts
        std::string fix;       // what it says to do
    };
    std::vector<Case> cases = {
        {{"--redis", "kafka://x"}, {}, "docsync-gateway: --redis \"kafka://x\": not a Redis URL", "e.g. redis://127.0.0.1:6379"},
        {{"--redis", "redis://h:abc"}, {}, "docsync-gateway: --redis \"redis://h:abc\": the port 'abc' is not 1-65535",
         "expected redis://"},
        {{"--redis", "redis-cluster://10.0.0.1"}, {}, "docsync-gateway: --redis \"redis-cluster://10.0.0.1\": the host 10.0.0.1 needs its :PORT",
         "expected redis-cluster://"},
        {{}, {"DOCSYNC_GATEWAY_REDIS=redis://"}, "docsync-gateway: DOCSYNC_GATEWAY_REDIS=\"redis://\": a host is missing",
         "expected redis://"},
        {{"--listen", "8080"}, {}, "docsync-gateway: --listen \"8080\": not ADDR:PORT",
         "give ADDR:PORT with an IP address or host name and a port from 0 (any free port) to 65535, e.g. 127.0.0.1:8080"},
        {{"--listen", "127.0.0.1:65536"}, {}, "docsync-gateway: --listen \"127.0.0.1:65536\": port 65536 is out of range", "e.g."},
        {{"--listen", "::1:8080"}, {}, "docsync-gateway: --listen \"::1:8080\": \"::1\" is not an IP address or host name (write IPv6 in brackets)", "e.g."},
        {{"--listen", "-bad-:8080"}, {}, "docsync-gateway: --listen \"-bad-:8080\": \"-bad-\" is not an IP address or host name", "e.g."},
        {{"--listen", "300.1.1.1:80"}, {}, "docsync-gateway: --listen \"300.1.1.1:80\": \"300.1.1.1\" is not an IP address", "e.g."},
        {{"--listen", "localhost:http"}, {}, "docsync-gateway: --listen \"localhost:http\": \"http\" is not a port", "e.g."},
        {{"--jwt-secret-file", "/nonexistent/gateway.key"}, {},
         "docsync-gateway: --jwt-secret-file \"/nonexistent/gateway.key\": cannot read the secret file \"/nonexistent/gateway.key\"",
         "openssl rand -hex 32"},
        {{"--jwt-secret-file", short_secret.path}, {}, "docsync-gateway: --jwt-secret-file \"" + short_secret.path + "\": ",
         "HS256 needs at least 32"},
        {{"--jwt-secret-file", ""}, {}, "docsync-gateway: --jwt-secret-file \"\": must not be empty", "openssl rand -hex 32"},
        {{"--public", "db:order:*:x"}, {}, "docsync-gateway: --public \"db:order:*:x\": a * may only end a pattern", "db:customer_orders:7:*"},
        {{}, {"DOCSYNC_GATEWAY_PUBLIC=db:ok:*\norder:*"}, "docsync-gateway: DOCSYNC_GATEWAY_PUBLIC=\"order:*\": ", "db:"},
        {{"--allow-origin", "app.example.com"}, {}, "docsync-gateway: --allow-origin \"app.example.com\": not an origin",
         "give an origin as scheme://host[:port], e.g. https://app.example.com"},
        {{"--allow-origin", "https://app.example.com/"}, {},
         "docsync-gateway: --allow-origin \"https://app.example.com/\": an origin has no path", "write https://app.example.com"},
        {{"--allow-origin", "https://App.Example.com"}, {},
         "docsync-gateway: --allow-origin \"https://App.Example.com\": browsers send origins in lower case",
         "write https://app.example.com"},
        {{"--allow-origin", "https://app.example.com:443"}, {},
         "docsync-gateway: --allow-origin \"https://app.example.com:443\": browsers leave out the default port",
         "write https://app.example.com"},
        {{"--allow-origin", "http://localhost:0"}, {}, "docsync-gateway: --allow-origin \"http://localhost:0\": \"0\" is not a port",
         "e.g. https://app.example.com"},
        {{"--allow-origin", "https://"}, {}, "docsync-gateway: --allow-origin \"https://\": the origin names no host", "e.g."},
        {{"--allow-origin", "https://user@app.example.com"}, {}, "docsync-gateway: --allow-origin \"https://user@app.example.com\": an origin has no user name", "e.g."},
        {{"--max-connections", "0"}, {}, "docsync-gateway: --max-connections \"0\": out of range", "give a value from 1 to"},
        {{"--max-connections", "lots"}, {}, "docsync-gateway: --max-connections \"lots\": not a whole number", "e.g. 4"},
        {{"--max-channels", "0"}, {}, "docsync-gateway: --max-channels \"0\": out of range", "give a value from 1 to"},
        {{"--slow-client-timeout", "500ms"}, {}, "docsync-gateway: --slow-client-timeout \"500ms\": out of range",
         "give a duration from 1s to"},
        {{"--slow-client-timeout", "30"}, {}, "docsync-gateway: --slow-client-timeout \"30\": duration without a unit", "e.g. 5s"},
        {{"--heartbeat", "0s"}, {}, "docsync-gateway: --heartbeat \"0s\": out of range", "give a duration from 1s to"},
        {{}, {"DOCSYNC_GATEWAY_HEARTBEAT=15sec"}, "docsync-gateway: DOCSYNC_GATEWAY_HEARTBEAT=\"15sec\": unknown duration unit",
         "did you mean 15s?"},
        {{"--redis-connections", "65"}, {}, "docsync-gateway: --redis-connections \"65\": out of range", "give a value from 1 to 64"},
        {{"--redis-connections", "0"}, {}, "docsync-gateway: --redis-connections \"0\": out of range", "give a value from 1 to 64"},
        {{"--config", "/nonexistent/gateway.json"}, {}, "docsync-gateway: config file \"/nonexistent/gateway.json\": cannot open",
         "give a readable file with --config or DOCSYNC_GATEWAY_CONFIG"},
        {{}, {"DOCSYNC_GATEWAY_CONFIG="}, "docsync-gateway: --config: must not be empty", "e.g. /etc/docsync/gateway.json"},
        {{"--log-format", "xml"}, {}, "docsync-gateway: --log-format \"xml\": unknown log format", "give text or json"},
        {{"--log-file", " "}, {}, "docsync-gateway: --log-file \" \": must not be empty", "e.g. /var/log/docsync/gateway.log"},
        {{"--log-level", "loud"}, {}, "docsync-gateway: --log-level \"loud\": unknown log level", "give debug, info, warning or error"},
        // Command line mistakes, as the worker words them.
        {{"--max-conections", "5"}, {}, "docsync-gateway: unknown option --max-conections; did you mean --max-connections?", "?"},
        {{"--bogus"}, {}, "docsync-gateway: unknown option --bogus; docsync-gateway --help lists the settings", "--help"},
        {{"--heartbeat"}, {}, "docsync-gateway: --heartbeat needs a value, e.g. --heartbeat 15s", "15s"},
        {{"--redis"}, {}, "docsync-gateway: --redis needs a value, as in --redis URL", "URL"},
        {{"--listen", "a:1", "--listen", "b:2"}, {}, "docsync-gateway: --listen is given twice (\"a:1\", then \"b:2\"); keep one",
         "keep one"},
        {{"stray"}, {}, "docsync-gateway: unexpected argument \"stray\": settings are given as --name VALUE", "--help"},
    };
    for (const auto& c : cases) {
        auto p = parse(c.args, c.env);
        INFO(c.expected);
        CHECK_FALSE(p.run);
        CHECK(p.exit_code == 2);
        CHECK_MESSAGE(is_one_line(p.error), p.error);
        CHECK_MESSAGE(p.error.rfind(c.expected, 0) == 0, p.error);
        CHECK_MESSAGE(p.error.find(c.fix) != std::string::npos, p.error);
    }
}

TEST_CASE("gateway settings: a secret file that is refused is named, its content never shown") {
    TempFile short_secret("s3cr3t-but-short\n");
    auto p = parse({"--jwt-secret-file", short_secret.path});
    CHECK(p.exit_code == 2);
    CHECK(p.error.find(short_secret.path) != std::string::npos);
    CHECK(p.error.find("s3cr3t") == std::string::npos);
    TempFile secret(kSecret + "\n");
    p = parse({"--jwt-secret-file", secret.path, "--max-channels", "0"});
    CHECK(p.exit_code == 2);
    CHECK(p.error.find(kSecret) == std::string::npos);
}

TEST_CASE("gateway settings: origins and listen addresses take the forms browsers and sockets use") {
    auto p = parse({"--allow-origin", "http://[::1]:8080", "--allow-origin", "https://10.0.0.5", "--allow-origin",
                    "capacitor://localhost", "--allow-origin", "http://app.example.com:8443"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.allow_origins ==
          std::vector<std::string>{"http://[::1]:8080", "https://10.0.0.5", "capacitor://localhost", "http://app.example.com:8443"});
    p = parse({"--listen", "[::1]:8081"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.listen_address == "::1");
    CHECK(p.settings.listen_port == 8081);
    p = parse({"--listen", "gateway-1.internal:443"});
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.listen_address == "gateway-1.internal");
    CHECK(p.settings.listen_port == 443);
}

TEST_CASE("gateway settings: --help says what the gateway is and lists every setting with its default") {
    auto p = parse({"--help"});
    CHECK_FALSE(p.run);
    CHECK(p.exit_code == 0);
    CHECK(p.error.empty());
    CHECK(p.output == gateway_settings_help());
    CHECK(p.output.rfind("docsync-gateway: serves docsync's live docs to browsers and apps over HTTP, Server-Sent Events "
                         "and WebSocket, from the docsync Redis",
                         0) == 0);
    CHECK(p.output.find('\n') > 100);  // the description is one line
    for (auto flag : {"--redis URL", "--listen ADDR:PORT", "--jwt-secret-file FILE", "--public PATTERN",
                      "--allow-origin ORIGIN", "--max-connections N", "--max-channels N", "--slow-client-timeout DURATION",
                      "--heartbeat DURATION", "--redis-connections N", "--config FILE", "--log-format text|json",
                      "--log-file FILE", "--log-level LEVEL", "--version"})
        CHECK_MESSAGE(p.output.find(std::string("\n  ") + flag) != std::string::npos, flag);
    for (auto value : {"[redis://127.0.0.1:6379]", "[127.0.0.1:8080]", "[20000]", "[100]", "[30s]", "[15s]", "[2]",
                       "[text]", "[(stderr)]", "[info]"})
        CHECK_MESSAGE(p.output.find(value) != std::string::npos, value);
    CHECK(p.output.find("Precedence: flag > environment variable > config file > default.") != std::string::npos);
    CHECK(p.output.find("DOCSYNC_GATEWAY_<NAME>") != std::string::npos);
    // No line is wider than the worker's: 100 columns (the first, one sentence, excepted).
    std::size_t start = p.output.find('\n') + 1;
    while (start < p.output.size()) {
        auto end = p.output.find('\n', start);
        CHECK_MESSAGE(end - start <= 100, p.output.substr(start, end - start));
        start = end + 1;
    }
    // --help needs no other setting, even with invalid ones in the environment.
    CHECK(parse({"-h"}, {"DOCSYNC_GATEWAY_MAX_CHANNELS=zero"}).exit_code == 0);
}

TEST_CASE("gateway settings: --version prints the gateway's name and version") {
    auto p = parse({"--version"});
    CHECK_FALSE(p.run);
    CHECK(p.exit_code == 0);
    CHECK(p.output.rfind("docsync-gateway ", 0) == 0);
    // The same version as the worker's: one project, one version.
    const char* worker_argv[] = {"docsync-worker", "--version"};
    auto worker = parse_settings(2, worker_argv, nullptr);
    CHECK(p.output.substr(std::string("docsync-gateway ").size()) ==
          worker.output.substr(std::string("docsync-worker ").size()));
    CHECK(p.output.back() == '\n');
}

TEST_CASE("gateway settings: an unknown config key suggests the closest setting of the gateway") {
    TempFile typo(R"({"max-conections": 5})");
    auto p = parse({"--config", typo.path});
    CHECK(p.exit_code == 2);
    CHECK(p.error == "docsync-gateway: config file \"" + typo.path +
                         "\": unknown setting \"max-conections\"; did you mean \"max-connections\"?");
    // A worker's setting is not the gateway's.
    TempFile worker_key(R"({"dsn": "host=/tmp"})");
    p = parse({"--config", worker_key.path});
    CHECK(p.error == "docsync-gateway: config file \"" + worker_key.path +
                         "\": unknown setting \"dsn\"; remove it (docsync-gateway --help lists the settings)");
    TempFile not_object(R"(["db:menu:*"])");
    p = parse({"--config", not_object.path});
    CHECK(p.error.find("not a JSON object; write {\"redis\": \"redis://127.0.0.1:6379\"") != std::string::npos);
}

TEST_CASE("gateway settings: an unopenable log file names the file and the fix") {
    auto p = parse({"--log-file", "/nonexistent-dir/gateway.log"});
    REQUIRE(p.run);
    CHECK(apply_gateway_log_settings(p.settings) ==
          "docsync-gateway: --log-file \"/nonexistent-dir/gateway.log\": cannot open (No such file or directory); give "
          "a writable path, e.g. /var/log/docsync/gateway.log");
    auto ok = parse({"--log-level", "error"});
    CHECK(apply_gateway_log_settings(ok.settings).empty());
    set_log_level(LogLevel::Info);
}

TEST_CASE("the worker and the gateway share one environment without reading each other's variables") {
    // The gateway's variables, even invalid ones, are not the worker's.
    auto worker = parse_worker({"DOCSYNC_GATEWAY_CONFIG=/nonexistent/gateway.json", "DOCSYNC_GATEWAY_REDIS=kafka://x",
                                "DOCSYNC_GATEWAY_LOG_LEVEL=loud", "DOCSYNC_GATEWAY_POOL=0", "DOCSYNC_LOG_LEVEL=debug"});
    REQUIRE_MESSAGE(worker.run, worker.error);
    CHECK(worker.settings.pool == 4);
    CHECK(worker.settings.log_level == LogLevel::Debug);
    // No setting of the worker has a variable under the gateway's prefix, which the worker skips.
    std::string help = settings_help();
    for (std::size_t at = help.find("\n  --"); at != std::string::npos; at = help.find("\n  --", at + 1))
        CHECK_MESSAGE(help.compare(at + 5, 8, "gateway-") != 0, help.substr(at + 3, 40));

    // The worker's variables are not the gateway's, not even those of the settings both have.
    auto gateway = parse({}, {"DOCSYNC_CONFIG=/nonexistent/docsync.json", "DOCSYNC_LOG_LEVEL=loud", "DOCSYNC_LOG_FILE=",
                              "DOCSYNC_SINK=redis://10.9.9.9:6379", "DOCSYNC_GATEWAY_LOG_LEVEL=warning"});
    REQUIRE_MESSAGE(gateway.run, gateway.error);
    CHECK(gateway.settings.log_level == LogLevel::Warning);
    CHECK(gateway.settings.redis == "redis://127.0.0.1:6379");
    CHECK(gateway.given == std::vector<std::string>{"log-level"});
}

namespace {

struct Toy {
    std::string mode = "a";
    std::string gateway_mode = "a";
};

const std::vector<settings::Spec<Toy>>& toy_specs() {
    static const std::vector<settings::Spec<Toy>> table = {
        {"mode", settings::Kind::Text, "M", "a mode", [](const Toy& t) { return t.mode; },
         [](Toy& t, std::string_view v) { t.mode = std::string(v); }},
        {"gateway-mode", settings::Kind::Text, "M", "a mode named like another program's variables",
         [](const Toy& t) { return t.gateway_mode; }, [](Toy& t, std::string_view v) { t.gateway_mode = std::string(v); }},
    };
    return table;
}

}  // namespace

TEST_CASE("settings readers: variables under a program's foreign prefix are never read, even when a setting matches") {
    settings::Program toy{.name = "toy", .env_prefix = "DOCSYNC_", .foreign_env_prefix = "DOCSYNC_GATEWAY_"};
    const char* argv[] = {"toy"};
    const char* envp[] = {"DOCSYNC_MODE=b", "DOCSYNC_GATEWAY_MODE=c", nullptr};
    auto p = settings::parse(toy, toy_specs(), 1, argv, envp);
    REQUIRE_MESSAGE(p.run, p.error);
    CHECK(p.settings.mode == "b");
    CHECK(p.settings.gateway_mode == "a");
    // Without a foreign prefix the same variable is read: the skip is the prefix's doing.
    toy.foreign_env_prefix = {};
    p = settings::parse(toy, toy_specs(), 1, argv, envp);
    CHECK(p.settings.gateway_mode == "c");
}
