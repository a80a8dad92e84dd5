#include <corolock/admin.hpp>

#include <corolock/detail/lock_service.hpp>
#include <corolock/detail/logging.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <tuple>
#include <utility>

namespace corolock {

namespace asio = boost::asio;

namespace {

// One admin operation. Its handler is completed exactly once, on the
// client's strand: by the script's reply, or earlier by cancellation. The
// script's own completion may then arrive later and finds nothing to do.
template <class... Results>
struct admin_op : std::enable_shared_from_this<admin_op<Results...>> {
    using handler_type = asio::any_completion_handler<void(error_code, Results...)>;

    admin_op(handler_type h, asio::any_io_executor fallback)
        : handler(std::move(h)), fallback_executor(std::move(fallback)) {}

    handler_type handler;
    asio::any_io_executor fallback_executor;

    void complete(error_code ec, Results... results) {
        if (!handler) return;
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        auto ex = asio::get_associated_executor(handler, fallback_executor);
        auto h = std::move(handler);
        handler = {};
        asio::dispatch(ex, asio::append(std::move(h), ec, std::move(results)...));
    }
};

// Parses a script's reply into the operation's results; returns an error
// for a reply of the wrong shape.
template <class... Results>
using reply_parser = std::function<error_code(const reply&, Results&...)>;

template <class... Results>
void run_admin_script(client& c, std::string name, const detail::script& s,
                      std::vector<std::string> keys, std::vector<std::string> args,
                      bool idempotent, reply_parser<Results...> parse,
                      typename admin_op<Results...>::handler_type handler,
                      std::string why = {}) {
    const auto& impl = c.impl();
    auto op = std::make_shared<admin_op<Results...>>(std::move(handler), impl->get_executor());

    // `why` arrives non-empty when the caller already found an argument bad.
    error_code ec = why.empty() ? validate_lock_name(name, why) : error::invalid_argument;
    if (ec) {
        impl->log().debug("admin {}: {}", s.name, detail::escaped{why});
        // Never complete inside the initiating call.
        asio::post(impl->strand(), [op, ec] { op->complete(ec, Results{}...); });
        return;
    }

    auto slot = asio::get_associated_cancellation_slot(op->handler);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<admin_op<Results...>>(op),
                     strand = impl->strand()](asio::cancellation_type type) {
            if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                asio::cancellation_type::none)
                return;
            // Posted: completing clears the slot, which must not happen from
            // inside the slot's own handler.
            asio::post(strand, [weak] {
                if (auto o = weak.lock()) o->complete(asio::error::operation_aborted, Results{}...);
            });
        });
    }

    asio::post(impl->strand(), [impl, op, &s, keys = std::move(keys), args = std::move(args),
                                idempotent, parse = std::move(parse)]() mutable {
        if (impl->stopped()) {
            op->complete(error::client_stopped, Results{}...);
            return;
        }
        auto svc = detail::lock_service::of(*impl);
        const std::vector<std::string_view> key_views(keys.begin(), keys.end());
        const std::vector<std::string_view> arg_views(args.begin(), args.end());
        svc->run_script(s, key_views, arg_views, idempotent,
                        [op, parse = std::move(parse)](error_code ec, reply r) {
                            std::tuple<Results...> results{};
                            if (!ec) {
                                ec = std::apply(
                                    [&](Results&... out) { return parse(r, out...); }, results);
                            }
                            std::apply(
                                [&](Results&... out) { op->complete(ec, std::move(out)...); },
                                results);
                        });
    });
}

bool is_integer(const reply& r) noexcept { return r.type == resp3_type::integer; }

// A Lua string comes back as a bulk string (an empty one included).
bool is_text(const reply& r) noexcept { return r.is_string(); }

}  // namespace

namespace detail {

void lock_status_impl(client& c, std::string name, lock_status_handler handler) {
    auto keys = keys_for(name);
    reply_parser<lock_status> parse = [](const reply& r, lock_status& out) -> error_code {
        // {owner or '', pttl, levels, last token}
        if (r.type != resp3_type::array || r.elements.size() != 4 || !is_text(r.elements[0]) ||
            !is_integer(r.elements[1]) || !is_integer(r.elements[2]) ||
            !is_integer(r.elements[3]))
            return error::unexpected_reply;
        out.owner = r.elements[0].str;
        out.held = !out.owner.empty();
        const auto pttl = r.elements[1].integer;
        // PTTL: -1 means the key exists without a TTL, -2 that it is gone.
        if (!out.held || pttl == -2)
            out.ttl = std::chrono::milliseconds(0);
        else
            out.ttl = std::chrono::milliseconds(pttl);
        out.levels = out.held ? r.elements[2].integer : 0;
        out.last_token = r.elements[3].integer > 0
                             ? static_cast<std::uint64_t>(r.elements[3].integer)
                             : 0;
        return {};
    };
    run_admin_script<lock_status>(c, std::move(name), status_script(),
                                  {std::string(keys.lock()), std::string(keys.fence())}, {},
                                  /*idempotent=*/true, std::move(parse), std::move(handler));
}

void break_lock_impl(client& c, std::string name, lock_status_handler handler) {
    auto keys = keys_for(name);
    reply_parser<lock_status> parse = [](const reply& r, lock_status& out) -> error_code {
        // {owner or '', levels removed}
        if (r.type != resp3_type::array || r.elements.size() != 2 || !is_text(r.elements[0]) ||
            !is_integer(r.elements[1]))
            return error::unexpected_reply;
        out.owner = r.elements[0].str;
        out.held = !out.owner.empty();
        out.levels = out.held ? r.elements[1].integer : 0;
        return {};
    };
    // Not idempotent: a re-sent break could remove the next holder's lock.
    run_admin_script<lock_status>(c, std::move(name), break_script(),
                                  {std::string(keys.lock()), std::string(keys.channel())}, {},
                                  /*idempotent=*/false, std::move(parse), std::move(handler));
}

void release_owner_impl(client& c, std::string name, std::string owner,
                        asio::any_completion_handler<void(error_code)> handler) {
    // The script compares owners; an empty one would match nothing, but it
    // is certainly a caller's mistake.
    std::string why = owner.empty() ? "owner id is empty" : "";
    auto keys = keys_for(name);
    reply_parser<> parse = [](const reply& r) -> error_code {
        // {status, receivers}; see scripts.cpp.
        if (r.type != resp3_type::array || r.elements.size() != 2 || !is_integer(r.elements[0]))
            return error::unexpected_reply;
        switch (static_cast<release_status>(r.elements[0].integer)) {
        case release_status::released:
        // With every level named at once, 2 and 3 cannot come back; were
        // they to, the owner's levels are gone or going, which is success.
        case release_status::level_released:
        case release_status::already_released: return {};
        case release_status::expired: return error::expired;
        case release_status::not_owner: return error::not_owner;
        }
        return error::unexpected_reply;
    };
    run_admin_script<>(c, std::move(name), release_script(),
                       {std::string(keys.lock()), std::string(keys.channel())},
                       {std::move(owner), std::string(all_levels)},
                       /*idempotent=*/true, std::move(parse), std::move(handler),
                       std::move(why));
}

}  // namespace detail

}  // namespace corolock
