#include "pg/pg_fence.hpp"

#include "core/inner_executor.hpp"
#include "pg/connection.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <memory>
#include <utility>

namespace corolock::detail::pg {

namespace asio = boost::asio;

namespace {

// Two installs at once wait for each other (CREATE ... IF NOT EXISTS races
// with a unique violation otherwise): a transaction-level advisory lock on
// a key of its own ("corolock fence install" has no lock name's key form).
constexpr std::string_view serialise_installs =
    "SELECT pg_advisory_xact_lock(7233049431866519297)";

constexpr std::string_view create_schema = "CREATE SCHEMA IF NOT EXISTS corolock";

constexpr std::string_view create_table = R"sql(CREATE TABLE IF NOT EXISTS corolock.fences (
    resource   text PRIMARY KEY,
    token      bigint NOT NULL CHECK (token >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
))sql";

// ON CONFLICT DO UPDATE ... WHERE locks the resource's row even when the
// WHERE is false, so concurrent callers are serialised on it until their
// transactions end; a refused call changes nothing. SECURITY DEFINER: a
// caller needs EXECUTE on the function, not rights on the table.
constexpr std::string_view create_function = R"sql(CREATE OR REPLACE FUNCTION corolock.fence(resource text, token bigint)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    highest bigint;
BEGIN
    IF fence.resource IS NULL OR fence.token IS NULL OR fence.token < 0 THEN
        RAISE EXCEPTION 'corolock.fence: the resource must not be NULL and the token must be a non-negative integer (got %, %)',
            coalesce(quote_literal(fence.resource), 'NULL'), coalesce(fence.token::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO corolock.fences AS f (resource, token) VALUES (fence.resource, fence.token)
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = now()
        WHERE f.token <= excluded.token
    RETURNING f.token INTO highest;
    IF NOT FOUND THEN
        SELECT f.token INTO highest FROM corolock.fences AS f WHERE f.resource = fence.resource;
        RAISE EXCEPTION 'STALE token % is older than %, the highest recorded for resource %',
            fence.token, highest, quote_literal(fence.resource)
            USING ERRCODE = 'CLF01',
                  HINT = 'a newer holder of the lock has written; this holder has lost it';
    END IF;
    RETURN fence.token;
END
$fn$)sql";

// Only roles granted EXECUTE may move a fence (docs/fencing.md).
constexpr std::string_view revoke_public =
    "REVOKE ALL ON FUNCTION corolock.fence(text, bigint) FROM PUBLIC";

constexpr std::array<std::string_view, 5> statements{serialise_installs, create_schema,
                                                     create_table, create_function, revoke_public};

std::string explain(const answer& a, std::string_view step, const url_parts& url) {
    if (a.transport) return "fence install: " + a.transport.message();
    if (a.sqlstate == "42501" && step == create_schema)
        return "fence install: this role may not create schema corolock (it needs CREATE on "
               "the database: GRANT CREATE ON DATABASE ... TO it, or install as the database "
               "owner); nothing was installed: " + scrub(a.message, url);
    return "fence install: " + scrub(a.message, url) + " (nothing was installed)";
}

}  // namespace

std::span<const std::string_view> fence_install_statements() noexcept { return statements; }

// Not a coroutine itself: it returns co_spawn's awaitable, as pg::admin's
// operations do, so no frame of the caller's executor holds the strand or
// the connection (a frame that did was freed twice under ASan).
asio::awaitable<std::tuple<error_code, std::string>> install_fence(
    asio::any_io_executor ex, std::shared_ptr<const url_parts> url,
    std::chrono::milliseconds timeout) {
    using result = std::tuple<error_code, std::string>;
    auto strand = asio::make_strand(inner_executor(std::move(ex)));
    return asio::co_spawn(
        strand,
        [strand, url, timeout]() -> asio::awaitable<result> {
            auto conn = std::make_shared<connection>(strand, url);
            std::string why;
            if (auto ec = co_await conn->connect(timeout, why); ec)
                co_return result{ec, "fence install: " + why};
            const auto deadline = connection::clock::now() + timeout;
            auto run = [&](std::string_view sql) -> asio::awaitable<answer> {
                co_return co_await conn->exec(statement{sql, {}}, deadline);
            };
            std::string_view step = "BEGIN";
            answer a = co_await run(step);
            for (std::size_t i = 0; a.ok() && i < statements.size(); ++i) {
                step = statements[i];
                a = co_await run(step);
            }
            if (a.ok()) {
                step = "COMMIT";
                a = co_await run(step);
            } else if (!a.transport) {
                (void)co_await run("ROLLBACK");
            }
            conn->close(error::client_stopped);
            if (a.ok()) co_return result{error_code{}, {}};
            co_return result{error_of(a), explain(a, step, *url)};
        },
        asio::use_awaitable);
}

asio::awaitable<std::tuple<error_code, std::string>> install_fence(
    asio::any_io_executor ex, std::string_view url_text, std::chrono::milliseconds timeout) {
    auto url = std::make_shared<url_parts>();
    std::string why;
    if (const error_code bad = split_url(url_text, *url, why); bad) {
        return asio::co_spawn(
            std::move(ex),
            [bad, reason = "fence install: " + why]()
                -> asio::awaitable<std::tuple<error_code, std::string>> {
                co_return std::tuple<error_code, std::string>{bad, reason};
            },
            asio::use_awaitable);
    }
    return install_fence(std::move(ex), std::move(url), timeout);
}

}  // namespace corolock::detail::pg
