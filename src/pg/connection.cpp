#include "pg/connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>

#include <cstdlib>
#include <vector>

namespace corolock::detail::pg {

namespace asio = boost::asio;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// libpq prints notices (a WARNING from pg_advisory_unlock of a lock not
// held) to stderr by default: the protocol reads answers, not notices.
void ignore_notice(void*, const char*) {}

}  // namespace

connection::connection(executor_type ex, std::shared_ptr<const url_parts> url)
    : ex_(ex), url_(std::move(url)), socket_(ex), wake_(ex), turn_(ex) {}

connection::~connection() { close(error::client_stopped); }

bool connection::usable() const noexcept {
    return conn_ != nullptr && !broken_ && PQstatus(conn_) == CONNECTION_OK;
}

void connection::reassign_socket() {
    error_code ignored;
    if (socket_.is_open()) (void)socket_.release();
    const int fd = conn_ ? PQsocket(conn_) : -1;
    if (fd >= 0) socket_.assign(fd, ignored);
}

asio::awaitable<error_code> connection::connect(clock::duration timeout, std::string& why) {
    auto self = shared_from_this();
    if (url_->sslmode.empty()) {
        conn_ = PQconnectStart(url_->conninfo.c_str());
    } else {
        // The URL expanded first; the keywords after it override its own
        // (libpq processes them in order, the last value kept).
        const char* const keys[] = {"dbname", "sslmode", nullptr};
        const char* const values[] = {url_->conninfo.c_str(), url_->sslmode.c_str(), nullptr};
        conn_ = PQconnectStartParams(keys, values, 1);
    }
    if (conn_ == nullptr) {
        why = "libpq could not allocate a connection";
        co_return error::never_connected;
    }
    PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
    const auto handshake_deadline = clock::now() + timeout;
    auto poll = PGRES_POLLING_WRITING;
    for (int step = 0; poll != PGRES_POLLING_OK; ++step) {
        if (PQstatus(conn_) == CONNECTION_BAD || poll == PGRES_POLLING_FAILED || step > 10'000) {
            why = scrub(PQerrorMessage(conn_), *url_);
            while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
            const bool auth = why.find("authentication") != std::string::npos;
            if (!url_->sslmode.empty() && why.find("certificate") != std::string::npos)
                why += " (TLS was asked for, so corolock checks the server: sslmode=" +
                       url_->sslmode + "; give the CA with sslrootcert=FILE, see "
                       "docs/security.md)";
            close(error::never_connected);
            co_return auth ? error::auth_failed : error::never_connected;
        }
        reassign_socket();
        const auto type = poll == PGRES_POLLING_READING ? asio::posix::descriptor_base::wait_read
                                                        : asio::posix::descriptor_base::wait_write;
        const bool ready = co_await wait_socket(type, handshake_deadline);
        if (broken_) co_return broken_;
        if (!ready) {
            why = "no connection within " +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                  " ms";
            close(error::connect_timeout);
            co_return error::connect_timeout;
        }
        poll = PQconnectPoll(conn_);
    }
    if (PQsetnonblocking(conn_, 1) != 0) {
        why = "libpq refused non-blocking mode";
        close(error::never_connected);
        co_return error::never_connected;
    }
    pid_ = PQbackendPID(conn_);
    reassign_socket();
    asio::co_spawn(ex_, read_loop(self), asio::detached);  // weak inside
    co_return error_code{};
}

asio::awaitable<bool> connection::wait_socket(asio::posix::descriptor_base::wait_type type,
                                              clock::time_point deadline) {
    // Only this wait is cancelled at the deadline: the read loop's own wait
    // on the same socket goes on. The timer's handler can run after this
    // frame ended (its expiry queued beside the socket's answer), so what
    // it touches is shared, not on the frame.
    struct bound {
        asio::cancellation_signal cancel;
        bool expired = false;
    };
    auto b = std::make_shared<bound>();
    asio::steady_timer limit(ex_, deadline);
    limit.async_wait([b](error_code ec) {
        if (ec) return;
        b->expired = true;
        b->cancel.emit(asio::cancellation_type::terminal);
    });
    co_await socket_.async_wait(type, asio::bind_cancellation_slot(b->cancel.slot(), nothrow));
    co_return !b->expired;
}

asio::awaitable<void> connection::read_loop(std::weak_ptr<connection> weak) {
    // Weak: a connection nobody holds is destroyed, which closes it and
    // ends this wait (operation_aborted) without touching it again.
    for (;;) {
        {
            auto self = weak.lock();
            if (!self || broken_ || conn_ == nullptr) co_return;
        }
        auto [ec] = co_await socket_.async_wait(asio::posix::descriptor_base::wait_read, nothrow);
        auto self = weak.lock();
        if (!self || broken_ || conn_ == nullptr) co_return;
        if (ec && ec != asio::error::interrupted) {
            broke(error::connection_lost);
            break;
        }
        if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD) {
            broke(error::connection_lost);
            break;
        }
        bool notified = false;
        while (PGnotify* n = PQnotifies(conn_)) {
            notified = true;
            PQfreemem(n);
        }
        poke();
        if (notified && on_notify_) {
            auto f = on_notify_;  // it may replace itself
            f();
        }
    }
}

void connection::broke(error_code why) noexcept {
    if (broken_) return;
    close(why);
    if (auto f = std::move(on_lost_)) {
        on_lost_ = nullptr;
        f();
    }
}

void connection::close(error_code why) noexcept {
    if (!broken_) broken_ = why;
    if (socket_.is_open()) (void)socket_.release();
    if (conn_ != nullptr) {
        PQfinish(conn_);
        conn_ = nullptr;
    }
    on_notify_ = nullptr;
    wake_.cancel();
    turn_.cancel();
}

void connection::read_result(PGresult* r, bool describe, bool& first, answer& a) {
    const auto st = PQresultStatus(r);
    if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR) {
        const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (a.sqlstate.empty()) {
            a.sqlstate = code != nullptr ? code : "XX000";
            a.message = scrub(PQresultErrorMessage(r), *url_);
        }
        return;
    }
    if (!first || (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)) return;
    first = false;
    if (describe) {
        a.command_tag = PQcmdStatus(r);
        a.affected = std::strtoull(PQcmdTuples(r), nullptr, 10);
    }
    const int rows = PQntuples(r), cols = PQnfields(r);
    if (describe)
        for (int j = 0; j < cols; ++j) a.columns.emplace_back(PQfname(r, j));
    a.rows.resize(static_cast<std::size_t>(rows));
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) {
            auto& row = a.rows[static_cast<std::size_t>(i)];
            if (PQgetisnull(r, i, j) != 0)
                row.emplace_back(std::nullopt);
            else
                row.emplace_back(std::string(PQgetvalue(r, i, j),
                                             static_cast<std::size_t>(PQgetlength(r, i, j))));
        }
}

asio::awaitable<connection::turn> connection::take_turn() {
    auto self = shared_from_this();
    while (busy_ && !broken_) {
        ++waiting_;
        turn_.expires_at(clock::time_point::max());
        co_await turn_.async_wait(nothrow);
        --waiting_;
    }
    if (broken_ || conn_ == nullptr) co_return turn{};
    busy_ = true;
    co_return turn{std::move(self)};
}

void connection::free_turn() noexcept {
    busy_ = false;
    turn_.cancel();
}

connection::transaction_state connection::transaction() const noexcept {
    if (conn_ == nullptr || broken_) return transaction_state::unknown;
    switch (PQtransactionStatus(conn_)) {
    case PQTRANS_IDLE: return transaction_state::idle;
    case PQTRANS_INTRANS: return transaction_state::open;
    case PQTRANS_INERROR: return transaction_state::failed;
    default: return transaction_state::unknown;
    }
}

asio::awaitable<answer> connection::exec(statement s, clock::time_point deadline) {
    auto held = co_await take_turn();
    if (!held) {
        answer a;
        a.transport = broken_ ? broken_ : error_code(error::not_connected);
        co_return a;
    }
    co_return co_await run(std::move(s), deadline);
}

asio::awaitable<answer> connection::exec(statement s, clock::duration bound) {
    auto held = co_await take_turn();
    co_return co_await exec(held, std::move(s), clock::now() + bound);
}

asio::awaitable<answer> connection::exec(const turn& held, statement s, clock::time_point deadline) {
    if (!held || broken_ || conn_ == nullptr) {
        answer a;
        a.transport = broken_ ? broken_ : error_code(error::not_connected);
        co_return a;
    }
    co_return co_await run(std::move(s), deadline);
}

asio::awaitable<answer> connection::run(statement s, clock::time_point deadline) {
    auto self = shared_from_this();
    answer a;
    std::vector<const char*> values;
    values.reserve(s.params.size());
    for (const auto& p : s.params) values.push_back(p ? p->c_str() : nullptr);
    const std::string sql(s.sql);
    if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, 0) == 0) {
        a.transport = error::connection_lost;
        a.message = scrub(PQerrorMessage(conn_), *url_);
        broke(error::connection_lost);
        co_return a;
    }
    const auto expired = [&] {
        if (clock::now() < deadline) return false;
        a.transport = error::timeout;
        broke(error::timeout);
        return true;
    };
    for (;;) {
        const int f = PQflush(conn_);
        if (f == 0) break;
        if (f < 0) {
            a.transport = error::connection_lost;
            broke(error::connection_lost);
            co_return a;
        }
        co_await wait_socket(asio::posix::descriptor_base::wait_write, deadline);
        if (broken_) {
            a.transport = broken_;
            co_return a;
        }
        if (expired()) co_return a;
    }
    bool first = true;
    for (;;) {
        while (!broken_ && PQisBusy(conn_) != 0) {
            if (expired()) co_return a;
            wake_.expires_at(deadline);
            co_await wake_.async_wait(nothrow);
        }
        if (broken_) {
            a.transport = broken_;
            a.rows.clear();
            co_return a;
        }
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) break;
        const auto st = PQresultStatus(r);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
            // Callers' statements refuse COPY: a session in its
            // sub-protocol cannot run another statement.
            PQclear(r);
            a.transport = error::unexpected_reply;
            broke(error::unexpected_reply);
            co_return a;
        }
        read_result(r, s.describe, first, a);
        PQclear(r);
    }
    if (PQstatus(conn_) == CONNECTION_BAD) {
        a.transport = error::connection_lost;
        broke(error::connection_lost);
    }
    co_return a;
}

}  // namespace corolock::detail::pg
