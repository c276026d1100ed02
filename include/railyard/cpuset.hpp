#pragma once
// A set of CPU OS indices, read and written as hwloc list strings ("0-15,32-47"): the form
// the topology, the planner's output and Linux's Cpus_allowed_list share.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct hwloc_bitmap_s;

namespace railyard {

class CpuSet {
 public:
  CpuSet();  // empty
  // Copies only: a moved-from set would hold no bitmap.
  // Parses a list string ("0-3,8,10-11"); throws std::invalid_argument naming the text and
  // what is wrong (syntax, a reversed range like 5-1, a cpu beyond kMaxCpu).
  static CpuSet parse(std::string_view list);
  // The largest cpu number a list may name (Linux's NR_CPUS is at most 8192).
  static constexpr unsigned long long kMaxCpu = 65535;

  CpuSet(const CpuSet& other);
  CpuSet& operator=(const CpuSet& other);
  ~CpuSet();

  bool empty() const;
  int count() const;
  bool contains(const CpuSet& other) const;  // other is a subset
  CpuSet operator&(const CpuSet& other) const;
  CpuSet operator|(const CpuSet& other) const;
  bool operator==(const CpuSet& other) const;
  std::string to_string() const;     // list string; "" when empty
  std::vector<int> members() const;  // ascending

  const hwloc_bitmap_s* bitmap() const { return bits_.get(); }

 private:
  struct Free {
    void operator()(hwloc_bitmap_s* bits) const;
  };
  std::unique_ptr<hwloc_bitmap_s, Free> bits_;
};

}  // namespace railyard
