#include <corolock/command.hpp>

#include <cctype>

namespace corolock {

namespace {
void append_bulk(std::string& out, std::string_view a) {
    out.push_back('$');
    out.append(std::to_string(a.size()));
    out.append("\r\n");
    out.append(a);
    out.append("\r\n");
}
}  // namespace

void command::reserve(std::size_t argc) { body_.reserve(argc * 24); }

command& command::arg(std::string_view a) {
    append_bulk(body_, a);
    ++argc_;
    return *this;
}

command& command::arg(std::int64_t n) { return arg(std::string_view(std::to_string(n))); }

void command::append_to(std::string& out) const {
    out.push_back('*');
    out.append(std::to_string(argc_));
    out.append("\r\n");
    out.append(body_);
}

std::string command::payload() const {
    std::string out;
    out.reserve(body_.size() + 16);
    append_to(out);
    return out;
}

std::string command::name() const {
    // body_ starts with "$<len>\r\n<name>\r\n".
    if (argc_ == 0) return {};
    const auto eol = body_.find("\r\n");
    const std::size_t len = std::stoul(body_.substr(1, eol - 1));
    std::string n = body_.substr(eol + 2, len);
    for (auto& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return n;
}

}  // namespace corolock
