// What in a lock service's URL is a credential, for every scheme: the one
// home of the rule that keeps secrets out of messages, logs and the
// environment of a command corolock runs (docs/security.md). Not installed.
#pragma once

#include "core/url_text.hpp"  // percent_decode, percent_encode

#include <string_view>

namespace corolock::detail {

// A query key (%-decoded, as the URL's parser reads it) whose value is a
// credential, or names whose credential it is: PostgreSQL's `password` and
// `sslpassword` (the client key's passphrase), Sentinel's `sentinel_user`
// and `sentinel_password`. The user-info part (user:password@) is one too.
inline bool is_credential_query_key(std::string_view key) noexcept {
    return key == "password" || key == "sslpassword" || key == "sentinel_user" ||
           key == "sentinel_password";
}

}  // namespace corolock::detail
