#include <corolock/reply.hpp>

#include <cstdio>

namespace corolock {

namespace {

// Replies can be huge (a bulk of hundreds of MiB, an aggregate of millions
// of elements); a log line should not be. Rendering stops once past this.
constexpr std::size_t max_rendered = 512;

class renderer {
public:
    bool full() const noexcept { return out_.size() > max_rendered; }

    // Server bytes are arbitrary: escape everything that could garble a log
    // line or a terminal.
    void escaped(std::string_view s) {
        for (char c : s) {
            if (full()) return;
            const auto u = static_cast<unsigned char>(c);
            switch (c) {
            case '"': out_.append("\\\""); break;
            case '\\': out_.append("\\\\"); break;
            case '\r': out_.append("\\r"); break;
            case '\n': out_.append("\\n"); break;
            case '\t': out_.append("\\t"); break;
            default:
                if (u >= 0x20 && u < 0x7f) {
                    out_.push_back(c);
                } else {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", u);
                    out_.append(buf);
                }
            }
        }
    }

    void quoted(std::string_view s) {
        out_.push_back('"');
        escaped(s);
        out_.push_back('"');
    }

    void map_body(const std::vector<reply>& kv) {
        out_.push_back('{');
        for (std::size_t i = 0; i < kv.size() && !full(); i += 2) {
            if (i) out_.append(", ");
            value(kv[i]);
            out_.append(": ");
            if (i + 1 < kv.size()) value(kv[i + 1]);
        }
        out_.push_back('}');
    }

    void list_body(const std::vector<reply>& el) {
        out_.push_back('[');
        for (std::size_t i = 0; i < el.size() && !full(); ++i) {
            if (i) out_.append(", ");
            value(el[i]);
        }
        out_.push_back(']');
    }

    void value(const reply& r) {
        if (full()) return;
        if (!r.attributes.empty()) {
            out_.append("(attributes ");
            map_body(r.attributes);
            out_.append(") ");
        }
        switch (r.type) {
        case resp3_type::simple_string:
        case resp3_type::bulk_string:
        case resp3_type::verbatim_string: quoted(r.str); break;
        case resp3_type::simple_error:
        case resp3_type::blob_error:
            out_.append("(error) ");
            escaped(r.str);
            break;
        case resp3_type::integer: out_.append("(integer) " + std::to_string(r.integer)); break;
        case resp3_type::null: out_.append("(nil)"); break;
        case resp3_type::boolean: out_.append(r.integer ? "(true)" : "(false)"); break;
        case resp3_type::double_type:
            out_.append("(double) ");
            // The parser keeps the server's text; a hand-built reply may not.
            if (r.str.empty()) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%.17g", r.number);
                out_.append(buf);
            } else {
                escaped(r.str);
            }
            break;
        case resp3_type::big_number:
            out_.append("(big number) ");
            escaped(r.str);
            break;
        case resp3_type::map: map_body(r.elements); break;
        case resp3_type::array: list_body(r.elements); break;
        case resp3_type::set:
            out_.append("(set) ");
            list_body(r.elements);
            break;
        case resp3_type::push:
            out_.append("(push) ");
            list_body(r.elements);
            break;
        }
    }

    std::string take() {
        if (full()) {
            out_.resize(max_rendered);
            out_.append("...");
        }
        return std::move(out_);
    }

private:
    std::string out_;
};

}  // namespace

std::string to_string(const reply& r) {
    renderer out;
    out.value(r);
    return out.take();
}

}  // namespace corolock
