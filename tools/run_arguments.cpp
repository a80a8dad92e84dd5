// run's and elect's options: holding a lock (or a term) while COMMAND runs,
// each value checked, and the forms of their command line (parse_run).
#include "arguments.hpp"
#include "cli.hpp"

#include <corolock/election.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/semaphore.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace corolock::cli {

namespace {

// "5", "0.5", "12.125": seconds with at most millisecond precision (further
// digits are dropped). Empty when the text is not such a number or is too long.
std::optional<duration> parse_seconds(std::string_view text) {
    const auto dot = text.find('.');
    const auto whole = text.substr(0, dot);
    const auto fraction = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
    if (whole.empty() || whole.size() > 9) return std::nullopt;
    if (dot != std::string_view::npos && fraction.empty()) return std::nullopt;
    auto digits = [](std::string_view s) {
        return s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (!digits(whole) || !digits(fraction)) return std::nullopt;
    std::int64_t ms = std::stoll(std::string(whole)) * 1000;
    std::int64_t scale = 100;
    for (std::size_t i = 0; i < fraction.size() && i < 3; ++i, scale /= 10)
        ms += (fraction[i] - '0') * scale;
    if (ms > max_duration.count()) return std::nullopt;
    return duration(ms);
}

// The options of holding something while COMMAND runs: run's and elect's.
void add_held_options(CLI::App& app, run_slots& s) {
    value_option(app, "--lease", s.lease);
    value_option(app, "-w,--wait,--timeout", s.wait);
    flag_option(app, "-n,--no-wait,--nonblock,--nb", s.no_wait);
    value_option(app, "-E,--conflict-exit-code", s.conflict_exit_code);
    flag_option(app, "-q,--quiet", s.quiet);
    value_option(app, "--on-lost", s.on_lost);
    value_option(app, "--grace", s.grace);
    flag_option(app, "--no-process-group", s.no_process_group);
    flag_option(app, "--pass-credentials", s.pass_credentials);
    value_option(app, "--label", s.label);
    flag_option(app, "--no-label", s.no_label);
    value_option(app, "--metrics-file", s.metrics_file);
    value_option(app, "-c,--command", s.shell_command);
}

}  // namespace

void add_elect_options(CLI::App& app, run_slots& s) {
    add_held_options(app, s);
    value_option(app, "--value", s.leader_value);
}

void add_run_options(CLI::App& app, run_slots& s) {
    add_held_options(app, s);
    flag_option(app, "-s,--shared", s.shared);
    flag_option(app, "-x,-e,--exclusive", s.exclusive);
    flag_option(app, "--fair", s.fair);
    value_option(app, "--capacity", s.capacity);
    value_option(app, "--permits", s.permits);
    value_option(app, "--replicas", s.replicas);
    value_option(app, "--lock-delay", s.lock_delay);
    flag_option(app, "-o,--close", s.close);
    flag_option(app, "-u,--unlock", s.unlock);
    flag_option(app, "-F,--no-fork", s.no_fork);
}

namespace {

// A whole number from lo to hi with at most max_digits digits; `expected`
// ends the message ("expected ...").
std::optional<usage_error> number_value(const std::string& command, const typed_value& v,
                                        std::size_t max_digits, std::uint32_t lo, std::uint32_t hi,
                                        const std::string& expected, std::uint32_t& out) {
    std::uint32_t n = 0;
    bool ok = !v.value.empty() && v.value.size() <= max_digits;
    for (char c : v.value) {
        if (c < '0' || c > '9') ok = false;
        else n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (!ok || n < lo || n > hi)
        return usage_error{command, "bad " + v.option + " value " + single_quoted(v.value) +
                                        ": expected " + expected};
    out = n;
    return std::nullopt;
}

// Every time option (--lease, -w/--wait, --grace, --lock-delay) follows one
// rule: plain or fractional seconds ("5", "0.25", as flock(1) takes them),
// or a duration ("500ms", "2m").
std::optional<usage_error> duration_value(const std::string& command, const typed_value& v,
                                          duration& out) {
    if (auto d = parse_seconds(v.value)) {
        out = *d;
        return std::nullopt;
    }
    std::string why;
    auto d = parse_duration(v.value, why);
    if (!d)
        return usage_error{command, "bad " + v.option + " value " + single_quoted(v.value) + ": " + why +
                                        "; or plain seconds: 5, 0.5"};
    out = *d;
    return std::nullopt;
}

// The values of run's options, checked, into o.
std::optional<usage_error> read_run_options(const std::string& cmd, const run_slots& s,
                                            run_options& o) {
    auto error = [&](std::string m) { return usage_error{cmd, std::move(m)}; };
    if (s.lease) {
        if (auto e = duration_value(cmd, *s.lease, o.lease); e) return e;
        o.lease_text = format_duration(o.lease);
    }
    o.quiet = s.quiet > 0;
    o.fair = s.fair > 0;
    if (s.shared > 0 && s.exclusive > 0)
        return error("-s (--shared) and -x (--exclusive) cannot be used together");
    if (s.shared > 0) o.level = lock_level::shared;
    if (s.exclusive > 0) o.level = lock_level::exclusive;
    o.own_process_group = s.no_process_group == 0;
    o.pass_credentials = s.pass_credentials > 0;
    if (s.label) {
        if (s.label->value.empty()) return error("--label needs a text (--no-label records none)");
        o.label = s.label->value.substr(0, max_holder_label_length);
    }
    if (s.no_label > 0) o.label = std::string();
    if (s.metrics_file) {
        o.metrics_file = s.metrics_file->value;
        if (auto why = check_metrics_file(o.metrics_file))
            return error("bad --metrics-file " + single_quoted(o.metrics_file) + ": " + *why);
    }
    if (s.conflict_exit_code) {
        std::uint32_t code = 0;
        if (auto e = number_value(cmd, *s.conflict_exit_code, 3, 0, 255,
                                  "an exit status from 0 to 255", code);
            e)
            return e;
        o.conflict_exit_code = static_cast<int>(code);
    }
    if (s.replicas) {
        std::uint32_t n = 0;
        if (auto e = number_value(cmd, *s.replicas, 3, 0, 999,
                                  "a number of replicas from 0 to 999", n);
            e)
            return e;
        o.replicas = static_cast<int>(n);
    }
    const std::string permits_range =
        "a whole number from 1 to " + std::to_string(max_semaphore_capacity);
    if (s.capacity) {
        if (auto e = number_value(cmd, *s.capacity, 7, 1, max_semaphore_capacity, permits_range,
                                  o.capacity);
            e)
            return e;
    }
    if (s.permits) {
        if (auto e = number_value(cmd, *s.permits, 7, 1, max_semaphore_capacity, permits_range,
                                  o.permits);
            e)
            return e;
    }
    if (s.grace) {
        if (auto e = duration_value(cmd, *s.grace, o.grace); e) return e;
    }
    if (s.wait) {
        duration d{};
        if (auto e = duration_value(cmd, *s.wait, d); e) return e;
        o.wait = d;
        o.wait_text = format_duration(d);
    }
    if (s.lock_delay) {
        if (auto e = duration_value(cmd, *s.lock_delay, o.lock_delay); e) return e;
        if (o.lock_delay > max_lock_delay)
            return error("--lock-delay must be at most " +
                         format_duration(std::chrono::duration_cast<duration>(max_lock_delay)) +
                         " (got " + format_duration(o.lock_delay) + ")");
    }
    if (s.unlock > 0)
        return error("-u (--unlock) is not offered: the lock is held by corolock run itself and "
                     "released when COMMAND exits; 'corolock break NAME' force-releases it");
    if (s.no_fork > 0)
        return error("-F (--no-fork) is not offered: corolock run stays beside COMMAND to renew "
                     "the lease and release the lock, so it cannot exec COMMAND in its place");
    // -o (--close): flock closes the lock's descriptor before COMMAND runs;
    // COMMAND never gets the lock here (corolock holds it), so there is
    // nothing to close: accepted for flock's command lines.
    if (s.on_lost) {
        if (s.on_lost->value == "kill")
            o.on_lost = on_lost_action::kill;
        else if (s.on_lost->value == "ignore")
            o.on_lost = on_lost_action::ignore;
        else
            return error("bad --on-lost value " + single_quoted(s.on_lost->value) +
                         ": expected kill or ignore");
    }
    if (s.wait && s.no_wait > 0)
        return error("--wait and --no-wait cannot be used together (nor -w and -n)");
    if (s.permits && o.capacity == 0)
        return error("--permits needs --capacity N: the semaphore's number of permits");
    if (o.permits > o.capacity && o.capacity > 0)
        return error("--permits " + std::to_string(o.permits) + " is more than --capacity " +
                     std::to_string(o.capacity));
    if (o.fair && o.capacity > 0)
        return error("--fair and --capacity cannot be used together (the semaphore has no "
                     "queue)");
    if (o.level != lock_level::mutex) {
        const std::string flag = o.level == lock_level::shared ? "-s (--shared)" : "-x (--exclusive)";
        if (o.fair)
            return error(flag + " and --fair cannot be used together (the shared mutex has "
                                "no queue)");
        if (o.capacity > 0)
            return error(flag + " and --capacity cannot be used together (a semaphore has no "
                                "shared level)");
        if (o.replicas > 0)
            return error("--replicas is not offered with " + flag +
                         " (replica acknowledgement is the plain mutex's)");
    }
    if (o.fair && o.replicas > 0)
        return error("--replicas is not offered with --fair (replica acknowledgement is the "
                     "plain mutex's)");
    if (s.no_wait > 0) {
        o.wait = duration::zero();
        o.wait_text = "0s";
    }
    if (o.lease < defaults::min_lease)
        return error("--lease must be at least " + format_duration(defaults::min_lease) +
                     " (got " + o.lease_text + ")");
    return std::nullopt;
}

}  // namespace

std::optional<usage_error> parse_run(const std::vector<std::string_view>& args,
                                     parsed_command& out, const std::string& cmd) {
    const bool elect = cmd == "elect";
    run_options& o = out.run;
    const auto separator = std::find(args.begin(), args.end(), std::string_view("--"));
    const bool saw_separator = separator != args.end();
    const std::vector<std::string_view> head(args.begin(), separator);
    CLI::App app;
    common_slots common;
    run_slots slots;
    std::vector<std::string> names;
    std::string name;
    add_common_options(app, common);
    if (elect)
        add_elect_options(app, slots);
    else
        add_run_options(app, slots);
    if (saw_separator) {
        app.add_option("NAME", names);
    } else {
        // One NAME; CLI11 stops at the next word and leaves it, and all that
        // follows, in remaining(): COMMAND.
        app.add_option("NAME", name);
        app.prefix_command();
    }
    if (auto e = run_parser(app, cmd, head); e) return e;
    if (!saw_separator && app.count("NAME") > 0) names.push_back(name);
    if (common.help > 0) {
        out.what = parsed_command::kind::help;
        out.help_topic = cmd;
        return std::nullopt;
    }
    std::vector<std::string> command;
    if (saw_separator) {
        if (auto e = unknown_option(cmd, app.remaining()); e) return e;
        command.assign(separator + 1, args.end());
    } else {
        // remaining(): the options CLI11 did not know, then COMMAND.
        command = app.remaining();
        const auto first_word = std::find_if(command.begin(), command.end(),
                                             [](const std::string& w) { return !is_option(w); });
        if (auto e = unknown_option(cmd, {command.begin(), first_word}); e) return e;
    }
    credential_options cred;
    if (auto e = read_common_options(cmd, common, o.common, cred); e) return e;
    if (auto e = read_run_options(cmd, slots, o); e) return e;
    auto error = [&](std::string m) { return usage_error{cmd, std::move(m)}; };

    if (names.empty()) return error(saw_separator ? "missing NAME before '--'" : "missing NAME");
    if (slots.shell_command) {
        if (!command.empty())
            return error(slots.shell_command->option + " takes the whole command as one " +
                         "argument; nothing may follow NAME (got " + single_quoted(command[0]) +
                         ")");
        if (slots.shell_command->value.empty())
            return error("option " + slots.shell_command->option + " needs a value");
        const char* shell = std::getenv("SHELL");
        command = {shell != nullptr && *shell != 0 ? shell : "/bin/sh", "-c",
                   slots.shell_command->value};
    }
    if (command.empty())
        return error(saw_separator ? "missing COMMAND after '--'" : "missing COMMAND after NAME");
    for (const auto& name : names)
        if (auto e = check_name(cmd, name); e) return e;
    if (elect) {
        if (names.size() > 1)
            return error("elect campaigns for one NAME (got " + std::to_string(names.size()) + ")");
        o.leader_value = slots.leader_value ? slots.leader_value->value : std::string();
        if (o.leader_value->size() > max_leader_value_length)
            return error("--value is " + std::to_string(o.leader_value->size()) +
                         " bytes long; at most " + std::to_string(max_leader_value_length));
    }
    o.names = detail::canonical_names({names.begin(), names.end()});
    if (o.names.size() > max_run_names)
        return error("too many NAMEs: " + std::to_string(o.names.size()) + " (at most " +
                     std::to_string(max_run_names) + ")");
    if (o.names.size() > 1) {
        // A multi_lock is one plain mutex per name.
        const char* kind = o.fair                           ? "--fair"
                           : o.capacity > 0                 ? "--capacity"
                           : o.level == lock_level::shared  ? "-s (--shared)"
                           : o.level == lock_level::exclusive ? "-x (--exclusive)"
                                                            : nullptr;
        if (kind != nullptr)
            return error(std::string("several NAMEs take a plain lock each (all or none); "
                                     "not with ") +
                         kind);
    }
    o.name = o.names.front();
    for (std::size_t i = 1; i < o.names.size(); ++i) o.name += "," + o.names[i];
    o.command = std::move(command);
    const std::vector<std::string_view> urls(common.urls.begin(), common.urls.end());
    if (auto e = resolve_url(cmd, urls, o.common, cred); e) return e;
    if (o.common.redlock()) {
        // RedLock (src/redlock) offers the plain mutex only, and each node
        // is a primary of its own: nothing to acknowledge.
        const char* refused = o.fair                      ? "--fair"
                              : o.capacity > 0            ? "--capacity"
                              : o.level != lock_level::mutex
                                  ? (o.level == lock_level::shared ? "-s (--shared)"
                                                                   : "-x (--exclusive)")
                              : o.replicas > 0            ? "--replicas"
                                                          : nullptr;
        if (refused != nullptr)
            return error(std::string(refused) +
                         " is not offered with several --url (RedLock takes a plain lock on "
                         "independent servers)");
    }
    return std::nullopt;
}

}  // namespace corolock::cli
