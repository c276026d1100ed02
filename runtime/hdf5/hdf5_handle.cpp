#include "hdf5_handle.hpp"

#include <stdexcept>

namespace railyard::h5 {

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

void quiet_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

namespace {

herr_t collect(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  // The stack is walked innermost first; the first two entries carry the cause (e.g. errno).
  if (n < 2 && err->desc != nullptr) {
    if (!out->empty()) *out += "; ";
    *out += err->desc;
  }
  return 0;
}

}  // namespace

std::string error_stack() {
  std::string out;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &out);
  H5Eclear2(H5E_DEFAULT);
  return out.empty() ? "HDF5 reported no detail" : out;
}

Id& Id::operator=(Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

herr_t Id::close() {
  herr_t rc = 0;
  if (id_ >= 0 && close_ != nullptr) rc = close_(id_);
  id_ = H5I_INVALID_HID;
  return rc;
}

void Id::reset() {
  if (id_ >= 0 && close_ != nullptr) close_(id_);
  id_ = H5I_INVALID_HID;
}

Id IdCheck::operator()(hid_t id, const std::string& what) const {
  if (id < 0) throw std::runtime_error(what + ": " + error_stack());
  return Id(id, close);
}

void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw std::runtime_error(what + ": " + error_stack());
}

namespace {

void write_scalar(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const void* v) {
  Id space = check_space(H5Screate(H5S_SCALAR), "H5Screate");
  Id attr = check_attr(H5Acreate2(obj, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       std::string("creating attribute ") + name);
  check(H5Awrite(attr.get(), mem_type, v), std::string("writing attribute ") + name);
}

Id open_attr(hid_t obj, const char* name, H5T_class_t want) {
  if (H5Aexists(obj, name) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw std::runtime_error(std::string("missing attribute '") + name + "'");
  }
  Id attr = check_attr(H5Aopen(obj, name, H5P_DEFAULT), std::string("opening attribute ") + name);
  Id type = check_type(H5Aget_type(attr.get()), std::string("type of attribute ") + name);
  Id space = check_space(H5Aget_space(attr.get()), std::string("space of attribute ") + name);
  if (H5Tget_class(type.get()) != want || H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw std::runtime_error(std::string("attribute '") + name + "' has an unexpected type");
  }
  return attr;
}

}  // namespace

void write_attr_i64(hid_t obj, const char* name, int64_t v) {
  write_scalar(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
void write_attr_u64(hid_t obj, const char* name, uint64_t v) {
  write_scalar(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}
void write_attr_f64(hid_t obj, const char* name, double v) {
  write_scalar(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}
void write_attr_str(hid_t obj, const char* name, const std::string& v) {
  Id type = check_type(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check(H5Tset_size(type.get(), v.empty() ? 1 : v.size()), "H5Tset_size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "H5Tset_strpad");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset");
  std::string padded = v.empty() ? std::string(1, '\0') : v;
  write_scalar(obj, name, type.get(), type.get(), padded.data());
}

bool has_attr(hid_t obj, const char* name) {
  const htri_t e = H5Aexists(obj, name);
  if (e < 0) H5Eclear2(H5E_DEFAULT);
  return e > 0;
}

int64_t read_attr_i64(hid_t obj, const char* name) {
  Id attr = open_attr(obj, name, H5T_INTEGER);
  int64_t v = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), std::string("reading attribute ") + name);
  return v;
}
uint64_t read_attr_u64(hid_t obj, const char* name) {
  Id attr = open_attr(obj, name, H5T_INTEGER);
  uint64_t v = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &v), std::string("reading attribute ") + name);
  return v;
}
double read_attr_f64(hid_t obj, const char* name) {
  Id attr = open_attr(obj, name, H5T_FLOAT);
  double v = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), std::string("reading attribute ") + name);
  return v;
}
std::string read_attr_str(hid_t obj, const char* name) {
  Id attr = open_attr(obj, name, H5T_STRING);
  Id type = check_type(H5Aget_type(attr.get()), std::string("type of attribute ") + name);
  if (H5Tis_variable_str(type.get()) > 0) {
    throw std::runtime_error(std::string("attribute '") + name +
                             "' is a variable-length string; expected fixed-length");
  }
  std::string v(H5Tget_size(type.get()), '\0');
  check(H5Aread(attr.get(), type.get(), v.data()), std::string("reading attribute ") + name);
  v.resize(v.find('\0') == std::string::npos ? v.size() : v.find('\0'));
  return v;
}

bool link_exists(hid_t loc, const std::string& path) {
  // H5Lexists needs every intermediate group to exist, so walk the path.
  size_t pos = 0;
  while (true) {
    const size_t slash = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, slash);
    const htri_t e = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
    if (e <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (slash == std::string::npos) return true;
    pos = slash;
  }
}

std::vector<int64_t> dataset_dims(hid_t dset) {
  Id space = check_space(H5Dget_space(dset), "H5Dget_space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw std::runtime_error("dataset has no simple dataspace");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

}  // namespace railyard::h5
