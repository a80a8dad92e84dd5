// A parsed RESP3 reply, owning its data.
#pragma once

#include <corolock/export.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace corolock {

enum class resp3_type : std::uint8_t {
    simple_string,    // +OK
    simple_error,     // -ERR ...
    blob_error,       // !<len>
    integer,          // :<n>
    bulk_string,      // $<len>   ($-1 is read as null)
    null,             // _        (also $-1 and *-1)
    array,            // *<n>
    map,              // %<n>     elements hold key, value, key, value, ...
    set,              // ~<n>
    push,             // ><n>
    boolean,          // #t / #f
    double_type,      // ,<float> including inf, -inf, nan
    big_number,       // (<digits>
    verbatim_string,  // =<len>   str holds the text after "xxx:"; format holds "xxx"
};

struct reply {
    resp3_type type = resp3_type::null;
    std::string str;                 // strings, errors, big numbers, double text
    std::int64_t integer = 0;        // integer; boolean as 0/1
    double number = 0.0;             // double_type
    std::string format;              // verbatim_string format, e.g. "txt"
    std::vector<reply> elements;     // aggregates (map: k, v, k, v, ...)
    std::vector<reply> attributes;   // RESP3 attribute (|) that preceded this reply, k, v, ...

    bool is_error() const noexcept {
        return type == resp3_type::simple_error || type == resp3_type::blob_error;
    }
    bool is_null() const noexcept { return type == resp3_type::null; }
    bool is_aggregate() const noexcept {
        return type == resp3_type::array || type == resp3_type::map ||
               type == resp3_type::set || type == resp3_type::push;
    }
    bool is_string() const noexcept {
        return type == resp3_type::simple_string || type == resp3_type::bulk_string ||
               type == resp3_type::verbatim_string;
    }
};

// Human-readable rendering for logs and diagnostics (not a RESP encoding).
COROLOCK_API std::string to_string(const reply& r);

}  // namespace corolock
