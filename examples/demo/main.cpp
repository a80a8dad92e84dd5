// corolock_demo: many sellers, one SKU, one lock, one frozen holder.
//
// Usage:
//   corolock_demo [orchestrate] [URL] [options]   run the scenario (the default)
//   corolock_demo worker [options]                one worker (started by the orchestrator)
//
// URL defaults to $REDIS_URL, then redis://127.0.0.1:6379. scripts/demo.sh
// starts a throwaway server and runs this for you. Options:
//   --workers N          worker processes (3)
//   --tasks N            coroutines per worker, each with its own lock handle (16)
//   --stock N            units on sale (200)
//   --lease-ms N         the sellers' lease; the watchdog renews it (5000)
//   --victim-lease-ms N  the frozen worker's lease (1000)
//   --pause-ms N         how long that worker is frozen (2500)
//   --sku NAME           the product; the lock is "stock:NAME" (sku-42)
//   --no-lock            sell without the lock, to see the overselling it prevents
#include "orchestrator.hpp"
#include "worker.hpp"

#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

namespace {

int usage(const std::string& why) {
    if (!why.empty()) std::cerr << "corolock_demo: " << why << "\n";
    std::cerr << "usage: corolock_demo [orchestrate] [redis://host:port] [--workers N] [--tasks N]\n"
                 "         [--stock N] [--lease-ms N] [--victim-lease-ms N] [--pause-ms N]\n"
                 "         [--sku NAME] [--no-lock]\n";
    return 64;
}

}  // namespace

int main(int argc, char** argv) {
    demo::scenario sc;
    demo::worker_options wo;
    bool worker_mode = false;
    std::string url;
    int i = 1;
    if (i < argc && std::string_view(argv[i]) == "worker") {
        worker_mode = true;
        ++i;
    } else if (i < argc && std::string_view(argv[i]) == "orchestrate") {
        ++i;
    }
    // Bounded by argc: every pass consumes one or two arguments.
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> std::string_view { return i + 1 < argc ? argv[++i] : ""; };
        auto number = [&](int& out) {
            const auto v = demo::parse_int(value());
            if (!v || *v < 0 || *v > 1'000'000) return false;
            out = static_cast<int>(*v);
            return true;
        };
        int n = 0;
        if (a == "--workers") {
            if (!number(sc.workers)) return usage("--workers needs a number");
        } else if (a == "--tasks") {
            if (!number(sc.tasks)) return usage("--tasks needs a number");
        } else if (a == "--stock") {
            if (!number(sc.stock)) return usage("--stock needs a number");
        } else if (a == "--lease-ms") {
            if (!number(n)) return usage("--lease-ms needs a number");
            sc.lease = demo::milliseconds(n);
        } else if (a == "--victim-lease-ms") {
            if (!number(n)) return usage("--victim-lease-ms needs a number");
            sc.victim_lease = demo::milliseconds(n);
        } else if (a == "--pause-ms") {
            if (!number(n)) return usage("--pause-ms needs a number");
            sc.pause = demo::milliseconds(n);
        } else if (a == "--sku") {
            sc.sku = std::string(value());
        } else if (a == "--no-lock") {
            sc.use_lock = false;
        } else if (a == "--id" && worker_mode) {
            if (!number(wo.id)) return usage("--id needs a number");
        } else if (a == "--deadline-ms" && worker_mode) {
            if (!number(n)) return usage("--deadline-ms needs a number");
            wo.deadline = demo::milliseconds(n);
        } else if (a == "--victim" && worker_mode) {
            wo.victim = true;
        } else if (a == "-h" || a == "--help") {
            return usage("");
        } else if (!a.empty() && a.front() != '-' && url.empty() && !worker_mode) {
            url = std::string(a);
        } else {
            return usage("unknown argument '" + std::string(a) + "'");
        }
    }
    if (auto why = sc.check(); !why.empty()) return usage(why);

    if (worker_mode) {
        // The orchestrator passes the URL in the environment (it may hold a password).
        const char* env = std::getenv("COROLOCK_DEMO_WORKER_URL");
        if (env == nullptr || *env == '\0') return usage("worker: COROLOCK_DEMO_WORKER_URL is not set");
        sc.url = env;
        wo.sc = sc;
        return demo::run_worker(wo);
    }
    if (url.empty()) {
        const char* env = std::getenv("REDIS_URL");
        url = env != nullptr && *env != '\0' ? env : "redis://127.0.0.1:6379";
    }
    sc.url = url;
    return demo::run_orchestrator(sc);
}
