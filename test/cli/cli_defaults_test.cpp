// The tool's defaults: the parser starts from them, they agree with the
// library's, and the help texts state the values the code uses.
#include "cli.hpp"

#include <corolock/admin.hpp>
#include <corolock/config.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cli = corolock::cli;
using namespace std::chrono_literals;

namespace {

// Parses a command line with no REDIS_URL or COROLOCK_PASSWORD in the way.
std::optional<cli::usage_error> parse(const std::vector<std::string_view>& args,
                                      cli::parsed_command& out) {
    ::unsetenv("REDIS_URL");
    ::unsetenv("COROLOCK_PASSWORD");
    return cli::parse_command_line(args, out);
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Each command line is a usage error whose message contains its text.
void check_usage_errors(
    const std::vector<std::pair<std::vector<std::string_view>, std::string>>& bad) {
    for (const auto& [args, says] : bad) {
        cli::parsed_command c;
        const auto err = parse(args, c);
        REQUIRE(err);
        INFO(err->message);
        CHECK(contains(err->message, says));
    }
}

// A token of help.cpp (@NAME@) that was not replaced; empty when none is.
std::string left_token(const std::string& text) {
    for (auto at = text.find('@'); at != std::string::npos; at = text.find('@', at + 1)) {
        const auto end = text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", at + 1);
        if (end != std::string::npos && end > at + 1 && text[end] == '@')
            return text.substr(at, end + 1 - at);
    }
    return {};
}

}  // namespace

TEST_CASE("cli defaults: run starts from the library's lease and server", "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "job", "--", "true"}, cmd).has_value());
    const auto& run = cmd.run;
    CHECK(run.lease == std::chrono::duration_cast<cli::duration>(corolock::lock_options{}.lease));
    CHECK(run.lease_text == cli::format_duration(run.lease));
    CHECK(run.grace == cli::defaults::grace);
    CHECK(run.conflict_exit_code == cli::exit_status::not_acquired);
    CHECK(run.common.url == cli::defaults::url());
    CHECK(run.common.url_from == "the default URL");
    const corolock::config library;
    CHECK(run.common.cfg.host == library.host);
    CHECK(run.common.cfg.port == library.port);
}

TEST_CASE("cli defaults: the shortest lease run takes", "[unit][cli]") {
    static_assert(cli::defaults::min_lease >= corolock::min_lease);
    const std::string shortest = cli::format_duration(cli::defaults::min_lease);
    const std::string shorter = cli::format_duration(cli::defaults::min_lease - 1ms);
    cli::parsed_command cmd;
    CHECK_FALSE(parse({"run", "--lease", shortest, "job", "--", "true"}, cmd).has_value());
    const auto err = parse({"run", "--lease", shorter, "job", "--", "true"}, cmd);
    REQUIRE(err);
    CHECK(err->message == "--lease must be at least " + shortest + " (got " + shorter + ")");
}

TEST_CASE("cli help: the texts state the defaults the code uses", "[unit][cli]") {
    const std::string run = cli::help_text("run");
    CHECK(contains(run, "At least " + cli::format_duration(cli::defaults::min_lease) + "."));
    CHECK(contains(run, "Default " + cli::format_duration(cli::defaults::lease) + "."));
    CHECK(contains(run, "Default " + cli::format_duration(cli::defaults::grace) + "."));
    CHECK(contains(run, "within about\n" + cli::format_duration(cli::defaults::command_timeout) +
                            " (exit 69)"));

    using list_defaults = corolock::lock_list_defaults;
    const std::string list = cli::help_text("list");
    CHECK(contains(list, std::to_string(list_defaults::count_per_step) + " per step"));
    CHECK(contains(list, "stops after " + cli::format_duration(list_defaults::max_time) + ",\n" +
                             std::to_string(list_defaults::max_steps) + " steps or " +
                             std::to_string(list_defaults::max_locks) + " locks"));

    for (std::string_view topic :
         {"", "run", "status", "list", "break", "check", "elect", "leader"}) {
        INFO("help topic '" << topic << "'");
        const std::string text = cli::help_text(topic);
        CHECK(contains(text, cli::defaults::url()));
        CHECK(left_token(text).empty());
    }
}

// `name` ("-w", "--wait") as an option of the text: after a space, ',',
// '[' or '|' and before a character that cannot continue an option name.
bool documents_option(const std::string& text, const std::string& name) {
    for (auto at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
        const char before = at == 0 ? ' ' : text[at - 1];
        const std::size_t end = at + name.size();
        const char after = end < text.size() ? text[end] : ' ';
        const bool starts = before == ' ' || before == ',' || before == '[' || before == '|';
        const bool ends = !(std::isalnum(static_cast<unsigned char>(after)) || after == '-');
        if (starts && ends) return true;
    }
    return false;
}

// The help texts are the one source of the man page and the completion
// (packaging/cli_docs.cpp): an option the parser takes and the help does
// not name would be missing from both.
TEST_CASE("cli help: every option the parser knows is in the command's help", "[unit][cli]") {
    const std::string overview = cli::help_text("");
    for (std::string_view command :
         {"run", "status", "list", "break", "check", "elect", "leader", "fence"}) {
        const auto names = cli::parser_option_names(command);
        INFO("command " << command);
        CHECK(names.size() >= 10);  // the common options at least
        const std::string help = cli::help_text(command);
        for (const auto& name : names) {
            INFO("option " << name);
            CHECK((documents_option(help, name) || documents_option(overview, name)));
        }
    }
    CHECK(cli::parser_option_names("nope").empty());
}

TEST_CASE("cli help: the overview lists every exit status", "[unit][cli]") {
    namespace status = cli::exit_status;
    const std::string overview = cli::help_text("");
    for (int code : {status::stale_token, status::usage, status::unavailable, status::lease_lost, status::os_error,
                     status::not_acquired, status::remote_error, status::no_permission,
                     status::cannot_execute, status::not_found}) {
        INFO("exit status " << code);
        CHECK(contains(overview, "\n  " + std::to_string(code) + "  "));
    }
    CHECK(contains(overview, "\n  " + std::to_string(status::signal_base) + "+N"));
}

TEST_CASE("cli: a service that cannot be used exits 69, a server's refusal 76", "[unit][cli]") {
    namespace status = cli::exit_status;
    using corolock::error;
    for (error e : {error::timeout, error::not_connected, error::connection_lost,
                    error::connect_timeout, error::resolve_failed, error::tls_handshake_failed,
                    error::auth_failed, error::handshake_failed, error::never_connected,
                    error::server_too_old, error::no_primary, error::cluster_down}) {
        const corolock::error_code ec = e;
        INFO(ec.message());
        CHECK(cli::exit_status_for(ec) == status::unavailable);
    }
    CHECK(cli::exit_status_for(boost::asio::error::connection_refused) == status::unavailable);
    for (error e : {error::server_error, error::wrong_type, error::no_permission,
                    error::unexpected_reply}) {
        const corolock::error_code ec = e;
        INFO(ec.message());
        CHECK(cli::exit_status_for(ec) == status::remote_error);
    }
    CHECK(cli::exit_status_for(error::wait_timeout) == status::not_acquired);
    CHECK(cli::exit_status_for(error::lock_held) == status::not_acquired);
    CHECK(cli::exit_status_for(error::invalid_url) == status::usage);
    CHECK(cli::exit_status_for(error::client_stopped) == status::os_error);
}

TEST_CASE("cli: run takes a redis+sentinel:// URL, and COMMAND gets it without secrets",
          "[unit][cli]") {
    cli::parsed_command cmd;
    const std::string_view url =
        "redis+sentinel://app:pw@10.0.0.1,10.0.0.2:26380/orders/2?sentinel_password=spw";
    REQUIRE_FALSE(parse({"run", "--url", url, "job", "--", "true"}, cmd).has_value());
    const auto& cfg = cmd.run.common.cfg;
    CHECK(cfg.mode == corolock::topology::sentinel);
    REQUIRE(cfg.nodes.size() == 2);
    CHECK(cfg.nodes[0] == corolock::endpoint{"10.0.0.1", corolock::default_sentinel_port});
    CHECK(cfg.nodes[1] == corolock::endpoint{"10.0.0.2", 26380});
    CHECK(cfg.service_name == "orders");
    CHECK(cfg.database == 2);
    CHECK(cfg.sentinel_password == "spw");
    CHECK(corolock::url_without_credentials(url) == "redis+sentinel://10.0.0.1,10.0.0.2:26380/orders/2");
    CHECK(corolock::url_without_credentials("rediss+sentinel://s1/svc?sentinel_user=u&tls_verify=no") ==
          "rediss+sentinel://s1/svc?tls_verify=no");
    CHECK(corolock::url_without_credentials("redis://h:1/0?a=b") == "redis://h:1/0?a=b");
}

TEST_CASE("cli: --sentinel-tls-server-name pins the Sentinels' name, --tls-server-name the "
          "servers'",
          "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"status", "--url", "redis+sentinel://10.0.0.1/orders",
                         "--tls-server-name", "redis.internal", "--sentinel-tls-server-name",
                         "sentinel.internal", "job"},
                        cmd)
                      .has_value());
    const auto& cfg = cmd.status.common.cfg;
    CHECK(cfg.tls.enabled);  // as every TLS option, also with redis+sentinel://
    CHECK(cfg.tls.server_name == "redis.internal");
    CHECK(cfg.tls.sentinel_server_name == "sentinel.internal");

    // The option wins over the URL's query key, as the other TLS options.
    cli::parsed_command q;
    REQUIRE_FALSE(parse({"status", "--url",
                         "rediss+sentinel://h/svc?sentinel_tls_server_name=from.url",
                         "--sentinel-tls-server-name", "from.option", "job"},
                        q)
                      .has_value());
    CHECK(q.status.common.cfg.tls.sentinel_server_name == "from.option");
    CHECK(q.status.common.cfg.tls.server_name.empty());

    check_usage_errors({
        {{"status", "--url", "rediss://h", "--sentinel-tls-server-name", "s", "job"},
         "--sentinel-tls-server-name applies to Sentinel URLs only"},
        {{"status", "--url", "redis+cluster://h:7000", "--sentinel-tls-server-name", "s", "job"},
         "--sentinel-tls-server-name applies to Sentinel URLs only"},
        {{"status", "--url", "redis+sentinel://h/svc", "--sentinel-tls-server-name", "", "job"},
         "option --sentinel-tls-server-name needs a value"},
        {{"status", "--url", "etcd://127.0.0.1:2379", "--sentinel-tls-server-name", "s", "job"},
         "--sentinel-tls-server-name applies to Redis URLs only"},
    });
}

TEST_CASE("cli: run takes a redis+cluster:// URL and COMMAND gets it without secrets",
          "[unit][cli]") {
    cli::parsed_command cmd;
    const std::string_view url = "redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001";
    REQUIRE_FALSE(parse({"run", "--url", url, "job", "--", "true"}, cmd).has_value());
    const auto& cfg = cmd.run.common.cfg;
    CHECK(cfg.mode == corolock::topology::cluster);
    REQUIRE(cfg.nodes.size() == 2);
    CHECK(cfg.nodes[0] == corolock::endpoint{"10.0.0.1", 7000});
    CHECK(cfg.nodes[1] == corolock::endpoint{"10.0.0.2", 7001});
    CHECK(corolock::url_without_credentials(url) == "redis+cluster://10.0.0.1:7000,10.0.0.2:7001");
}

TEST_CASE("cli: run --capacity N --permits K takes K permits of a semaphore", "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "job", "--", "true"}, cmd).has_value());
    CHECK(cmd.run.capacity == 0);  // a mutex
    REQUIRE_FALSE(parse({"run", "--capacity", "5", "job", "--", "true"}, cmd).has_value());
    CHECK(cmd.run.capacity == 5);
    CHECK(cmd.run.permits == 1);
    cli::parsed_command two;
    REQUIRE_FALSE(
        parse({"run", "--permits", "2", "--capacity=5", "job", "--", "true"}, two).has_value());
    CHECK(two.run.capacity == 5);
    CHECK(two.run.permits == 2);
    const std::vector<std::pair<std::vector<std::string_view>, std::string>> bad = {
        {{"run", "--permits", "2", "job", "--", "true"}, "--permits needs --capacity N"},
        {{"run", "--capacity", "2", "--permits", "3", "job", "--", "true"},
         "--permits 3 is more than --capacity 2"},
        {{"run", "--capacity", "0", "job", "--", "true"},
         "bad --capacity value '0': expected a whole number from 1 to 1000000"},
        {{"run", "--permits", "x", "--capacity", "2", "job", "--", "true"},
         "bad --permits value 'x'"},
        {{"run", "--capacity", "1000001", "job", "--", "true"}, "bad --capacity value"},
    };
    check_usage_errors(bad);
}

TEST_CASE("cli: run -s and -x take a shared mutex's levels, as flock -s and -x",
          "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "job", "--", "true"}, cmd).has_value());
    CHECK(cmd.run.level == cli::lock_level::mutex);
    for (const auto& [flag, level] :
         {std::pair{std::string_view("-s"), cli::lock_level::shared},
          std::pair{std::string_view("--shared"), cli::lock_level::shared},
          std::pair{std::string_view("-x"), cli::lock_level::exclusive},
          std::pair{std::string_view("--exclusive"), cli::lock_level::exclusive}}) {
        cli::parsed_command c;
        REQUIRE_FALSE(parse({"run", flag, "job", "--", "true"}, c).has_value());
        CHECK(c.run.level == level);
    }
    cli::parsed_command combined;  // "-sn" is "-s -n"
    REQUIRE_FALSE(parse({"run", "-sn", "job", "--", "true"}, combined).has_value());
    CHECK(combined.run.level == cli::lock_level::shared);
    REQUIRE(combined.run.wait);
    CHECK(combined.run.wait->count() == 0);
    const std::vector<std::pair<std::vector<std::string_view>, std::string>> bad = {
        {{"run", "-s", "-x", "job", "--", "true"}, "cannot be used together"},
        {{"run", "-x", "--fair", "job", "--", "true"}, "-x (--exclusive) and --fair"},
        {{"run", "-s", "--capacity", "2", "job", "--", "true"}, "-s (--shared) and --capacity"},
        {{"run", "-s", "--replicas", "1", "job", "--", "true"}, "--replicas is not offered with -s"},
    };
    check_usage_errors(bad);
}

TEST_CASE("cli: run with several NAMEs takes them in canonical order, duplicates merged",
          "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "b", "a", "c", "a", "--", "true"}, cmd).has_value());
    CHECK(cmd.run.names == std::vector<std::string>{"a", "b", "c"});
    CHECK(cmd.run.several());
    CHECK(cmd.run.name == "a,b,c");
    cli::parsed_command one;
    REQUIRE_FALSE(parse({"run", "job", "job", "--", "true"}, one).has_value());
    CHECK_FALSE(one.run.several());
    CHECK(one.run.name == "job");
}

TEST_CASE("cli: several --url make a RedLock of an odd number of distinct servers",
          "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "--url", "redis://h1:1", "--url", "redis://h2:2", "--url",
                         "redis://h3:3", "job", "--", "true"},
                        cmd)
                      .has_value());
    REQUIRE(cmd.run.common.redlock());
    REQUIRE(cmd.run.common.nodes.size() == 3);
    CHECK(cmd.run.common.nodes[2].host == "h3");
    CHECK(cmd.run.common.nodes[2].port == 3);
    cli::parsed_command single;
    REQUIRE_FALSE(parse({"run", "--url", "redis://h1:1", "job", "--", "true"}, single).has_value());
    CHECK_FALSE(single.run.common.redlock());
    const std::vector<std::pair<std::vector<std::string_view>, std::string>> bad = {
        {{"run", "--url", "redis://h1", "--url", "redis://h2", "x", "--", "true"},
         "RedLock needs at least 3 --url"},
        {{"run", "--url", "redis://h1", "--url", "redis://h2", "--url", "redis://h3", "--url",
          "redis://h4", "x", "--", "true"},
         "odd number of --url"},
        {{"run", "--url", "redis://h1:1", "--url", "redis://h2", "--url", "redis://h1:1", "x",
          "--", "true"},
         "--url #3 names h1:1 again"},
        {{"run", "--url", "redis://h1", "--url", "redis+cluster://h2:7000", "--url", "redis://h3",
          "x", "--", "true"},
         "--url #2 is a Redis Cluster"},
        {{"status", "--url", "redis://h1", "--url", "redis://h2", "--url", "redis://h3", "x"},
         "status reads one server"},
    };
    check_usage_errors(bad);
}

TEST_CASE("cli: COMMAND's REDIS_URL has no credential of any scheme", "[unit][cli]") {
    // A PostgreSQL URL's query credentials (its key %-escaped or not) were
    // passed on before; the user info of every scheme is removed.
    CHECK(corolock::url_without_credentials(
              "postgresql://app:pw@db:5432/x?sslmode=require&password=s3cret&pass%77ord=s3cret&"
              "sslpassword=kp&application_name=job") ==
          "postgresql://db:5432/x?sslmode=require&application_name=job");
    CHECK(corolock::url_without_credentials("etcd://root:s3cret@127.0.0.1:2379/app") ==
          "etcd://127.0.0.1:2379/app");
    CHECK(corolock::url_without_credentials("zk://u:s3cret@127.0.0.1:2181/locks") ==
          "zk://127.0.0.1:2181/locks");
    CHECK(corolock::url_without_credentials("redis+sentinel://a:pw@s1,s2/mymaster?sentinel_password=x") ==
          "redis+sentinel://s1,s2/mymaster");
}

TEST_CASE("cli: run records COMMAND's program name as its label, or --label, or none",
          "[unit][cli]") {
    // The whole command line was the label before: an argument holding a
    // secret was published to whoever may run status or list.
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "job", "--", "./bin/backup.sh", "--key", "s3cret"}, cmd).has_value());
    CHECK_FALSE(cmd.run.label.has_value());
    CHECK(cli::command_label(cmd.run.command) == "backup.sh");
    CHECK(cli::command_label({"make", "deploy"}) == "make");
    CHECK(cli::command_label({"/usr/bin/"}).empty());
    REQUIRE_FALSE(parse({"run", "--label", "nightly report", "job", "--", "true"}, cmd).has_value());
    CHECK(cmd.run.label == std::optional<std::string>("nightly report"));
    cli::parsed_command none;
    REQUIRE_FALSE(parse({"run", "--no-label", "job", "--", "true"}, none).has_value());
    CHECK(none.run.label == std::optional<std::string>(""));
    cli::parsed_command longer;
    REQUIRE_FALSE(parse({"run", "--label", std::string(300, 'x'), "job", "--", "true"}, longer)
                      .has_value());
    CHECK(longer.run.label->size() == corolock::max_holder_label_length);
    check_usage_errors({{{"run", "--label", "", "job", "--", "true"}, "--label needs a text"}});
}

TEST_CASE("cli: check takes NAME and a non-negative integer TOKEN", "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"check", "orders:42", "18446744073709551615"}, cmd).has_value());
    CHECK(cmd.what == cli::parsed_command::kind::check);
    CHECK(cmd.check.name == "orders:42");
    CHECK(cmd.check.token == 18446744073709551615ull);
    REQUIRE_FALSE(parse({"check", "--url", "etcd://127.0.0.1:2379", "n", "0"}, cmd).has_value());
    CHECK(cmd.check.token == 0);
    CHECK(cmd.check.common.kind == cli::url_kind::etcd);
    const std::vector<std::pair<std::vector<std::string_view>, std::string>> bad = {
        {{"check"}, "missing NAME and TOKEN"},
        {{"check", "n"}, "missing TOKEN"},
        {{"check", "n", "1", "2"}, "unexpected argument '2'"},
        {{"check", "n", "x1"}, "bad TOKEN 'x1': a fencing token is a non-negative integer"},
        {{"check", "n", "1.5"}, "bad TOKEN '1.5'"},
        {{"check", "n", ""}, "bad TOKEN ''"},
        {{"check", "n", "18446744073709551616"}, "bad TOKEN '18446744073709551616'"},
        {{"check", "n", "+1"}, "bad TOKEN '+1'"},
    };
    check_usage_errors(bad);
}

TEST_CASE("cli: run takes flock's command line: NAME COMMAND, -c, -o; -u and -F refused",
          "[unit][cli]") {
    cli::parsed_command cmd;
    // The first word after NAME starts COMMAND; what follows is COMMAND's,
    // options too ("-n" is echo's here, not --no-wait).
    REQUIRE_FALSE(parse({"run", "-w", "5", "job", "echo", "-n", "hi"}, cmd).has_value());
    CHECK(cmd.run.names == std::vector<std::string>{"job"});
    CHECK(cmd.run.command == std::vector<std::string>{"echo", "-n", "hi"});
    CHECK(cmd.run.wait == cli::duration(5s));
    // Options between NAME and COMMAND are run's, as flock's.
    cli::parsed_command between;
    REQUIRE_FALSE(parse({"run", "job", "-n", "true"}, between).has_value());
    CHECK(between.run.wait == cli::duration::zero());
    CHECK(between.run.command == std::vector<std::string>{"true"});
    // With "--": NAMEs before it, COMMAND after it.
    cli::parsed_command several;
    REQUIRE_FALSE(parse({"run", "b", "a", "--", "git", "log", "--", "f"}, several).has_value());
    CHECK(several.run.names == std::vector<std::string>{"a", "b"});
    CHECK(several.run.command == std::vector<std::string>{"git", "log", "--", "f"});
    // -c: the shell runs the command line, as flock -c.
    ::setenv("SHELL", "/bin/sh", 1);
    cli::parsed_command shell;
    REQUIRE_FALSE(parse({"run", "-n", "job", "-c", "echo hi | wc -c"}, shell).has_value());
    CHECK(shell.run.command == std::vector<std::string>{"/bin/sh", "-c", "echo hi | wc -c"});
    CHECK(shell.run.wait == cli::duration::zero());
    // flock's other names: --timeout for -w, --nb and --nonblock for -n, -e for -x.
    cli::parsed_command aliases;
    REQUIRE_FALSE(parse({"run", "--timeout", "2", "-e", "job", "true"}, aliases).has_value());
    CHECK(aliases.run.wait == cli::duration(2s));
    CHECK(aliases.run.level == cli::lock_level::exclusive);
    for (std::string_view nb : {"--nb", "--nonblock"}) {
        cli::parsed_command c;
        REQUIRE_FALSE(parse({"run", nb, "job", "true"}, c).has_value());
        CHECK(c.run.wait == cli::duration::zero());
    }
    // -o is accepted and changes nothing.
    cli::parsed_command close;
    REQUIRE_FALSE(parse({"run", "-o", "job", "true"}, close).has_value());
    CHECK(close.run.command == std::vector<std::string>{"true"});
    check_usage_errors({
        {{"run", "-u", "job", "true"}, "-u (--unlock) is not offered: "},
        {{"run", "--unlock", "job", "true"}, "'corolock break NAME' force-releases it"},
        {{"run", "-F", "job", "true"}, "-F (--no-fork) is not offered: "},
        {{"run", "job", "-c", "true", "false"}, "-c takes the whole command as one argument"},
        {{"run", "job"}, "missing COMMAND after NAME"},
        {{"run", "job", "--"}, "missing COMMAND after '--'"},
        {{"run", "--bogus", "job", "true"}, "unknown option '--bogus'"},
        {{"run", "job", "--bogus", "true"}, "unknown option '--bogus'"},
    });
}

TEST_CASE("cli: a bare number is seconds for every time option of run (one rule)",
          "[unit][cli]") {
    cli::parsed_command cmd;
    REQUIRE_FALSE(parse({"run", "--lease", "5", "-w", "5", "--grace", "2.5", "--lock-delay",
                         "1.5", "job", "true"},
                        cmd)
                      .has_value());
    CHECK(cmd.run.lease == cli::duration(5s));
    CHECK(cmd.run.lease_text == "5s");
    CHECK(cmd.run.wait == cli::duration(5s));
    CHECK(cmd.run.grace == cli::duration(2500ms));
    CHECK(cmd.run.lock_delay == cli::duration(1500ms));
    cli::parsed_command units;
    REQUIRE_FALSE(
        parse({"run", "--lease", "2m", "-w", "500ms", "--lock-delay", "3s", "job", "true"}, units)
            .has_value());
    CHECK(units.run.lease == cli::duration(2min));
    CHECK(units.run.wait == cli::duration(500ms));
    CHECK(units.run.lock_delay == cli::duration(3s));
    cli::parsed_command none;
    REQUIRE_FALSE(parse({"run", "job", "true"}, none).has_value());
    CHECK(none.run.lock_delay == cli::duration::zero());
    check_usage_errors({
        {{"run", "--lease", "soon", "job", "true"},
         "bad --lease value 'soon': expected a whole number and a unit"},
        {{"run", "--lease", "soon", "job", "true"}, "; or plain seconds: 5, 0.5"},
        {{"run", "--lock-delay", "61", "job", "true"}, "--lock-delay must be at most 1m (got 61s)"},
    });
}

TEST_CASE("cli: elect takes run's forms with one NAME and --value; leader takes --json and --watch",
          "[unit][cli]") {
    using kind = cli::parsed_command::kind;
    cli::parsed_command c;
    REQUIRE_FALSE(
        parse({"elect", "--value", "host-a:80", "-w", "5", "sched", "--", "./s", "-x"}, c));
    CHECK(c.what == kind::elect);
    REQUIRE(c.run.elect());
    CHECK(*c.run.leader_value == "host-a:80");
    CHECK(c.run.names == std::vector<std::string>{"sched"});
    CHECK(c.run.command == std::vector<std::string>{"./s", "-x"});
    CHECK(c.run.wait == std::optional<cli::duration>(5s));

    cli::parsed_command flock;  // flock's form: the first word after NAME starts COMMAND
    REQUIRE_FALSE(parse({"elect", "sched", "sh", "-c", "true"}, flock));
    REQUIRE(flock.run.elect());
    CHECK(flock.run.leader_value->empty());
    CHECK(flock.run.command.size() == 3);

    cli::parsed_command run;  // run never campaigns
    REQUIRE_FALSE(parse({"run", "sched", "--", "true"}, run));
    CHECK_FALSE(run.run.elect());

    check_usage_errors({
        {{"elect", "sched"}, "missing COMMAND"},
        {{"elect", "sched", "--"}, "missing COMMAND"},
        {{"elect", "a", "b", "--", "true"}, "one NAME"},
        {{"elect", "", "--", "true"}, "bad lock NAME"},
        {{"elect", "--fair", "sched", "--", "true"}, "--fair"},
        {{"elect", "--capacity", "2", "sched", "--", "true"}, "--capacity"},
        {{"run", "--value", "v", "sched", "--", "true"}, "--value"},
        {{"leader"}, "missing NAME"},
        {{"leader", "a", "b"}, "exactly one NAME"},
    });

    cli::parsed_command leader;
    REQUIRE_FALSE(parse({"leader", "--watch", "--json", "sched"}, leader));
    CHECK(leader.what == kind::leader);
    CHECK(leader.leader.name == "sched");
    CHECK(leader.leader.watch);
    CHECK(leader.leader.json);
}
