#include "zk/session.hpp"

#include "core/logging.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

namespace corolock::detail::zk {

namespace asio = boost::asio;

namespace {

// Whether the ensemble answered: success or an error a server sends about
// the request itself. Local failures and "your session is gone" are not.
bool answered(int rc) noexcept {
    return rc == ZOK ||
           (rc <= ZAPIERROR && rc != ZSESSIONEXPIRED && rc != ZCLOSING && rc != ZSESSIONMOVED);
}

node_stat stat_of(const Stat* s) noexcept {
    if (s == nullptr) return {};
    return {s->czxid, s->mzxid, s->pzxid, s->numChildren, s->version};
}

void log_line(const char* message) {
    default_logger()->debug("zookeeper client: {}", escaped{message ? message : ""});
}

// The sessions of one execution context that may still be open. The C
// client keeps every request's completion, and a completion owns what
// waits for it (a backend, an acquire's coroutine), which owns the
// session: a cycle that only closing the handle breaks. stop() closes it on
// the strand; a context destroyed before that step ran (a backend stopped
// just before its io_context, one never stopped) would otherwise leak the
// session, the backend and the C client's handle. A context shuts its
// services down newest first, before it destroys the handlers still queued:
// this one, made after the strand's and the reactor's services, closes every
// open session while they still accept what the completions post and
// cancel, and those are then destroyed with the rest.
class open_sessions final : public asio::execution_context::service {
public:
    static asio::execution_context::id id;

    explicit open_sessions(asio::execution_context& ctx) : service(ctx) {}

    void add(const std::shared_ptr<session>& s) {
        std::lock_guard lock(mutex_);
        std::erase_if(sessions_, [](const std::weak_ptr<session>& w) { return w.expired(); });
        sessions_.push_back(s);
    }

private:
    // No thread runs the context any more: its strands are idle, so calling
    // a session from here is as if from its strand.
    void shutdown() override {
        std::vector<std::weak_ptr<session>> all;
        {
            std::lock_guard lock(mutex_);
            all.swap(sessions_);
        }
        for (auto& w : all)
            if (auto s = w.lock()) s->stop();  // `s` keeps it alive through its completions
    }

    std::mutex mutex_;
    std::vector<std::weak_ptr<session>> sessions_;
};

asio::execution_context::id open_sessions::id;

}  // namespace

bool unanswered(int rc) noexcept {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED;
}

error_code error_of(int rc) {
    switch (rc) {
        case ZOK: return {};
        case ZCONNECTIONLOSS:
        case ZOPERATIONTIMEOUT:
        case ZSESSIONMOVED: return error::connection_lost;
        case ZSESSIONEXPIRED: return error::lock_lost;
        case ZCLOSING:
        case ZINVALIDSTATE: return error::client_stopped;
        case ZNOAUTH: return error::no_permission;
        default: return error::server_error;
    }
}

// One request out: the C client hands its address back to the completion.
// The library calls every completion exactly once, with ZCLOSING when the
// handle is closed first, so the ticket never outlives the session.
struct session::pending {
    session* owner = nullptr;
    std::uint64_t generation = 0;
    clock::time_point sent{};
    create_handler on_create;
    stat_handler on_stat;
    children_handler on_children;
    void_handler on_void;
    std::uint64_t watch_id = 0;
    // create_child's: where the library writes the multi's results.
    struct multi_out {
        zoo_op_result_t results[2]{};
        std::vector<char> path;  // sized for the path asked for
        Stat dir{};
    };
    std::unique_ptr<multi_out> multi;  // also checked_set's (no path; dir: the set's Stat)

    // Takes the ticket back from the library and tells the clock.
    static std::unique_ptr<pending> claim(const void* data, int rc) {
        std::unique_ptr<pending> p(static_cast<pending*>(const_cast<void*>(data)));
        auto* s = p->owner;
        if (answered(rc) && p->generation == s->generation_) s->clock_.on_answered(p->sent);
        if (p->watch_id != 0 && rc != ZOK) s->watches_.erase(p->watch_id);  // no watch was set
        return p;
    }
};

session::session(strand_type strand, zk_options opts, spdlog::logger& log, listener l)
    : strand_(strand),
      opts_(std::move(opts)),
      log_(log),
      listener_(std::move(l)),
      socket_(strand_),
      interest_timer_(strand_),
      heartbeat_timer_(strand_) {}

session::~session() { stop(); }

void session::start() {
    asio::use_service<open_sessions>(asio::query(strand_, asio::execution::context))
        .add(shared_from_this());
    open();
}

void session::open() {
    ++generation_;
    const int timeout_ms = static_cast<int>(opts_.session_timeout.count());
    zh_ = zookeeper_init2(opts_.hosts.c_str(), &session::on_watch, timeout_ms, nullptr, this,
                          ZOO_NO_LOG_CLIENTENV, &log_line);
    if (zh_ != nullptr && opts_.authenticated()) {
        // The C client keeps the credentials and sends them again on every
        // connection of the session. Digest authentication itself never
        // fails: a wrong password is another identity, refused (ZNOAUTH,
        // error::no_permission) by the nodes the right one created.
        const std::string credentials = opts_.user + ":" + opts_.password;
        const int rc = zoo_add_auth(zh_, "digest", credentials.data(),
                                    static_cast<int>(credentials.size()), nullptr, nullptr);
        if (rc != ZOK)
            log_.warn("zookeeper: could not add the digest credentials: {}", zerror(rc));
    }
    if (zh_ == nullptr) {
        // Out of memory, or hosts the client could not parse (the URL
        // parser checked them): try again shortly.
        log_.warn("zookeeper: could not create a session for {}", escaped{opts_.hosts});
        interest_timer_.expires_after(reopen_.next());
        interest_timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec && !self->stopped_ && !self->zh_) self->open();
        });
        return;
    }
    reopen_.reset();
    drive();
}

void session::stop() noexcept {
    if (stopped_) return;
    stopped_ = true;
    interest_timer_.cancel();
    heartbeat_timer_.cancel();
    release_socket();
    if (in_process_) return;  // process() closes the handle when the library returns
    close_handle();
}

void session::close_handle() noexcept {
    auto* zh = std::exchange(zh_, nullptr);
    if (zh == nullptr) return;
    // A connected handle sends the close and waits (at most 1.5 s, one
    // commit on a healthy ensemble) for the ensemble to end the session,
    // which deletes its ephemeral nodes at once. Completions still out run
    // here with ZCLOSING.
    in_process_ = true;
    zookeeper_close(zh);
    in_process_ = false;
    clock_.on_expired();
    auto watches = std::move(watches_);
    watches_.clear();
    for (auto& [id, w] : watches) w();
}

void session::schedule_drive() noexcept {
    if (drive_posted_ || in_process_ || stopped_) return;
    drive_posted_ = true;
    try {
        asio::post(strand_, [self = shared_from_this()] { self->drive(); });
    } catch (...) {
        drive_posted_ = false;
    }
}

void session::drive() noexcept {
    drive_posted_ = false;
    if (stopped_ || zh_ == nullptr) return;
    int fd = -1, interest = 0;
    struct timeval tv {};
    const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    if (rc == ZINVALIDSTATE || is_unrecoverable(zh_)) {
        replace_expired();
        return;
    }
    auto wait = std::chrono::duration_cast<clock::duration>(std::chrono::seconds(tv.tv_sec) +
                                                           std::chrono::microseconds(tv.tv_usec));
    // The library dropped its socket: it connects again on the next call.
    // Never spin.
    if (rc != ZOK) wait = std::max<clock::duration>(wait, std::chrono::milliseconds(10));
    interest_timer_.expires_after(wait);
    interest_timer_.async_wait([self = shared_from_this()](error_code ec) {
        if (ec != asio::error::operation_aborted) self->process(0);
    });
    try {
        // An error closes the library's socket but still reports its number.
        watch_socket(rc == ZOK ? fd : -1, interest);
    } catch (const std::exception& e) {
        // The timer above calls the library again.
        log_.warn("zookeeper: cannot watch the session's socket: {}", escaped{e.what()});
        release_socket();
    }
}

void session::process(int events) noexcept {
    if (stopped_ || zh_ == nullptr) return;
    in_process_ = true;
    zookeeper_process(zh_, events);
    in_process_ = false;
    if (stopped_) {
        close_handle();
        return;
    }
    if (expired_ || is_unrecoverable(zh_)) {
        replace_expired();
        return;
    }
    drive();
}

void session::watch_socket(int fd, int interest) {
    if (fd < 0) {
        release_socket();
        return;
    }
    struct stat sb {};
    if (::fstat(fd, &sb) != 0) {  // closed already: nothing to watch
        release_socket();
        return;
    }
    const auto inode = static_cast<unsigned long>(sb.st_ino);
    if (fd != fd_ || inode != fd_inode_ || !socket_.is_open()) {
        release_socket();
        // A copy of the library's socket, ours to register and close: the
        // library may close its own at any call, and its number may be
        // reused at once by another socket of this process. Both are
        // close-on-exec, so that a child that execs cannot keep the session
        // (and its locks) alive: the copy from its creation, the library's
        // own (unless the C client was built with SOCK_CLOEXEC) as soon as
        // it is seen, right after the C client opened it.
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC)) (void)::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        const int mine = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (mine < 0) throw std::system_error(errno, std::system_category(), "fcntl F_DUPFD_CLOEXEC");
        socket_.assign(mine);
        fd_ = fd;
        fd_inode_ = inode;
    }
    const auto epoch = socket_epoch_;
    if ((interest & ZOOKEEPER_READ) && !read_waiting_) {
        read_waiting_ = true;
        socket_.async_wait(asio::posix::stream_descriptor::wait_read,
                           [self = shared_from_this(), epoch](error_code ec) {
                               if (epoch != self->socket_epoch_) return;
                               self->read_waiting_ = false;
                               if (ec != asio::error::operation_aborted)
                                   self->process(ZOOKEEPER_READ);
                           });
    }
    if ((interest & ZOOKEEPER_WRITE) && !write_waiting_) {
        write_waiting_ = true;
        socket_.async_wait(asio::posix::stream_descriptor::wait_write,
                           [self = shared_from_this(), epoch](error_code ec) {
                               if (epoch != self->socket_epoch_) return;
                               self->write_waiting_ = false;
                               if (ec != asio::error::operation_aborted)
                                   self->process(ZOOKEEPER_WRITE);
                           });
    }
}

void session::release_socket() noexcept {
    ++socket_epoch_;
    read_waiting_ = write_waiting_ = false;
    fd_ = -1;
    fd_inode_ = 0;
    error_code ignored;
    if (socket_.is_open()) socket_.close(ignored);
}

void session::on_watch(_zhandle* zh, int type, int state, const char*, void* ctx) {
    auto* self = static_cast<session*>(const_cast<void*>(zoo_get_context(zh)));
    if (self == nullptr) return;
    if (ctx == self) {
        // The default watcher: session events only.
        if (type == ZOO_SESSION_EVENT) self->on_session_event(state);
        return;
    }
    const auto id = reinterpret_cast<std::uintptr_t>(ctx);
    // A node watch is told of session events too; only an expiry ends it.
    if (type == ZOO_SESSION_EVENT && state != ZOO_EXPIRED_SESSION_STATE) return;
    auto it = self->watches_.find(id);
    if (it == self->watches_.end()) return;
    auto w = std::move(it->second);
    self->watches_.erase(it);
    w();
}

void session::on_session_event(int state) {
    if (state == ZOO_CONNECTED_STATE) {
        const auto* id = zoo_client_id(zh_);
        clock_.on_connected(id ? id->client_id : 0,
                            std::chrono::milliseconds(zoo_recv_timeout(zh_)));
        log_.info("zookeeper: session {:#x} connected, timeout {} ms", clock_.session_id(),
                  std::chrono::duration_cast<std::chrono::milliseconds>(clock_.timeout()).count());
        heartbeat();
        listener_(event::connected);
    } else if (state == ZOO_CONNECTING_STATE) {
        if (!clock_.connected()) return;
        clock_.on_disconnected();
        log_.info("zookeeper: session {:#x} suspended (connection lost)", clock_.session_id());
        listener_(event::suspended);
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        expired_ = true;  // replaced once the library returns
    }
}

void session::replace_expired() {
    expired_ = false;
    log_.warn("zookeeper: session {:#x} expired; starting a new one", clock_.session_id());
    heartbeat_timer_.cancel();
    heartbeat_out_ = false;
    interest_timer_.cancel();
    release_socket();
    close_handle();
    listener_(event::expired);
    if (!stopped_) open();
}

void session::heartbeat() {
    if (stopped_ || zh_ == nullptr || !clock_.connected()) return;
    if (!heartbeat_out_) {
        heartbeat_out_ = true;
        auto* p = new pending;
        p->owner = this;
        p->generation = generation_;
        p->sent = clock::now();
        const auto gen = generation_;
        p->on_stat = [this, gen](int, node_stat) {
            if (gen == generation_) heartbeat_out_ = false;
        };
        const int rc = zoo_aexists(zh_, "/", 0, [](int rc, const Stat* s, const void* data) {
            auto p = pending::claim(data, rc);
            p->on_stat(rc, stat_of(s));
        }, p);
        if (rc != ZOK) {
            delete p;
            heartbeat_out_ = false;
        }
        schedule_drive();
    }
    heartbeat_timer_.expires_after(clock_.heartbeat_interval());
    heartbeat_timer_.async_wait([self = shared_from_this()](error_code ec) {
        if (!ec) self->heartbeat();
    });
}

// ---- requests ----

// Submits one request: `call(ticket)` returns the library's rc. A request
// refused at once completes on the strand with that rc, never inline.
template <class Handler, class Call>
void session::submit(Handler h, Call call) {
    auto fail = [&](int rc) {
        asio::post(strand_, [h = std::move(h), rc]() mutable { fail_with(h, rc); });
    };
    if (stopped_ || zh_ == nullptr) return fail(ZCLOSING);
    auto p = std::make_unique<pending>();
    p->owner = this;
    p->generation = generation_;
    p->sent = clock::now();
    assign(*p, h);
    const int rc = call(*p);
    if (rc != ZOK) {
        if (p->watch_id != 0) watches_.erase(p->watch_id);
        return fail(rc);
    }
    p.release();  // the library's until the completion
    schedule_drive();
}

void session::assign(pending& p, create_handler& h) { p.on_create = std::move(h); }
void session::assign(pending& p, stat_handler& h) { p.on_stat = std::move(h); }
void session::assign(pending& p, children_handler& h) { p.on_children = std::move(h); }
void session::assign(pending& p, void_handler& h) { p.on_void = std::move(h); }
void session::fail_with(create_handler& h, int rc) { h(rc, {}, {}); }
void session::fail_with(stat_handler& h, int rc) { h(rc, {}); }
void session::fail_with(children_handler& h, int rc) { h(rc, {}, {}); }
void session::fail_with(void_handler& h, int rc) { h(rc); }

namespace {

// The ACL of every node an authenticated session creates: all permissions
// to the identities the session authenticated as (ZooKeeper's "auth"
// scheme, i.e. creator-all), READ to anyone, so that others may watch and
// list a lock but never create or delete a node in its directory, nor
// change or delete a holder's node.
ACL_vector* creator_all_world_read() {
    static ACL entries[] = {{ZOO_PERM_ALL, ZOO_AUTH_IDS}, {ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
    static ACL_vector acl{2, entries};
    return &acl;
}

}  // namespace

void session::create(const std::string& path, const std::string& data, int flags,
                     create_handler h) {
    ++requests_.create;
    ACL_vector* acl = opts_.authenticated() ? creator_all_world_read() : &ZOO_OPEN_ACL_UNSAFE;
    submit(std::move(h), [&](pending& p) {
        return zoo_acreate2(
            zh_, path.c_str(), data.data(), static_cast<int>(data.size()), acl,
            flags,
            [](int rc, const char* created, const Stat* s, const void* d) {
                auto p = pending::claim(d, rc);
                p->on_create(rc, rc == ZOK && created ? std::string(created) : std::string{},
                             stat_of(s));
            },
            &p);
    });
}

void session::create_child(const std::string& dir, const std::string& name,
                           const std::string& data, create_handler h) {
    ++requests_.create_child;
    ACL_vector* acl = opts_.authenticated() ? creator_all_world_read() : &ZOO_OPEN_ACL_UNSAFE;
    const auto path = dir + "/" + name;
    submit(std::move(h), [&](pending& p) {
        p.multi = std::make_unique<pending::multi_out>();
        auto& out = *p.multi;
        out.path.resize(path.size() + 16);  // room for the sequence's 10 digits and the NUL
        zoo_op_t ops[2];
        zoo_create_op_init(&ops[0], path.c_str(), data.data(), static_cast<int>(data.size()), acl,
                           ZOO_EPHEMERAL | ZOO_SEQUENCE, out.path.data(),
                           static_cast<int>(out.path.size()));
        zoo_set_op_init(&ops[1], dir.c_str(), "", 0, -1, &out.dir);
        return zoo_amulti(
            zh_, 2, ops, out.results,
            [](int rc, const void* d) {
                auto p = pending::claim(d, rc);
                const auto& out = *p->multi;
                p->on_create(rc, rc == ZOK ? std::string(out.path.data()) : std::string{},
                             rc == ZOK ? stat_of(&out.dir) : node_stat{});
            },
            &p);
    });
}

void session::remove(const std::string& path, void_handler h) {
    ++requests_.remove;
    submit(std::move(h), [&](pending& p) {
        return zoo_adelete(
            zh_, path.c_str(), -1,
            [](int rc, const void* d) { pending::claim(d, rc)->on_void(rc); }, &p);
    });
}

void session::set_data(const std::string& path, const std::string& data, stat_handler h,
                       std::int32_t version) {
    ++requests_.set_data;
    submit(std::move(h), [&](pending& p) {
        return zoo_aset(
            zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version,
            [](int rc, const Stat* s, const void* d) {
                pending::claim(d, rc)->on_stat(rc, stat_of(s));
            },
            &p);
    });
}

void session::checked_set(const std::string& checked, std::int32_t version,
                          const std::string& path, const std::string& data, void_handler h) {
    ++requests_.set_data;
    submit(std::move(h), [&](pending& p) {
        p.multi = std::make_unique<pending::multi_out>();
        auto& out = *p.multi;
        zoo_op_t ops[2];
        zoo_check_op_init(&ops[0], checked.c_str(), version);
        zoo_set_op_init(&ops[1], path.c_str(), data.data(), static_cast<int>(data.size()), -1,
                        &out.dir);
        return zoo_amulti(
            zh_, 2, ops, out.results,
            [](int rc, const void* d) { pending::claim(d, rc)->on_void(rc); }, &p);
    });
}

void session::watch_children(const std::string& path, children_handler h, watch_handler w) {
    ++requests_.children;
    submit(std::move(h), [&](pending& p) {
        const auto id = next_id_++;
        watches_.emplace(id, std::move(w));
        p.watch_id = id;
        return zoo_awget_children2(
            zh_, path.c_str(), &session::on_watch, reinterpret_cast<void*>(id),
            [](int rc, const String_vector* names, const Stat* s, const void* d) {
                auto p = pending::claim(d, rc);
                std::vector<std::string> out;
                if (rc == ZOK && names != nullptr)
                    for (std::int32_t i = 0; i < names->count; ++i) out.emplace_back(names->data[i]);
                p->on_children(rc, std::move(out), stat_of(s));
            },
            &p);
    });
}

void session::children(const std::string& path, children_handler h) {
    ++requests_.children;
    submit(std::move(h), [&](pending& p) {
        return zoo_aget_children2(
            zh_, path.c_str(), 0,
            [](int rc, const String_vector* names, const Stat* s, const void* d) {
                auto p = pending::claim(d, rc);
                std::vector<std::string> out;
                if (rc == ZOK && names != nullptr)
                    for (std::int32_t i = 0; i < names->count; ++i) out.emplace_back(names->data[i]);
                p->on_children(rc, std::move(out), stat_of(s));
            },
            &p);
    });
}

void session::watch_data(const std::string& path, stat_handler h, watch_handler w) {
    ++requests_.get_data;
    submit(std::move(h), [&](pending& p) {
        const auto id = next_id_++;
        watches_.emplace(id, std::move(w));
        p.watch_id = id;
        return zoo_awget(
            zh_, path.c_str(), &session::on_watch, reinterpret_cast<void*>(id),
            [](int rc, const char*, int, const Stat* s, const void* d) {
                pending::claim(d, rc)->on_stat(rc, stat_of(s));
            },
            &p);
    });
}

void session::get_data(const std::string& path, data_handler h) {
    ++requests_.get_data;
    submit(std::move(h), [&](pending& p) {
        return zoo_aget(
            zh_, path.c_str(), 0,
            [](int rc, const char* value, int length, const Stat* s, const void* d) {
                std::string data;
                if (rc == ZOK && value != nullptr && length > 0)
                    data.assign(value, static_cast<std::size_t>(length));
                pending::claim(d, rc)->on_create(rc, std::move(data), stat_of(s));
            },
            &p);
    });
}

}  // namespace corolock::detail::zk
