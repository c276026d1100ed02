// CpuSet over hwloc's bitmap, which already reads and writes list strings.

#include "railyard/cpuset.hpp"

#include <hwloc.h>

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace railyard {
namespace {

hwloc_bitmap_s* allocate() {
  hwloc_bitmap_s* bits = hwloc_bitmap_alloc();
  if (bits == nullptr) throw std::bad_alloc();
  return bits;
}

}  // namespace

void CpuSet::Free::operator()(hwloc_bitmap_s* bits) const {
  hwloc_bitmap_free(bits);
}

CpuSet::CpuSet() : bits_(allocate()) {}

namespace {

// One "N" or "N-M" item of a cpu list: digits only, N <= M, M <= CpuSet::kMaxCpu; "" when fine,
// else why not.
std::string range_problem(const std::string& item) {
  const size_t dash = item.find('-');
  const std::string lo = item.substr(0, dash);
  const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
  auto number = [](const std::string& s, unsigned long long& v) {
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    v = std::stoull(s);
    return true;
  };
  unsigned long long a = 0, b = 0;
  if (!number(lo, a) || !number(hi, b)) return "expected a list like 0-15,32-47";
  if (a > b) return "range " + item + " is reversed (write " + hi + "-" + lo + ")";
  if (b > CpuSet::kMaxCpu) {
    return "cpu " + std::to_string(b) + " is beyond the largest supported cpu number " +
           std::to_string(CpuSet::kMaxCpu);
  }
  return "";
}

}  // namespace

CpuSet CpuSet::parse(std::string_view list) {
  const std::string text(list);
  // hwloc's parser accepts trailing garbage, infinite ("3-") and reversed ranges and wraps
  // numbers past 2^32: a cpu list from Slurm or a user is checked item by item first.
  std::string problem;
  size_t start = 0;
  while (!text.empty() && problem.empty()) {
    const size_t comma = text.find(',', start);
    problem = range_problem(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  CpuSet set;
  if (problem.empty() && hwloc_bitmap_list_sscanf(set.bits_.get(), text.c_str()) != 0) {
    problem = "expected a list like 0-15,32-47";
  }
  if (!problem.empty()) {
    throw std::invalid_argument("invalid cpu list '" + text + "': " + problem);
  }
  return set;
}

CpuSet::CpuSet(const CpuSet& other) : bits_(hwloc_bitmap_dup(other.bits_.get())) {
  if (!bits_) throw std::bad_alloc();
}

CpuSet& CpuSet::operator=(const CpuSet& other) {
  if (this != &other && hwloc_bitmap_copy(bits_.get(), other.bits_.get()) != 0) {
    throw std::bad_alloc();
  }
  return *this;
}

CpuSet::~CpuSet() = default;

bool CpuSet::empty() const {
  return hwloc_bitmap_iszero(bits_.get());
}

int CpuSet::count() const {
  return hwloc_bitmap_weight(bits_.get());
}

bool CpuSet::contains(const CpuSet& other) const {
  return hwloc_bitmap_isincluded(other.bits_.get(), bits_.get());
}

CpuSet CpuSet::operator&(const CpuSet& other) const {
  CpuSet out;
  if (hwloc_bitmap_and(out.bits_.get(), bits_.get(), other.bits_.get()) != 0) {
    throw std::bad_alloc();
  }
  return out;
}

CpuSet CpuSet::operator|(const CpuSet& other) const {
  CpuSet out;
  if (hwloc_bitmap_or(out.bits_.get(), bits_.get(), other.bits_.get()) != 0) {
    throw std::bad_alloc();
  }
  return out;
}

bool CpuSet::operator==(const CpuSet& other) const {
  return hwloc_bitmap_isequal(bits_.get(), other.bits_.get());
}

std::string CpuSet::to_string() const {
  if (empty()) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bits_.get()) < 0 || text == nullptr) {
    throw std::bad_alloc();
  }
  std::string out(text);
  std::free(text);
  return out;
}

std::vector<int> CpuSet::members() const {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(bits_.get()); i >= 0; i = hwloc_bitmap_next(bits_.get(), i)) {
    out.push_back(i);
  }
  return out;
}

}  // namespace railyard
