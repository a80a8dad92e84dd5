// The fuzz targets' own checks (fuzz/<name>_fuzz.cpp, linked into this
// binary without libFuzzer) over every input kept in fuzz/corpus/<name>/:
// the seeds, and each input a fuzzing run found once the bug behind it is
// fixed (scripts/fuzz.sh says to keep it there). So every ctest run, and
// the sanitizer builds' runs, replay them. A failed check aborts this
// process, which fails the test; the last "replaying" line names the input.
#include <catch2/catch.hpp>

#include "targets.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

using entry = int (*)(const std::uint8_t*, std::size_t);

// Replays fuzz/corpus/<name>/ through `target`; at least `at_least` inputs
// (the seeds kept in the repository), so that an empty or missing folder
// cannot pass as a clean replay.
void replay(const char* name, entry target, std::size_t at_least) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(COROLOCK_SOURCE_DIR) / "fuzz" / "corpus" / name;
    REQUIRE(fs::is_directory(dir));
    std::size_t replayed = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        REQUIRE(in.good() | in.eof());
        std::printf("replaying %s/%s (%zu bytes)\n", name, entry.path().filename().c_str(),
                    bytes.size());
        std::fflush(stdout);
        target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        ++replayed;
    }
    CHECK(replayed >= at_least);
}

}  // namespace

TEST_CASE("fuzz: the kept RESP3 inputs pass the resp3 target's checks", "[fuzz]") {
    replay("resp3", corolock_fuzz_resp3, 58);
}

TEST_CASE("fuzz: the kept inputs pass the etcd_codec target's checks", "[fuzz]") {
    replay("etcd_codec", corolock_fuzz_etcd_codec, 10);
}

TEST_CASE("fuzz: the kept inputs pass the holder_record target's checks", "[fuzz]") {
    replay("holder_record", corolock_fuzz_holder_record, 8);
}

TEST_CASE("fuzz: the kept inputs pass the redis_url target's checks", "[fuzz]") {
    replay("redis_url", corolock_fuzz_redis_url, 15);
}

TEST_CASE("fuzz: the kept inputs pass the etcd_url target's checks", "[fuzz]") {
    replay("etcd_url", corolock_fuzz_etcd_url, 10);
}

TEST_CASE("fuzz: the kept inputs pass the redlock_url target's checks", "[fuzz]") {
    replay("redlock_url", corolock_fuzz_redlock_url, 8);
}

TEST_CASE("fuzz: the kept inputs pass the credentials target's checks", "[fuzz]") {
    replay("credentials", corolock_fuzz_credentials, 6);
}

TEST_CASE("fuzz: the kept inputs pass the glob target's checks", "[fuzz]") {
    replay("glob", corolock_fuzz_glob, 10);
}

TEST_CASE("fuzz: the kept inputs pass the etcd_lock_key target's checks", "[fuzz]") {
    replay("etcd_lock_key", corolock_fuzz_etcd_lock_key, 6);
}

TEST_CASE("fuzz: the kept inputs pass the sentinel target's checks", "[fuzz]") {
    replay("sentinel", corolock_fuzz_sentinel, 6);
}

#ifdef COROLOCK_HAVE_ZOOKEEPER
TEST_CASE("fuzz: the kept inputs pass the zk_url target's checks", "[fuzz]") {
    replay("zk_url", corolock_fuzz_zk_url, 8);
}

TEST_CASE("fuzz: the kept inputs pass the zk_names target's checks", "[fuzz]") {
    replay("zk_names", corolock_fuzz_zk_names, 8);
}
#endif

#ifdef COROLOCK_HAVE_POSTGRESQL
TEST_CASE("fuzz: the kept inputs pass the pg_url target's checks", "[fuzz]") {
    replay("pg_url", corolock_fuzz_pg_url, 8);
}
#endif
