#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_checks.hpp"
#include "checkpoint_format.hpp"
#include "dataset_checksum.hpp"
#include "hdf5_handle.hpp"
#include "isolated_read.hpp"
#include "railyard/checkpoint.hpp"
#include "tensor_reader.hpp"

namespace railyard {
namespace {

using h5::check;
using h5::Id;

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Where a dataset's bytes lie in the file when they can be read raw (tensor_reader.hpp):
// contiguous, unfiltered, little-endian like the host, exactly `bytes` long.
std::optional<uint64_t> raw_offset(hid_t dset, hid_t type, size_t bytes) {
  if (H5Tget_order(type) != H5T_ORDER_LE || H5Tget_order(H5T_NATIVE_FLOAT) != H5T_ORDER_LE) {
    return std::nullopt;
  }
  Id dcpl = h5::check_plist(H5Dget_create_plist(dset), "dataset creation properties");
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0 ||
      H5Dget_storage_size(dset) != bytes) {
    return std::nullopt;
  }
  const haddr_t at = H5Dget_offset(dset);
  if (at == HADDR_UNDEF) return std::nullopt;
  return static_cast<uint64_t>(at);
}

// How far read_file goes. kStructure: everything HDF5 parses (attributes, groups, every
// dataset's type, shape, layout and checksum attribute, the small datasets, the bytes of any
// tensor not stored raw) and where each raw tensor lies against the file's size, but not the
// raw tensors' bytes; kFull: those too, read and verified.
enum class Depth { kStructure, kFull };

// A dataset opened and checked against its expected element type and shape.
struct CheckedDataset {
  Id dset;
  Id type;
  size_t n = 0;         // elements
  uint64_t stored = 0;  // its xxh3_64 attribute
};

CheckedDataset open_checked(hid_t file, const std::string& name, const std::vector<int64_t>& dims,
                            H5T_class_t cls, size_t elem_bytes) {
  if (!h5::link_exists(file, name)) throw std::runtime_error("missing dataset /" + name);
  CheckedDataset d;
  d.dset = h5::check_dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "opening /" + name);
  d.type = h5::check_type(H5Dget_type(d.dset.get()), "type of /" + name);
  if (H5Tget_class(d.type.get()) != cls || H5Tget_size(d.type.get()) != elem_bytes) {
    throw std::runtime_error("dataset /" + name + " has an unexpected element type (expected " +
                             std::to_string(elem_bytes) + "-byte " +
                             (cls == H5T_FLOAT ? "float" : "integer") + ")");
  }
  const std::vector<int64_t> got = h5::dataset_dims(d.dset.get());
  if (got != dims) {
    throw std::runtime_error("dataset /" + name + " has shape " + shape_str(got) + ", expected " +
                             shape_str(dims));
  }
  d.n = 1;
  for (int64_t x : dims) d.n *= static_cast<size_t>(x);
  if (!h5::has_attr(d.dset.get(), ckpt_format::kChecksumAttr)) {
    throw std::runtime_error("dataset /" + name + " has no " + ckpt_format::kChecksumAttr +
                             " checksum attribute");
  }
  d.stored = h5::read_attr_u64(d.dset.get(), ckpt_format::kChecksumAttr);
  return d;
}

// Reads all of `d` through HDF5 into `out` and checks it against its stored checksum.
void read_whole(const CheckedDataset& d, const std::string& name, size_t elem_bytes, hid_t mem_type,
                void* out) {
  if (d.n > 0) {
    check(H5Dread(d.dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "reading /" + name);
  }
  const uint64_t computed = xxh3_64(out, d.n * elem_bytes);
  if (computed != d.stored) {
    throw std::runtime_error(checksum_mismatch("/" + name, d.stored, computed));
  }
}

// Reads dataset `name` (of `dims`, element class/size as given) into `out` and checks its
// XXH3-64 against the stored attribute.
void read_verified(hid_t file, const std::string& name, const std::vector<int64_t>& dims,
                   H5T_class_t cls, size_t elem_bytes, hid_t mem_type, void* out) {
  read_whole(open_checked(file, name, dims, cls, elem_bytes), name, elem_bytes, mem_type, out);
}

// The float32 tensor `name` of `dims`: queued in `bulk` when its bytes can be read raw (to be
// read into `dst` and verified there; returns true), else read and verified here through HDF5,
// into `dst` or, without one (the structure check), into scratch memory: a layout the raw path
// does not take is parsed by HDF5, so it is read in the child process too.
bool plan_tensor(hid_t file, const std::string& name, const std::vector<int64_t>& dims, float* dst,
                 std::vector<TensorRead>& bulk) {
  const CheckedDataset d = open_checked(file, name, dims, H5T_FLOAT, 4);
  if (d.n > 0) {
    if (auto at = raw_offset(d.dset.get(), d.type.get(), d.n * 4)) {
      bulk.push_back({"/" + name, *at, d.n * 4, dst, d.stored});
      return true;
    }
  }
  std::vector<float> scratch(dst == nullptr ? d.n : 0);
  read_whole(d, name, 4, H5T_NATIVE_FLOAT, dst != nullptr ? dst : scratch.data());
  return false;
}

std::string byte_range(const TensorRead& r) {
  return "[" + std::to_string(r.offset) + ", " + std::to_string(r.offset + r.bytes) + ")";
}

// Every raw tensor lies inside the file and overlaps no other, so the structure check rejects a
// damaged offset or size before anything is read from it.
void check_extents(std::vector<TensorRead> reads, uint64_t file_bytes) {
  std::sort(reads.begin(), reads.end(),
            [](const TensorRead& a, const TensorRead& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < reads.size(); ++i) {
    const TensorRead& r = reads[i];
    if (r.bytes > file_bytes || r.offset > file_bytes - r.bytes) {
      throw std::runtime_error("dataset " + r.name + " lies at bytes " + std::to_string(r.offset) +
                               " + " + std::to_string(r.bytes) + ", past the end of the file (" +
                               std::to_string(file_bytes) +
                               " bytes): the file is truncated or damaged");
    }
    if (i > 0 && reads[i - 1].offset + reads[i - 1].bytes > r.offset) {
      throw std::runtime_error("datasets " + reads[i - 1].name + " " + byte_range(reads[i - 1]) +
                               " and " + r.name + " " + byte_range(r) +
                               " overlap in the file: the file is damaged");
    }
  }
}

std::vector<int64_t> read_dims_1d(hid_t file, const std::string& name) {
  if (!h5::link_exists(file, name)) throw std::runtime_error("missing dataset /" + name);
  Id dset = h5::check_dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "opening /" + name);
  std::vector<int64_t> dims = h5::dataset_dims(dset.get());
  if (dims.size() != 1) throw std::runtime_error("dataset /" + name + " is not 1-D");
  return dims;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

// /params must list the model's tensors in its layout order (creation order in the file), each
// of the model's shape. Checked before anything is sized from the file.
void check_file_tensors(hid_t file, const StoredTensors& want) {
  if (!h5::link_exists(file, "params")) throw std::runtime_error("missing group /params");
  Id group = h5::check_group(H5Gopen2(file, "params", H5P_DEFAULT), "opening /params");
  H5G_info_t info{};
  check(H5Gget_info(group.get(), &info), "listing /params");
  if (info.nlinks != want.tensors.size()) {
    throw std::runtime_error("/params holds " + std::to_string(info.nlinks) +
                             " tensors, the /model attributes give " +
                             std::to_string(want.tensors.size()));
  }
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Literate(group.get(), H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_name, &names),
        "listing /params in creation order");
  for (size_t i = 0; i < want.tensors.size() && i < names.size(); ++i) {
    const StoredTensor& w = want.tensors[i];
    if (names[i] != w.name) {
      throw std::runtime_error("tensor " + std::to_string(i) + " is /params/" + names[i] +
                               ", the model's is " + w.name);
    }
    Id dset = h5::check_dataset(H5Dopen2(group.get(), w.name.c_str(), H5P_DEFAULT),
                                "opening /params/" + w.name);
    const std::vector<int64_t> got = h5::dataset_dims(dset.get());
    if (got != w.shape) {
      throw std::runtime_error("/params/" + w.name + " has shape " + shape_str(got) +
                               ", the /model attributes give " + shape_str(w.shape));
    }
  }
}

// The attributes that differ, "layers 2 (this run: 4), dim ..."; both lists in schema order.
std::string model_diff(const Attributes& file, const Attributes& want) {
  std::string out;
  for (size_t i = 0; i < file.size() && i < want.size(); ++i) {
    if (file[i].value == want[i].value) continue;
    if (!out.empty()) out += ", ";
    out += file[i].name + " " + attribute_text(file[i].value) +
           " (this run: " + attribute_text(want[i].value) + ")";
  }
  return out;
}

// The attribute `name` of `obj`, of the type `like` holds.
AttributeValue read_attribute(hid_t obj, const std::string& name, const AttributeValue& like) {
  if (std::holds_alternative<int64_t>(like)) return h5::read_attr_i64(obj, name.c_str());
  if (std::holds_alternative<double>(like)) return h5::read_attr_f64(obj, name.c_str());
  return h5::read_attr_str(obj, name.c_str());
}

// The root and /model attributes, their checksum over the stored bytes and their ranges (the
// /model ones through the schema).
ckpt_format::Meta read_meta(hid_t f, int64_t version, const CheckpointSchema& schema) {
  ckpt_format::StoredMeta m;
  m.step = h5::read_attr_i64(f, "step");
  m.tokens_seen = h5::read_attr_i64(f, "tokens_seen");
  m.lr = h5::read_attr_f64(f, "lr");
  m.adam_step = h5::read_attr_i64(f, "adam_step");
  m.world_size = h5::read_attr_i64(f, "world_size");
  m.loader_seed = h5::read_attr_u64(f, "loader_seed");
  m.loader_epoch = h5::read_attr_u64(f, "loader_epoch");
  m.loader_cursor = h5::read_attr_u64(f, "loader_cursor");
  if (!h5::link_exists(f, "model")) throw std::runtime_error("missing group /model");
  {
    Id model = h5::check_group(H5Gopen2(f, "model", H5P_DEFAULT), "opening /model");
    for (const Attribute& a : schema.attribute_types()) {
      m.model.push_back({a.name, read_attribute(model.get(), a.name, a.value)});
    }
  }
  const uint64_t stored = h5::read_attr_u64(f, ckpt_format::kMetaChecksumAttr);
  if (stored != ckpt_format::meta_checksum(m, version)) {
    throw std::runtime_error("metadata checksum mismatch (root or /model attributes changed)");
  }
  ckpt_checks::check_ranges(m);
  return ckpt_checks::to_meta(m);
}

// The elements the /model attributes describe (the schema checks them).
double model_elements(const CheckpointSchema& schema, const Attributes& model) {
  try {
    return schema.elements(model);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("/model attributes: ") + e.what() +
                             " (the file is damaged or was not written by railyard)");
  }
}

// Zeroes the elements of `a` (layout.total long) that no tensor covers: the alignment padding
// between tensors, which the file does not hold and the read does not write.
void zero_padding(FloatArray& a, const StoredTensors& layout) {
  std::vector<std::pair<size_t, size_t>> spans;  // [offset, end) of each tensor
  for (const StoredTensor& t : layout.tensors) spans.push_back({t.offset, t.offset + t.numel});
  std::sort(spans.begin(), spans.end());
  size_t at = 0;
  for (const auto& [b, e] : spans) {
    if (b > at) std::fill(a.data() + at, a.data() + b, 0.0f);
    at = std::max(at, e);
  }
  if (at < a.size()) std::fill(a.data() + at, a.data() + a.size(), 0.0f);
}

// Sizes the three arrays of `s` for `layout` without touching their fresh pages (the reading
// threads fault them in as they write them), the padding aside; returns the milliseconds taken.
double size_for_read(ModelState& s, const StoredTensors& layout) {
  const Stopwatch sw;
  for (FloatArray* a : {&s.params, &s.m, &s.v}) {
    a->resize(layout.total);
    zero_padding(*a, layout);
  }
  return sw.ms();
}

// The /params, /adam/m and /adam/v tensors of `layout`: their structure and extents, and with
// kFull their bytes read into `s` (sized here, its elements left unset until the read writes
// them; the padding zeroed), verified against their checksums and value ranges. A failure
// throws before `s` leaves the reader, so nothing sees an unset element.
void read_tensors(hid_t f, const std::string& path, const StoredTensors& layout,
                  uint64_t file_bytes, Depth depth, ModelState& s, LoadPhases& ph) {
  const bool full = depth == Depth::kFull;
  if (full) ph.allocate_ms = size_for_read(s, layout);
  struct Part {
    const char* group;
    FloatArray* data;
  };
  std::vector<TensorRead> bulk;
  // The values of a bulk tensor are checked on the thread that reads it, chunk by chunk.
  struct ValueCheck {
    std::string name;
    const float* data;
    size_t n;
    bool is_v;
  };
  std::vector<ValueCheck> bulk_checks;  // one per bulk read
  for (const Part& part : {Part{"params", &s.params}, Part{"adam/m", &s.m}, Part{"adam/v", &s.v}}) {
    if (!h5::link_exists(f, part.group)) {
      throw std::runtime_error(std::string("missing group /") + part.group);
    }
    Id group = h5::check_group(H5Gopen2(f, part.group, H5P_DEFAULT),
                               std::string("opening /") + part.group);
    H5G_info_t info{};
    check(H5Gget_info(group.get(), &info), std::string("listing /") + part.group);
    for (const StoredTensor& t : layout.tensors) {
      const std::string name = std::string(part.group) + "/" + t.name;
      float* dst = full ? part.data->data() + t.offset : nullptr;
      const ValueCheck c{name, dst, t.numel, part.data == &s.v};
      if (plan_tensor(f, name, t.shape, dst, bulk)) {
        bulk_checks.push_back(c);
      } else if (full) {
        ckpt_checks::check_values(c.name, c.data, c.n, c.is_v);
      }
    }
    if (info.nlinks != layout.tensors.size()) {
      throw std::runtime_error("/" + std::string(part.group) + " holds " +
                               std::to_string(info.nlinks) + " datasets, /params " +
                               std::to_string(layout.tensors.size()));
    }
  }
  check_extents(bulk, file_bytes);
  if (!full) return;
  const Stopwatch sw;
  read_tensors_verified(path, bulk, [&](size_t i, size_t begin, size_t bytes) {
    const ValueCheck& c = bulk_checks[i];
    try {
      ckpt_checks::check_values(c.name, c.data + begin / 4, bytes / 4, c.is_v);
    } catch (const std::runtime_error&) {
      // Again from the tensor's start, for a message with the element's index in the tensor.
      ckpt_checks::check_values(c.name, c.data, (begin + bytes) / 4, c.is_v);
      throw;
    }
  });
  ph.read_ms = sw.ms();
}

LoadedCheckpoint read_file(const std::string& path, const CheckpointSchema& schema,
                           const Attributes* expect, Depth depth) {
  const Stopwatch sw;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) throw std::runtime_error(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw std::runtime_error("not a regular file");

  Id file = h5::check_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                           "not a readable HDF5 file (truncated or damaged?)");
  const hid_t f = file.get();
  if (!h5::has_attr(f, "format_version")) {
    throw std::runtime_error("not a railyard checkpoint (no format_version attribute)");
  }
  const int64_t version = h5::read_attr_i64(f, "format_version");
  if (version != ckpt_format::kVersion) {
    throw std::runtime_error("format version " + std::to_string(version) +
                             "; this railyard reads version " +
                             std::to_string(ckpt_format::kVersion));
  }
  LoadedCheckpoint out;
  out.path = path;
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  ckpt_format::Meta meta = read_meta(f, version, schema);
  const double elements = model_elements(schema, meta.model);
  if (expect != nullptr) {
    const std::string diff = model_diff(meta.model, *expect);
    if (!diff.empty()) throw std::runtime_error("a different model: " + diff);
  }
  ckpt_checks::check_fits_file(elements, file_bytes);
  out.tensors = schema.tensors(meta.model);
  const StoredTensors& layout = out.tensors;
  check_file_tensors(f, layout);
  TrainProgress& p = meta.progress;

  const std::vector<int64_t> cfg_dims = read_dims_1d(f, "config_json");
  ckpt_checks::check_declared_length("config_json", static_cast<uint64_t>(cfg_dims[0]), 1,
                                     ckpt_checks::kMaxConfigJsonBytes, file_bytes);
  p.config_json.assign(static_cast<size_t>(cfg_dims[0]), '\0');
  read_verified(f, "config_json", cfg_dims, H5T_INTEGER, 1, H5T_NATIVE_UINT8, p.config_json.data());
  const std::vector<int64_t> rng_dims = read_dims_1d(f, "rng_state");
  ckpt_checks::check_declared_length("rng_state", static_cast<uint64_t>(rng_dims[0]), 8,
                                     ckpt_checks::kMaxRngWords, file_bytes);
  p.rng_state.assign(static_cast<size_t>(rng_dims[0]), 0);
  read_verified(f, "rng_state", rng_dims, H5T_INTEGER, 8, H5T_NATIVE_UINT64, p.rng_state.data());

  ModelState& s = out.state;
  s.shard_begin = 0;
  s.shard_end = layout.total;
  s.adam_step = meta.adam_step;
  read_tensors(f, path, layout, file_bytes, depth, s, out.phases);
  out.phases.open_ms = sw.ms() - out.phases.allocate_ms - out.phases.read_ms;
  out.format_version = version;
  out.created_unix = h5::has_attr(f, "created_unix") ? h5::read_attr_f64(f, "created_unix") : 0;
  out.model = std::move(meta.model);
  out.progress = std::move(meta.progress);
  return out;
}

// read_file to `depth` in a forked child (isolated_read.hpp). Never throws for a bad file.
CheckpointCheck check_in_child(const std::string& path, const CheckpointSchema& schema,
                               const Attributes* expect, Depth depth) {
  CheckpointCheck out;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    out.error = path + ": " + std::strerror(errno);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.error = path + ": not a regular file (symlinks are not followed)";
    return out;
  }
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  const isolated::Outcome r = isolated::run(static_cast<uint64_t>(st.st_size), [&] {
    return read_file(path, schema, expect, depth).progress.step;
  });
  out.valid = r.ok;
  out.step = r.step;
  if (!r.ok) out.error = path + ": " + r.error;
  return out;
}

}  // namespace

CheckpointCheck check_checkpoint(const std::string& path, const CheckpointSchema& schema,
                                 const Attributes* expect) {
  return check_in_child(path, schema, expect, Depth::kFull);
}

LoadedCheckpoint read_checkpoint(const std::string& path, const CheckpointSchema& schema,
                                 const Attributes* expect) {
  // A file that crashes or exhausts HDF5 fails in a child first, which parses all of it that
  // HDF5 parses; the same bytes then parse the same way here. The raw tensor bytes, which HDF5
  // does not parse, are read only here, once, straight into the state's fresh arrays, and
  // verified here (checksums, values) before the state is returned.
  const Stopwatch sw;
  const CheckpointCheck checked = check_in_child(path, schema, expect, Depth::kStructure);
  const double check_ms = sw.ms();
  if (!checked.valid) throw CheckpointError(checked.error);
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  try {
    LoadedCheckpoint out = read_file(path, schema, expect, Depth::kFull);
    out.phases.check_ms = check_ms;
    return out;
  } catch (const std::exception& e) {
    throw CheckpointError(path + ": " + e.what());
  }
}

}  // namespace railyard
