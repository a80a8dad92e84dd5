// Command-line parsing. Every rejection says exactly what was wrong, because
// the tool is mostly run from scripts, where "usage error" alone costs a
// debugging session.
//
// Here: the top level (parse_command_line), the simple commands (status,
// list, break, check, leader), the CLI11 plumbing and durations. The options
// every command takes and its URL: connection_options.cpp; run's and
// elect's: run_arguments.cpp; what the three share: arguments.hpp.
#include "arguments.hpp"
#include "cli.hpp"

#include <corolock/mutex.hpp>

#include <CLI/CLI.hpp>

#include <charconv>
#include <string>
#include <vector>

namespace corolock::cli {

namespace {

std::vector<std::string> option_names(std::string_view names) {
    std::vector<std::string> out;
    while (!names.empty()) {
        const auto comma = names.find(',');
        out.emplace_back(names.substr(0, comma));
        if (comma == std::string_view::npos) break;
        names.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace

std::string single_quoted(std::string_view s) {
    std::string out = "'";
    out.append(s);
    out.push_back('\'');
    return out;
}

void value_option(CLI::App& app, std::string_view names, value_slot& slot) {
    for (auto& name : option_names(names))
        app.add_option_function<std::string>(
               name, [&slot, name](const std::string& v) { slot = typed_value{name, v}; })
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
            ->allow_extra_args(false);
}

void flag_option(CLI::App& app, std::string_view names, int& count) {
    app.add_flag(std::string(names), count)->disable_flag_override();
}

std::optional<usage_error> run_parser(CLI::App& app, const std::string& command,
                                      const std::vector<std::string_view>& args) {
    std::vector<std::string> reversed;  // CLI11 takes them last first
    for (auto it = args.rbegin(); it != args.rend(); ++it) reversed.emplace_back(*it);
    try {
        app.parse(reversed);
    } catch (const CLI::ArgumentMismatch& e) {
        // "--lease: 1 required TEXT missing", "json was given a disallowed
        // flag override".
        const std::string what = e.what();
        auto named = [](std::string name) {
            if (!name.starts_with('-')) name.insert(0, name.size() == 1 ? "-" : "--");
            return name;
        };
        if (const auto at = what.find(" was given a disallowed flag override");
            at != std::string::npos)
            return usage_error{command, "option " + named(what.substr(0, at)) + " takes no value"};
        if (const auto at = what.find(": "); at != std::string::npos &&
                                             what.find(" required ") != std::string::npos)
            return usage_error{command, "option " + named(what.substr(0, at)) + " needs a value"};
        return usage_error{command, what};
    } catch (const CLI::ParseError& e) {
        return usage_error{command, e.what()};
    }
    return std::nullopt;
}

bool is_option(std::string_view tok) { return tok.size() > 1 && tok[0] == '-'; }

std::optional<usage_error> unknown_option(const std::string& command,
                                          const std::vector<std::string>& remaining) {
    for (const auto& tok : remaining)
        if (is_option(tok) && tok != "--")
            return usage_error{command, "unknown option " + single_quoted(tok.substr(0, tok.find('=')))};
    return std::nullopt;
}

std::optional<usage_error> check_name(const std::string& command, std::string_view name) {
    std::string why;
    if (validate_lock_name(name, why))
        return usage_error{command, "bad lock NAME " + single_quoted(name) + ": " + why};
    return std::nullopt;
}

namespace {

// status, break, list and check: the common options, `json` (--json) when
// the command has it, and positionals.
struct simple_command {
    CLI::App app;
    common_slots common;
    int json = 0;
    int watch = 0;  // leader --watch
    std::vector<std::string> words;
};

void add_simple_options(const std::string& cmd, simple_command& c) {
    add_common_options(c.app, c.common);
    if (cmd == "status" || cmd == "list" || cmd == "leader") flag_option(c.app, "--json", c.json);
    if (cmd == "leader") flag_option(c.app, "--watch", c.watch);
    c.app.add_option("WORDS", c.words);
}

// Parses a simple command; the positionals are left in c.words. Sets help
// when asked for.
std::optional<usage_error> parse_simple(const std::string& cmd,
                                        const std::vector<std::string_view>& args,
                                        simple_command& c, common_options& o,
                                        credential_options& cred, parsed_command& out) {
    add_simple_options(cmd, c);
    if (auto e = run_parser(c.app, cmd, args); e) return e;
    if (c.common.help > 0) {
        out.what = parsed_command::kind::help;
        out.help_topic = cmd;
        return std::nullopt;
    }
    if (auto e = unknown_option(cmd, c.app.remaining()); e) return e;
    return read_common_options(cmd, c.common, o, cred);
}

// status and break: [options] NAME
template <class Options>
std::optional<usage_error> parse_name_command(const std::string& cmd,
                                              const std::vector<std::string_view>& args,
                                              Options& o, bool& json, parsed_command& out) {
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    json = c.json > 0;
    if (c.words.empty()) return usage_error{cmd, "missing NAME"};
    if (c.words.size() > 1)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[1]) +
                                    " (give exactly one NAME)"};
    o.name = c.words[0];
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// list: [options] [--json] [PATTERN]
std::optional<usage_error> parse_list(const std::vector<std::string_view>& args,
                                      parsed_command& out) {
    const std::string cmd = "list";
    list_options& o = out.list;
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    o.json = c.json > 0;
    if (c.words.size() > 1)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[1]) +
                                    " (give at most one PATTERN)"};
    if (!c.words.empty()) {
        o.pattern = c.words[0];
        if (o.pattern.find_first_of("{}") != std::string::npos)
            return usage_error{cmd, "bad PATTERN " + single_quoted(o.pattern) +
                                        ": lock names never contain '{' or '}'"};
    }
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// check: [options] NAME TOKEN; TOKEN a non-negative integer (a fencing
// token as a guard or `corolock run` gives it).
std::optional<usage_error> parse_check(const std::vector<std::string_view>& args,
                                       parsed_command& out) {
    const std::string cmd = "check";
    check_options& o = out.check;
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    if (c.words.size() < 2)
        return usage_error{cmd, c.words.empty() ? "missing NAME and TOKEN" : "missing TOKEN"};
    if (c.words.size() > 2)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[2]) +
                                    " (give one NAME and one TOKEN)"};
    o.name = c.words[0];
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::string_view t = c.words[1];
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), o.token);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
        return usage_error{cmd, "bad TOKEN " + single_quoted(t) +
                                    ": a fencing token is a non-negative integer"};
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// leader: [options] [--json] [--watch] NAME
std::optional<usage_error> parse_leader(const std::vector<std::string_view>& args,
                                        parsed_command& out) {
    const std::string cmd = "leader";
    leader_options& o = out.leader;
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    o.json = c.json > 0;
    o.watch = c.watch > 0;
    if (c.words.empty()) return usage_error{cmd, "missing NAME"};
    if (c.words.size() > 1)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[1]) +
                                    " (give exactly one NAME)"};
    o.name = c.words[0];
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// Every option name a command's parser knows ("-w", "--wait", ...).
std::vector<std::string> names_in(const CLI::App& app) {
    std::vector<std::string> out;
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->get_positional()) continue;
        for (const auto& n : opt->get_snames()) out.push_back("-" + n);
        for (const auto& n : opt->get_lnames()) out.push_back("--" + n);
    }
    return out;
}
}  // namespace

std::optional<usage_error> parse_options_only(const std::string& cmd,
                                              const std::vector<std::string_view>& args,
                                              common_options& o, bool& help) {
    simple_command c;
    credential_options cred;
    parsed_command unused;
    if (auto e = parse_simple(cmd, args, c, o, cred, unused); e) return e;
    help = c.common.help > 0;
    if (help) return std::nullopt;
    if (!c.words.empty()) return usage_error{cmd, "unexpected argument " + single_quoted(c.words[0])};
    if (c.common.urls.size() > 1)
        return usage_error{cmd, "give one --url (several are a RedLock's nodes: run only)"};
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o, cred);
}

std::optional<duration> parse_duration(std::string_view text, std::string& why) {
    constexpr std::string_view hint = "expected a whole number and a unit: 500ms, 10s, 2m or 1h";
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (text.empty()) {
        why = "empty duration; " + std::string(hint);
        return std::nullopt;
    }
    if (digits == 0) {
        why = std::string(hint);
        return std::nullopt;
    }
    const auto unit = text.substr(digits);
    if (unit.empty()) {
        why = "no unit; " + std::string(hint);
        return std::nullopt;
    }
    std::chrono::milliseconds::rep per_unit = 0;
    if (unit == "ms") per_unit = 1;
    else if (unit == "s") per_unit = 1000;
    else if (unit == "m") per_unit = 60 * 1000;
    else if (unit == "h") per_unit = 60 * 60 * 1000;
    else {
        why = "unknown unit " + single_quoted(unit) + "; " + std::string(hint);
        return std::nullopt;
    }
    std::chrono::milliseconds::rep value = 0;
    for (std::size_t i = 0; i < digits; ++i) {
        value = value * 10 + (text[i] - '0');
        // Checked per digit, so the multiplication below cannot overflow.
        if (value > max_duration.count()) break;
    }
    if (value > max_duration.count() / per_unit) {
        why = "too long; the limit is " + format_duration(max_duration);
        return std::nullopt;
    }
    why.clear();
    return duration(value * per_unit);
}

std::string format_duration(duration d) {
    const auto ms = d.count();
    if (ms != 0 && ms % (60 * 60 * 1000) == 0) return std::to_string(ms / (60 * 60 * 1000)) + "h";
    if (ms != 0 && ms % (60 * 1000) == 0) return std::to_string(ms / (60 * 1000)) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

std::optional<usage_error> parse_command_line(const std::vector<std::string_view>& args,
                                              parsed_command& out) {
    using kind = parsed_command::kind;
    if (args.empty())
        return usage_error{
            "", "missing COMMAND (run, elect, leader, status, list, break, check or help)"};
    const auto first = args[0];
    const std::vector<std::string_view> rest(args.begin() + 1, args.end());

    if (first == "--help" || first == "-h" || first == "help") {
        out.what = kind::help;
        if (first != "help") {
            if (!rest.empty())
                return usage_error{"", "unexpected argument " + single_quoted(rest[0]) + " after " +
                                           std::string(first)};
            return std::nullopt;
        }
        if (rest.size() > 1)
            return usage_error{"", "unexpected argument " + single_quoted(rest[1]) +
                                       " (help takes at most one COMMAND)"};
        if (!rest.empty()) {
            if (help_text(rest[0]).empty())
                return usage_error{"", "no help for unknown command " + single_quoted(rest[0])};
            out.help_topic = std::string(rest[0]);
        }
        return std::nullopt;
    }
    if (first == "--version" || first == "-V") {
        if (!rest.empty())
            return usage_error{"", "unexpected argument " + single_quoted(rest[0]) + " after " +
                                       std::string(first)};
        out.what = kind::version;
        return std::nullopt;
    }
    if (first == "run") {
        out.what = kind::run;
        return parse_run(rest, out);
    }
    if (first == "elect") {
        out.what = kind::elect;
        return parse_run(rest, out, "elect");
    }
    if (first == "leader") {
        out.what = kind::leader;
        return parse_leader(rest, out);
    }
    if (first == "list") {
        out.what = kind::list;
        return parse_list(rest, out);
    }
    if (first == "check") {
        out.what = kind::check;
        return parse_check(rest, out);
    }
    if (first == "status") {
        out.what = kind::status;
        return parse_name_command("status", rest, out.status, out.status.json, out);
    }
    if (first == "break") {
        out.what = kind::break_lock;
        bool no_json = false;
        return parse_name_command("break", rest, out.brk, no_json, out);
    }
    if (is_option(first)) return usage_error{"", "unknown option " + single_quoted(first)};
    return usage_error{"", "unknown command " + single_quoted(first) +
                               " (commands: run, elect, leader, status, list, break, check, help)"};
}

std::vector<std::string> parser_option_names(std::string_view command) {
    if (command == "run") {
        CLI::App app;
        common_slots common;
        run_slots slots;
        add_common_options(app, common);
        add_run_options(app, slots);
        return names_in(app);
    }
    if (command == "elect") {
        CLI::App app;
        common_slots common;
        run_slots slots;
        add_common_options(app, common);
        add_elect_options(app, slots);
        return names_in(app);
    }
    if (command == "status" || command == "list" || command == "break" || command == "check" ||
        command == "leader" || command == "fence") {
        simple_command c;
        add_simple_options(std::string(command), c);
        return names_in(c.app);
    }
    return {};
}

std::string command_label(const std::vector<std::string>& command) {
    if (command.empty()) return {};
    const std::string& program = command.front();
    const auto slash = program.find_last_of('/');
    std::string label = slash == std::string::npos ? program : program.substr(slash + 1);
    if (label.size() > max_holder_label_length) label.resize(max_holder_label_length);
    return label;
}

}  // namespace corolock::cli
