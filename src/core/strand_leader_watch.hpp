// The part of a leader_watch (core/election_service.hpp) that is the same on
// every backend: one wait at a time with its cap and its cancellation, an
// announcement kept until a wait takes it, close() and a stop on the
// backend's strand. A backend's watch derives from it, subscribes in its own
// way (a Redis channel, an etcd watch stream, ZooKeeper watches, a
// PostgreSQL LISTEN) and calls announce() for each change it hears, or
// end() when its backend stopped.
#pragma once

#include "core/election_service.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>

namespace corolock::detail {

class strand_leader_watch : public leader_watch,
                            public std::enable_shared_from_this<strand_leader_watch> {
public:
    // `strand`: where every member runs; `completion`: the executor a
    // waiter's handler completes on when it has none of its own.
    strand_leader_watch(boost::asio::any_io_executor strand,
                        boost::asio::any_io_executor completion);

    void wait(clock::duration cap, done_handler h) final;
    // Posts the end to the strand; if the post is dropped unrun (its
    // io_context destroyed), abandon() runs instead.
    void close() noexcept final;

protected:
    // --- strand only ---
    // A change to report: the pending wait completes, or the next one does
    // at once.
    void announce();
    // The backend stopped: the wait completes with client_stopped, and
    // every later one too.
    void end();
    bool closed() const noexcept { return closed_; }
    // Whether this watch should do nothing more: closed, or its backend
    // stopped (then ended here, once).
    bool over() {
        if (closed_) return true;
        if (!backend_stopped()) return false;
        end();
        return true;
    }
    const boost::asio::any_io_executor& strand() const noexcept { return strand_; }

    // This watch's own type, for the callbacks it hands out.
    template <class Self>
    std::weak_ptr<Self> weak_self(Self* self) {
        return std::static_pointer_cast<Self>(self->shared_from_this());
    }

private:
    // Whether the backend stopped, so that no wait waits forever.
    virtual bool backend_stopped() const noexcept = 0;
    // Called on the strand as close() runs, after the pending wait
    // completed with operation_aborted: end the subscription.
    virtual void on_close() noexcept {}
    // Called on the strand as a wait takes an announcement, before it
    // completes (a subscription that must be re-armed for the next one).
    virtual void on_taken() {}

    void finish(error_code ec);

    boost::asio::any_io_executor strand_;
    boost::asio::any_io_executor completion_;
    boost::asio::steady_timer timer_;
    done_handler handler_;
    bool pending_ = false;
    bool closed_ = false;
};

}  // namespace corolock::detail
