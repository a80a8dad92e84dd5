// The fuzz targets' entries: each checks one input against its parser's
// properties and aborts (a crash, for libFuzzer) when one fails. One file
// per target (fuzz/<name>_fuzz.cpp); libfuzzer_main.cpp makes a libFuzzer
// binary of one, and test/unit/fuzz_replay_test.cpp replays every corpus
// folder (fuzz/corpus/<name>/) through them in the unit tier.
#pragma once

#include <cstddef>
#include <cstdint>

int corolock_fuzz_resp3(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_etcd_codec(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_holder_record(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_redis_url(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_etcd_url(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_zk_url(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_pg_url(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_redlock_url(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_credentials(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_glob(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_etcd_lock_key(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_zk_names(const std::uint8_t* data, std::size_t size);
int corolock_fuzz_sentinel(const std::uint8_t* data, std::size_t size);
