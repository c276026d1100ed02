#pragma once
// Owning HDF5 identifiers and error checking, for checkpoints and token files alike. The HDF5
// builds we use are not thread-safe, so every use of HDF5 holds hdf5_mutex() (the checkpoint
// background writer runs on its own thread while the trainer may open token files).

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace railyard::h5 {

std::mutex& hdf5_mutex();

// Silences HDF5's automatic error printing once; errors are reported through exceptions.
void quiet_errors();

// The innermost messages of HDF5's current error stack, e.g. "...: No space left on device".
std::string error_stack();

class Id {
 public:
  Id() = default;
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Id& operator=(Id&& o) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and reports a failure (closing a file flushes it, so it can fail).
  herr_t close();
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// check_file(H5Fopen(...), what) and the like: the identifier HDF5 just returned, owned and
// closed by the matching H5?close. Each throws std::runtime_error("<what>: <HDF5 error stack>")
// when HDF5 failed.
struct IdCheck {
  herr_t (*close)(hid_t);
  Id operator()(hid_t id, const std::string& what) const;
};
inline constexpr IdCheck check_file{H5Fclose}, check_group{H5Gclose}, check_dataset{H5Dclose},
    check_space{H5Sclose}, check_plist{H5Pclose}, check_attr{H5Aclose}, check_type{H5Tclose};
// The same for a status code.
void check(herr_t rc, const std::string& what);

// Scalar attributes on any object.
void write_attr_i64(hid_t obj, const char* name, int64_t v);
void write_attr_u64(hid_t obj, const char* name, uint64_t v);
void write_attr_f64(hid_t obj, const char* name, double v);
void write_attr_str(hid_t obj, const char* name, const std::string& v);
bool has_attr(hid_t obj, const char* name);
// Throw std::runtime_error naming the attribute when missing or of another kind.
int64_t read_attr_i64(hid_t obj, const char* name);
uint64_t read_attr_u64(hid_t obj, const char* name);
double read_attr_f64(hid_t obj, const char* name);
std::string read_attr_str(hid_t obj, const char* name);

bool link_exists(hid_t loc, const std::string& path);
// Dimensions of a dataset's simple dataspace.
std::vector<int64_t> dataset_dims(hid_t dset);

}  // namespace railyard::h5
