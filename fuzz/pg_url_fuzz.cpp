// Fuzz target for the PostgreSQL URL's credentials (pg/protocol.hpp):
//  - split_url never throws; it accepts exactly the postgresql:// and
//    postgres:// URLs without whitespace or control bytes, and hands libpq
//    the URL spelled postgresql://;
//  - agreement with libpq: every password and sslpassword libpq's own
//    parser (PQconninfoParse, no connection) reads from that URL is among
//    the secrets split_url recorded;
//  - scrub() of a message made of the input and every secret (recorded or
//    libpq's) leaves none of them in it (a secret holding '*' excepted:
//    the "***" that replaces another may spell it anew);
//  - libpq's complaint about a malformed URL, scrubbed, never holds the
//    password (a marker put in its place, see url_secrets.hpp; the user
//    name and other values libpq may quote).
#include "fuzz_check.hpp"
#include "targets.hpp"
#include "url_secrets.hpp"

#include "pg/protocol.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

namespace pg = corolock::detail::pg;

// libpq's reading of the URL: its credentials, or its complaint.
struct libpq_reading {
    bool ok = false;
    std::vector<std::string> credentials;
    std::string complaint;
};

libpq_reading read_with_libpq(const std::string& conninfo) {
    libpq_reading out;
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
    if (opts == nullptr) {
        out.complaint = err != nullptr ? err : "";
        if (err != nullptr) PQfreemem(err);
        return out;
    }
    out.ok = true;
    for (auto* o = opts; o->keyword != nullptr; ++o) {
        const std::string_view key = o->keyword;
        if ((key == "password" || key == "sslpassword") && o->val != nullptr && *o->val != '\0')
            out.credentials.emplace_back(o->val);
    }
    PQconninfoFree(opts);
    return out;
}

}  // namespace

int corolock_fuzz_pg_url(const std::uint8_t* data, std::size_t size) {
    const std::string_view url(reinterpret_cast<const char*>(data), size);
    pg::url_parts parts;
    std::string why;
    const auto ec = pg::split_url(url, parts, why);
    const auto scheme_end = url.find("://");
    std::string scheme(url.substr(0, scheme_end == std::string_view::npos ? 0 : scheme_end));
    for (char& c : scheme) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    const bool control = std::any_of(url.begin(), url.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
    });
    const bool acceptable =
        scheme_end != std::string_view::npos && (scheme == "postgresql" || scheme == "postgres") &&
        !control;
    FUZZ_REQUIRE(ec.failed() != acceptable);
    if (ec) {
        FUZZ_REQUIRE(!why.empty());
        return 0;
    }
    FUZZ_REQUIRE(parts.conninfo == "postgresql" + std::string(url.substr(scheme_end)));
    for (const auto& s : parts.secrets) FUZZ_REQUIRE(!s.empty());

    const auto libpq = read_with_libpq(parts.conninfo);
    for (const auto& c : libpq.credentials)
        FUZZ_REQUIRE(std::find(parts.secrets.begin(), parts.secrets.end(), c) != parts.secrets.end());

    std::vector<std::string> secrets = parts.secrets;
    secrets.insert(secrets.end(), libpq.credentials.begin(), libpq.credentials.end());
    std::string message = "connection failed: " + std::string(url);
    for (const auto& s : secrets) message += " (" + s + ")" + s;
    const std::string scrubbed = pg::scrub(message, parts);
    for (const auto& s : secrets)
        if (s.find('*') == std::string::npos)
            FUZZ_REQUIRE(scrubbed.find(s) == std::string::npos);

    const auto planted = corolock::fuzz::plant_secrets(url);
    if (planted.planted) {
        pg::url_parts p;
        std::string why2;
        if (!pg::split_url(planted.url, p, why2)) {
            const auto reading = read_with_libpq(p.conninfo);
            if (!reading.ok)
                FUZZ_REQUIRE(!corolock::fuzz::contains(pg::scrub(reading.complaint, p),
                                                       corolock::fuzz::password_mark));
        }
    }
    return 0;
}
