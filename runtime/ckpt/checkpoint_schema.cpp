#include "railyard/checkpoint_schema.hpp"

#include <charconv>

namespace railyard {

std::string attribute_text(const AttributeValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, *d);
    return std::string(buf, r.ptr);
  }
  return std::get<std::string>(v);
}

}  // namespace railyard
