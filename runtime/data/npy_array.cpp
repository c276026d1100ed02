#include "railyard/npy_array.hpp"

#include <cstring>
#include <stdexcept>

namespace railyard {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(".npy header: " + what);
}

// A cursor over the header dict: the subset of Python literal syntax NumPy writes.
class Literal {
 public:
  explicit Literal(std::string_view s) : s_(s) {}

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool accept(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c, const std::string& where) {
    if (!accept(c)) bad(std::string("expected '") + c + "' " + where + " at byte " + pos());
  }
  std::string string() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      bad("expected a quoted string at byte " + pos());
    const char quote = s_[i_++];
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\' || static_cast<unsigned char>(s_[i_]) < 0x20)
        bad("unexpected character in a string at byte " + pos());
      ++i_;
    }
    if (i_ >= s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const size_t n = std::strlen(word);
      if (s_.substr(i_, n) == word) {
        i_ += n;
        return value;
      }
    }
    bad("fortran_order must be True or False (at byte " + pos() + ")");
  }
  uint64_t integer() {
    skip_space();
    uint64_t v = 0;
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (uint64_t{1} << 56)) bad("a dimension is too large");
      v = v * 10 + static_cast<uint64_t>(s_[i_++] - '0');
    }
    if (i_ == start) bad("expected a non-negative integer at byte " + pos());
    return v;
  }
  std::vector<uint64_t> tuple() {
    expect('(', "to open shape");
    std::vector<uint64_t> dims;
    while (!accept(')')) {
      if (dims.size() >= 32) bad("shape has more than 32 dimensions");
      dims.push_back(integer());
      // A one-element tuple needs its comma: "(5)" is the integer 5 in Python, not a shape.
      if (accept(')')) {
        if (dims.size() == 1)
          bad("shape (" + std::to_string(dims[0]) + ") is not a tuple; NumPy writes (N,)");
        break;
      }
      expect(',', "between dimensions");
    }
    return dims;
  }
  bool at_end() const { return i_ == s_.size(); }
  std::string pos() const { return std::to_string(i_); }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

int item_bytes(const std::string& descr) {
  if (descr.size() < 3 || std::strchr("<>|=", descr[0]) == nullptr ||
      std::strchr("uifbc", descr[1]) == nullptr) {
    bad("descr '" + descr + "' is not a NumPy scalar type such as '<u2'");
  }
  int n = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || n > 64) bad("descr '" + descr + "' has a bad size");
    n = n * 10 + (descr[i] - '0');
  }
  if (n != 1 && n != 2 && n != 4 && n != 8 && n != 16) {
    bad("descr '" + descr + "' has an item size of " + std::to_string(n) + " bytes");
  }
  return n;
}

// Parses the dict body; every key exactly once, nothing else.
void parse_dict(std::string_view text, NpyArray& a) {
  Literal p(text);
  p.expect('{', "to open the header dict");
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  while (!p.accept('}')) {
    const std::string key = p.string();
    p.expect(':', "after key '" + key + "'");
    bool* seen = key == "descr"           ? &have_descr
                 : key == "fortran_order" ? &have_order
                 : key == "shape"         ? &have_shape
                                          : nullptr;
    if (seen == nullptr) bad("unknown key '" + key + "' (allowed: descr, fortran_order, shape)");
    if (*seen) bad("key '" + key + "' appears twice");
    *seen = true;
    if (key == "descr") a.descr = p.string();
    if (key == "fortran_order") fortran = p.boolean();
    if (key == "shape") a.shape = p.tuple();
    if (p.accept('}')) break;
    p.expect(',', "between entries");
  }
  p.skip_space();
  if (!p.at_end()) bad("unexpected text after the header dict at byte " + p.pos());
  if (!have_descr || !have_order || !have_shape)
    bad("needs the keys descr, fortran_order and shape");
  if (fortran) bad("fortran_order is True; only C order is supported (np.ascontiguousarray)");
  a.item_bytes = item_bytes(a.descr);
}

}  // namespace

NpyArray parse_npy_header(std::string_view head, uint64_t file_size) {
  if (head.size() < 10 || head.substr(0, 6) != kMagic)
    bad("not a .npy file (magic \\x93NUMPY missing)");
  const auto byte = [&](size_t i) {
    return static_cast<uint64_t>(static_cast<unsigned char>(head[i]));
  };
  const uint64_t major = byte(6);
  if (major < 1 || major > 3) bad("format version " + std::to_string(major) + " is not 1, 2 or 3");
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (head.size() < 8 + len_bytes) bad("truncated before the header length");
  uint64_t len = 0;
  for (size_t i = 0; i < len_bytes; ++i) len |= byte(8 + i) << (8 * i);
  const uint64_t prefix = 8 + len_bytes;
  if (len > kNpyMaxHeader)
    bad("header length " + std::to_string(len) + " exceeds " + std::to_string(kNpyMaxHeader));
  if (prefix + len > file_size || prefix + len > head.size()) {
    bad("header length " + std::to_string(len) + " runs past the end of the file (" +
        std::to_string(file_size) + " bytes)");
  }
  std::string_view text = head.substr(prefix, len);
  if (text.empty() || text.back() != '\n') bad("header does not end with a newline");
  text.remove_suffix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  NpyArray a;
  parse_dict(text, a);
  a.data_offset = prefix + len;
  a.count = 1;
  for (uint64_t d : a.shape) {
    if (d != 0 && a.count > (uint64_t{1} << 62) / d) bad("shape is too large");
    a.count *= d;
  }
  const uint64_t have = file_size - a.data_offset;
  if (a.count > have / static_cast<uint64_t>(a.item_bytes) ||
      a.count * static_cast<uint64_t>(a.item_bytes) != have) {
    bad("shape and descr '" + a.descr + "' need " + std::to_string(a.count) + " x " +
        std::to_string(a.item_bytes) + " bytes of data, the file has " + std::to_string(have) +
        " after the header (truncated or trailing bytes)");
  }
  return a;
}

std::string npy_header(const std::string& descr, const std::vector<uint64_t>& shape) {
  std::string dims;
  for (uint64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // "(N,)" for one dimension, "(A,B)" for more
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

}  // namespace railyard
