#include <corolock/command.hpp>

#include <charconv>
#include <limits>

namespace corolock {

namespace {

// Room for any 64-bit number in decimal, sign included.
constexpr std::size_t max_decimal = std::numeric_limits<std::uint64_t>::digits10 + 2;

// Writes "<prefix><n>\r\n" without building a temporary string.
template <class Integer>
void append_header(std::string& out, char prefix, Integer n) {
    char buf[max_decimal + 3];
    buf[0] = prefix;
    char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
    *end++ = '\r';
    *end++ = '\n';
    out.append(buf, static_cast<std::size_t>(end - buf));
}

}  // namespace

// A guess at a typical short argument (a key, a token, a number) plus its
// "$<len>\r\n...\r\n" framing; body_ grows as needed beyond it.
void command::reserve(std::size_t argc) { body_.reserve(argc * 24); }

command& command::arg(std::string_view a) {
    append_header(body_, '$', a.size());
    body_.append(a);
    body_.append("\r\n");
    ++argc_;
    return *this;
}

command& command::arg(std::int64_t n) {
    char digits[max_decimal];
    const char* end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    return arg(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

void command::append_to(std::string& out) const {
    out.reserve(out.size() + body_.size() + max_decimal + 3);
    append_header(out, '*', argc_);
    out.append(body_);
}

std::string command::payload() const {
    std::string out;
    append_to(out);
    return out;
}

std::string command::name() const {
    if (argc_ == 0) return {};
    // body_ starts with "$<len>\r\n<name>\r\n", written by arg() above.
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
