#include "redis/lock/script_call.hpp"

#include "redis/resp/resp_writer.hpp"

#include <cassert>
#include <charconv>
#include <utility>
#include <vector>

namespace corolock::detail {

void script_args::key(std::string_view k) noexcept {
    assert(nkeys_ < max_keys);
    keys_[nkeys_++] = k;
}

void script_args::arg(std::string_view a) noexcept {
    assert(nargs_ < max_args);
    args_[nargs_++] = a;
}

void script_args::arg(std::int64_t n) noexcept {
    assert(nargs_ < max_args);
    auto& buf = numbers_[nargs_];
    const auto end = std::to_chars(buf.data(), buf.data() + buf.size(), n).ptr;
    args_[nargs_++] = std::string_view(buf.data(), static_cast<std::size_t>(end - buf.data()));
}

namespace {
std::string_view script_verb(bool by_sha) noexcept { return by_sha ? "EVALSHA" : "EVAL"; }
std::string_view script_body(const script& s, bool by_sha) noexcept {
    return by_sha ? std::string_view(s.sha1) : std::string_view(s.source);
}

}  // namespace

std::size_t script_command_size(const script& s, bool by_sha, const script_args& a) noexcept {
    using namespace resp_writer;
    // The key count is one more bulk string, of at most max_decimal digits.
    std::size_t size = array_header_bound + bulk_bound(script_verb(by_sha).size()) +
                       bulk_bound(script_body(s, by_sha).size()) + bulk_bound(max_decimal);
    for (auto k : a.keys()) size += bulk_bound(k.size());
    for (auto v : a.args()) size += bulk_bound(v.size());
    return size;
}

void append_script_command(std::string& out, const script& s, bool by_sha, const script_args& a) {
    using namespace resp_writer;
    const auto keys = a.keys();
    const auto args = a.args();
    const std::size_t old = out.size();
    // Sized once, then plain stores: this runs for every lock command.
    out.resize(old + script_command_size(s, by_sha, a));
    char* p = out.data() + old;
    p = put_array_header(p, 3 + keys.size() + args.size());
    p = put_bulk(p, script_verb(by_sha));
    p = put_bulk(p, script_body(s, by_sha));
    char count[max_decimal];
    p = put_bulk(p, std::string_view(count, static_cast<std::size_t>(put_decimal(count, keys.size()) - count)));
    for (auto k : keys) p = put_bulk(p, k);
    for (auto v : args) p = put_bulk(p, v);
    out.resize(static_cast<std::size_t>(p - out.data()));
}

namespace {
client_impl::exec_options script_options(bool idempotent, bool priority) {
    client_impl::exec_options opts;
    opts.idempotent = idempotent;
    opts.priority = priority;
    return opts;
}

// A call whose keys and arguments are copies it keeps, with a callback.
class stored_call final : public script_call {
public:
    stored_call(std::span<const std::string_view> keys, std::span<const std::string_view> args,
                script_handler handler)
        : keys_(keys.begin(), keys.end()), args_(args.begin(), args.end()),
          handler_(std::move(handler)) {}

    void arguments(script_args& out) const override {
        for (const auto& k : keys_) out.key(k);
        for (const auto& a : args_) out.arg(std::string_view(a));
    }
    void on_script_reply(error_code ec, reply r) override { handler_(ec, std::move(r)); }

private:
    std::vector<std::string> keys_;
    std::vector<std::string> args_;
    script_handler handler_;
};
}  // namespace

void script_call::on_reply(std::shared_ptr<reply_target> self, error_code ec, reply r) {
    if (ec == error::no_script && !by_source_) {
        // The server lost its scripts (a restart, SCRIPT FLUSH): send the
        // whole source once, with the arguments built again.
        by_source_ = true;
        client_->exec(script_options(idempotent_, false), std::move(self));
        return;
    }
    on_script_reply(ec, std::move(r));
}

// Only a queued call is asked, and run_script() set its script.
std::size_t script_call::command_size() const noexcept {
    script_args a;
    arguments(a);
    return script_command_size(*script_, !by_source_, a);
}

void script_call::write_command(std::string& out) const {
    script_args a;
    arguments(a);
    append_script_command(out, *script_, !by_source_, a);
}

void run_script(client_impl& c, const script& s, std::shared_ptr<script_call> call,
                bool idempotent, bool priority, bool by_source) {
    call->script_ = &s;  // the scripts are function-local statics
    call->client_ = &c;
    call->idempotent_ = idempotent;
    call->by_source_ = by_source;
    c.exec(script_options(idempotent, priority), std::shared_ptr<reply_target>(std::move(call)));
}

std::shared_ptr<script_call> make_stored_call(std::span<const std::string_view> keys,
                                              std::span<const std::string_view> args,
                                              script_handler handler) {
    return std::make_shared<stored_call>(keys, args, std::move(handler));
}

}  // namespace corolock::detail
