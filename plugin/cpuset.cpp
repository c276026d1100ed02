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

CpuSet CpuSet::parse(std::string_view list) {
  const std::string text(list);
  // hwloc's parser accepts trailing garbage and infinite ranges ("3-"); a cpu list from Slurm
  // or a user is digits, commas and dashes only.
  bool ok = true;
  bool digit_before = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      digit_before = true;
    } else if ((c == ',' || c == '-') && digit_before) {
      digit_before = false;
    } else {
      ok = false;
    }
  }
  if (!text.empty() && !digit_before) ok = false;
  CpuSet set;
  if (!ok || hwloc_bitmap_list_sscanf(set.bits_.get(), text.c_str()) != 0) {
    throw std::invalid_argument("invalid cpu list '" + text + "': expected a list like 0-15,32-47");
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
