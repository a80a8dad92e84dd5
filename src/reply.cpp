#include <corolock/reply.hpp>

#include <cstdio>

namespace corolock {

namespace {

constexpr std::size_t max_rendered = 512;

void append_escaped(std::string& out, std::string_view s) {
    out.push_back('"');
    for (char c : s) {
        if (out.size() > max_rendered) break;
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (u >= 0x20 && u < 0x7f) {
            out.push_back(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out.append(buf);
        }
    }
    out.push_back('"');
}

void render(std::string& out, const reply& r) {
    if (out.size() > max_rendered) return;
    switch (r.type) {
    case resp3_type::simple_string:
    case resp3_type::bulk_string:
    case resp3_type::verbatim_string: append_escaped(out, r.str); break;
    case resp3_type::simple_error:
    case resp3_type::blob_error:
        out.append("(error) ");
        out.append(r.str.substr(0, max_rendered));
        break;
    case resp3_type::integer: out.append("(integer) " + std::to_string(r.integer)); break;
    case resp3_type::null: out.append("(nil)"); break;
    case resp3_type::boolean: out.append(r.integer ? "(true)" : "(false)"); break;
    case resp3_type::double_type: out.append("(double) " + r.str); break;
    case resp3_type::big_number: out.append("(big number) " + r.str); break;
    case resp3_type::map: {
        out.push_back('{');
        for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
            if (i) out.append(", ");
            render(out, r.elements[i]);
            out.append(": ");
            render(out, r.elements[i + 1]);
        }
        out.push_back('}');
        break;
    }
    case resp3_type::array:
    case resp3_type::set:
    case resp3_type::push: {
        if (r.type == resp3_type::push) out.append("(push) ");
        out.push_back(r.type == resp3_type::set ? '(' : '[');
        for (std::size_t i = 0; i < r.elements.size(); ++i) {
            if (i) out.append(", ");
            render(out, r.elements[i]);
        }
        out.push_back(r.type == resp3_type::set ? ')' : ']');
        break;
    }
    }
}

}  // namespace

std::string to_string(const reply& r) {
    std::string out;
    render(out, r);
    if (out.size() > max_rendered) {
        out.resize(max_rendered);
        out.append("...");
    }
    return out;
}

}  // namespace corolock
