#include <corolock/command.hpp>

#include "redis/resp/resp_writer.hpp"

#include <charconv>

namespace corolock {

namespace resp_writer = detail::resp_writer;

// A guess at a typical short argument (a key, a token, a number) plus its
// "$<len>\r\n...\r\n" framing; body_ grows as needed beyond it.
void command::reserve(std::size_t argc) { body_.reserve(argc * 24); }

command& command::arg(std::string_view a) {
    resp_writer::append_bulk(body_, a);
    ++argc_;
    return *this;
}

command& command::arg(std::int64_t n) {
    char digits[resp_writer::max_decimal];
    const char* end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    return arg(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

void command::append_to(std::string& out) const {
    out.reserve(out.size() + body_.size() + resp_writer::array_header_bound);
    resp_writer::append_array_header(out, argc_);
    out.append(body_);
}

std::string command::payload() const {
    std::string out;
    append_to(out);
    return out;
}

std::vector<std::string_view> command::arguments() const {
    std::vector<std::string_view> out;
    out.reserve(argc_);
    // body_ is "$<len>\r\n<bytes>\r\n" per argument, written by arg() above.
    const std::string_view body = body_;
    std::size_t at = 0;
    for (std::size_t i = 0; i < argc_; ++i) {
        std::size_t len = 0;
        const char* digits = body.data() + at + 1;
        const char* end = std::from_chars(digits, body.data() + body.size(), len).ptr;
        at = static_cast<std::size_t>(end - body.data()) + 2;
        out.push_back(body.substr(at, len));
        at += len + 2;
    }
    return out;
}

std::string command::name() const {
    if (argc_ == 0) return {};
    // The first argument alone, without arguments()' vector: every
    // async_exec asks for it.
    std::size_t len = 0;
    const char* digits = body_.data() + 1;
    const char* end = std::from_chars(digits, body_.data() + body_.size(), len).ptr;
    std::string n = body_.substr(static_cast<std::size_t>(end - body_.data()) + 2, len);
    // ASCII only: command names are ASCII, and std::toupper would depend on
    // the global locale.
    for (auto& c : n)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return n;
}

}  // namespace corolock
