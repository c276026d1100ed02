#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_format.hpp"
#include "dataset_checksum.hpp"
#include "hdf5_handle.hpp"
#include "railyard/checkpoint.hpp"
#include "tensor_reader.hpp"

namespace railyard {
namespace {

using h5::check;
using h5::Id;

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

// Reads dataset `name` (of `dims`, element class/size as given) into `out` and checks its
// XXH3-64 against the stored attribute. With `defer`, a dataset whose bytes can be read raw is
// only checked here and queued there, to be read and verified in bulk.
void read_verified(hid_t file, const std::string& name, const std::vector<int64_t>& dims,
                   H5T_class_t cls, size_t elem_bytes, hid_t mem_type, void* out,
                   std::vector<TensorRead>* defer = nullptr) {
  if (!h5::link_exists(file, name)) throw std::runtime_error("missing dataset /" + name);
  Id dset = h5::check_dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "opening /" + name);
  Id type = h5::check_type(H5Dget_type(dset.get()), "type of /" + name);
  if (H5Tget_class(type.get()) != cls || H5Tget_size(type.get()) != elem_bytes) {
    throw std::runtime_error("dataset /" + name + " has an unexpected element type (expected " +
                             std::to_string(elem_bytes) + "-byte " +
                             (cls == H5T_FLOAT ? "float" : "integer") + ")");
  }
  const std::vector<int64_t> got = h5::dataset_dims(dset.get());
  if (got != dims) {
    throw std::runtime_error("dataset /" + name + " has shape " + shape_str(got) + ", expected " +
                             shape_str(dims));
  }
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  if (!h5::has_attr(dset.get(), ckpt_format::kChecksumAttr)) {
    throw std::runtime_error("dataset /" + name + " has no " + ckpt_format::kChecksumAttr +
                             " checksum attribute");
  }
  const uint64_t stored = h5::read_attr_u64(dset.get(), ckpt_format::kChecksumAttr);
  if (defer != nullptr && n > 0) {
    if (auto at = raw_offset(dset.get(), type.get(), n * elem_bytes)) {
      defer->push_back({"/" + name, *at, n * elem_bytes, out, stored});
      return;
    }
  }
  if (n > 0) {
    check(H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "reading /" + name);
  }
  const uint64_t computed = xxh3_64(out, n * elem_bytes);
  if (computed != stored) throw std::runtime_error(checksum_mismatch("/" + name, stored, computed));
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

// The tensors of /params in the order they were written (the model's layout order).
ParamLayout layout_from_file(hid_t file) {
  if (!h5::link_exists(file, "params")) throw std::runtime_error("missing group /params");
  Id group = h5::check_group(H5Gopen2(file, "params", H5P_DEFAULT), "opening /params");
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Literate(group.get(), H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_name, &names),
        "listing /params in creation order");
  ParamLayout layout;
  for (const std::string& n : names) {
    Id dset =
        h5::check_dataset(H5Dopen2(group.get(), n.c_str(), H5P_DEFAULT), "opening /params/" + n);
    layout.add(n, h5::dataset_dims(dset.get()), true);
  }
  return layout;
}

std::string model_diff(const GptConfig& file, const GptConfig& want) {
  std::string out;
  auto field = [&](const char* name, int a, int b) {
    if (a == b) return;
    if (!out.empty()) out += ", ";
    out += std::string(name) + " " + std::to_string(a) + " (this run: " + std::to_string(b) + ")";
  };
  field("vocab", file.vocab, want.vocab);
  field("padded_vocab", file.padded_vocab, want.padded_vocab);
  field("max_seq", file.max_seq, want.max_seq);
  field("layers", file.layers, want.layers);
  field("heads", file.heads, want.heads);
  field("dim", file.dim, want.dim);
  return out;
}

void check_same_layout(const ParamLayout& file, const ParamLayout& want) {
  if (file.tensors().size() != want.tensors().size()) {
    throw std::runtime_error("/params holds " + std::to_string(file.tensors().size()) +
                             " tensors, the model has " + std::to_string(want.tensors().size()));
  }
  for (size_t i = 0; i < want.tensors().size(); ++i) {
    const TensorSpec& f = file.tensors()[i];
    const TensorSpec& w = want.tensors()[i];
    if (f.name != w.name) {
      throw std::runtime_error("tensor " + std::to_string(i) + " is /params/" + f.name +
                               ", the model's is " + w.name);
    }
    if (f.shape != w.shape) {
      throw std::runtime_error("/params/" + f.name + " has shape " + shape_str(f.shape) +
                               ", the model's is " + shape_str(w.shape));
    }
  }
}

LoadedCheckpoint read_file(const std::string& path, const GptConfig* expect) {
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
  ckpt_format::Meta meta;
  TrainProgress& p = meta.progress;
  p.step = h5::read_attr_i64(f, "step");
  p.tokens_seen = h5::read_attr_i64(f, "tokens_seen");
  p.lr = h5::read_attr_f64(f, "lr");
  meta.adam_step = h5::read_attr_i64(f, "adam_step");
  p.world_size = static_cast<int>(h5::read_attr_i64(f, "world_size"));
  p.loader.seed = h5::read_attr_u64(f, "loader_seed");
  p.loader.epoch = h5::read_attr_u64(f, "loader_epoch");
  p.loader.cursor = h5::read_attr_u64(f, "loader_cursor");
  if (!h5::link_exists(f, "model")) throw std::runtime_error("missing group /model");
  {
    Id model = h5::check_group(H5Gopen2(f, "model", H5P_DEFAULT), "opening /model");
    auto get = [&](const char* name) {
      return static_cast<int>(h5::read_attr_i64(model.get(), name));
    };
    meta.model.vocab = get("vocab");
    meta.model.padded_vocab = get("padded_vocab");
    meta.model.max_seq = get("max_seq");
    meta.model.layers = get("layers");
    meta.model.heads = get("heads");
    meta.model.dim = get("dim");
  }
  const uint64_t stored_meta = h5::read_attr_u64(f, ckpt_format::kMetaChecksumAttr);
  if (stored_meta != ckpt_format::meta_checksum(meta, version)) {
    throw std::runtime_error("metadata checksum mismatch (root or /model attributes changed)");
  }
  if (expect != nullptr) {
    const std::string diff = model_diff(meta.model, *expect);
    if (!diff.empty()) throw std::runtime_error("a different model: " + diff);
  }
  const ParamLayout layout = layout_from_file(f);
  if (expect != nullptr) check_same_layout(layout, gpt_param_layout(*expect));

  const std::vector<int64_t> cfg_dims = read_dims_1d(f, "config_json");
  p.config_json.assign(static_cast<size_t>(cfg_dims[0]), '\0');
  read_verified(f, "config_json", cfg_dims, H5T_INTEGER, 1, H5T_NATIVE_UINT8, p.config_json.data());
  const std::vector<int64_t> rng_dims = read_dims_1d(f, "rng_state");
  p.rng_state.assign(static_cast<size_t>(rng_dims[0]), 0);
  read_verified(f, "rng_state", rng_dims, H5T_INTEGER, 8, H5T_NATIVE_UINT64, p.rng_state.data());

  ModelState& s = out.state;
  s.params.assign(layout.total(), 0.0f);
  s.m.assign(layout.total(), 0.0f);
  s.v.assign(layout.total(), 0.0f);
  s.shard_begin = 0;
  s.shard_end = layout.total();
  s.adam_step = meta.adam_step;
  struct Part {
    const char* group;
    std::vector<float>* data;
  };
  std::vector<TensorRead> bulk;
  for (const Part& part : {Part{"params", &s.params}, Part{"adam/m", &s.m}, Part{"adam/v", &s.v}}) {
    if (!h5::link_exists(f, part.group)) {
      throw std::runtime_error(std::string("missing group /") + part.group);
    }
    Id group = h5::check_group(H5Gopen2(f, part.group, H5P_DEFAULT),
                               std::string("opening /") + part.group);
    H5G_info_t info{};
    check(H5Gget_info(group.get(), &info), std::string("listing /") + part.group);
    for (const TensorSpec& t : layout.tensors()) {
      read_verified(f, std::string(part.group) + "/" + t.name, t.shape, H5T_FLOAT, 4,
                    H5T_NATIVE_FLOAT, part.data->data() + t.offset, &bulk);
    }
    if (info.nlinks != layout.tensors().size()) {
      throw std::runtime_error("/" + std::string(part.group) + " holds " +
                               std::to_string(info.nlinks) + " datasets, /params " +
                               std::to_string(layout.tensors().size()));
    }
  }
  read_tensors_verified(path, bulk);
  out.format_version = version;
  out.created_unix = h5::has_attr(f, "created_unix") ? h5::read_attr_f64(f, "created_unix") : 0;
  out.model = meta.model;
  out.progress = std::move(meta.progress);
  return out;
}

}  // namespace

LoadedCheckpoint read_checkpoint(const std::string& path, const GptConfig* expect) {
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  try {
    return read_file(path, expect);
  } catch (const std::exception& e) {
    throw CheckpointError(path + ": " + e.what());
  }
}

}  // namespace railyard
