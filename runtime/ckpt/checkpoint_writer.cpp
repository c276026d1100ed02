#include "checkpoint_writer.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "collective_error.hpp"
#include "dataset_checksum.hpp"
#include "hdf5_handle.hpp"
#include "railyard/communicator.hpp"
#include "railyard/direct_file.hpp"
#include "railyard/mpi_comm.hpp"

namespace railyard {
namespace {

using h5::check;
using h5::Id;

// Datasets of at least this many bytes are aligned for O_DIRECT; smaller ones pack tightly.
constexpr hsize_t kAlignThreshold = 64 * 1024;

#if RAILYARD_PARALLEL_HDF5
struct Block {
  std::vector<hsize_t> start, count;
};

// The flat row-major element range [a, b) of an array of `shape`, as rectangular blocks (a shard
// boundary may cut a matrix mid-row: partial first row, full rows, partial last row, per level).
void range_blocks(const std::vector<hsize_t>& shape, size_t dim, std::vector<hsize_t>& prefix,
                  hsize_t a, hsize_t b, std::vector<Block>& out) {
  if (a >= b) return;
  const size_t rank = shape.size();
  auto push = [&](hsize_t first, hsize_t n) {
    Block blk;
    blk.start = prefix;
    blk.count.assign(prefix.size(), 1);
    blk.start.push_back(first);
    blk.count.push_back(n);
    for (size_t d = dim + 1; d < rank; ++d) {
      blk.start.push_back(0);
      blk.count.push_back(shape[d]);
    }
    out.push_back(std::move(blk));
  };
  if (dim + 1 == rank) {
    push(a, b - a);
    return;
  }
  hsize_t stride = 1;
  for (size_t d = dim + 1; d < rank; ++d) stride *= shape[d];
  if (a % stride != 0) {
    const hsize_t row = a / stride;
    const hsize_t row_end = std::min(b, (row + 1) * stride);
    prefix.push_back(row);
    range_blocks(shape, dim + 1, prefix, a - row * stride, row_end - row * stride, out);
    prefix.pop_back();
    a = row_end;
  }
  if (a >= b) return;
  const hsize_t full = (b - a) / stride;
  if (full > 0) {
    push(a / stride, full);
    a += full * stride;
  }
  if (a < b) {
    const hsize_t row = a / stride;
    prefix.push_back(row);
    range_blocks(shape, dim + 1, prefix, 0, b - row * stride, out);
    prefix.pop_back();
  }
}

// Selects the flat range [a, b) (not empty) of the dataset's space.
void select_range(hid_t space, const std::vector<hsize_t>& shape, hsize_t a, hsize_t b) {
  std::vector<Block> blocks;
  std::vector<hsize_t> prefix;
  range_blocks(shape, 0, prefix, a, b, blocks);
  bool first = true;
  for (const Block& blk : blocks) {
    check(H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, blk.start.data(),
                              nullptr, blk.count.data(), nullptr),
          "H5Sselect_hyperslab");
    first = false;
  }
}

#endif

// Runs the phases of a write. Alone, an error throws at once; collectively, every rank finishes
// the phase, then all learn whether any failed and throw together, so no rank is left waiting
// in a collective HDF5 call that the others abandoned.
class Team {
 public:
  explicit Team(Communicator* comm) : comm_(comm) {}
  bool collective() const { return comm_ != nullptr; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  Communicator* comm() const { return comm_; }

  void phase(const std::function<void()>& fn) {
    std::string err;
    try {
      fn();
    } catch (const std::exception& e) {
      err = e.what();
      if (err.empty()) err = "unknown error";
    }
    raise_if_any(comm_, err);
  }

 private:
  Communicator* comm_;
};

#if RAILYARD_PARALLEL_HDF5
struct Arrays {
  const char* group;
  const float* base;  // element `begin` of this process's range
};

// Each tensor's XXH3-64 per array, over the whole logical tensor. Collectively, the tensor's
// pieces are hashed in rank order, the hash state passed from rank to rank.
std::vector<uint64_t> tensor_digests(Team& team, const StoredTensors& layout, const Arrays& arr,
                                     const WriteSlice& s, int tag_base) {
  const auto& ts = layout.tensors;
  std::vector<uint64_t> digests(ts.size(), 0);
  if (!team.collective()) {
    for (size_t i = 0; i < ts.size(); ++i) {
      digests[i] = xxh3_64(arr.base + (ts[i].offset - s.begin), ts[i].numel * sizeof(float));
    }
    return digests;
  }
  Communicator& comm = *team.comm();
  const int rank = comm.rank();
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t t0 = ts[i].offset, t1 = ts[i].offset + ts[i].numel;
    const size_t a = std::max(t0, s.begin), b = std::min(t1, s.end);
    if (a >= b) continue;
    Xxh3Stream h;
    // Tags stay below 32767, the smallest MPI_TAG_UB the standard allows.
    const int tag = tag_base + static_cast<int>(i % 10000);
    // The previous rank holds the tensor's earlier elements when this piece does not start it.
    if (a > t0) {
      std::vector<unsigned char> received(Xxh3Stream::state_bytes());
      comm.recv(received.data(), received.size(), rank - 1, tag);
      h.adopt(received.data());
    }
    h.update(arr.base + (a - s.begin), (b - a) * sizeof(float));
    if (b < t1) {
      comm.send(h.state(), Xxh3Stream::state_bytes(), rank + 1, tag);
    } else {
      digests[i] = h.digest();
    }
  }
  // Exactly one rank holds each digest; the others contribute zero bits.
  comm.allreduce_or(digests.data(), digests.size());
  return digests;
}

#endif

// Creation properties of a group or dataset without HDF5's object timestamps, so two saves of
// the same state are the same bytes (reproducible checkpoints).
Id untimed_plist(hid_t cls) {
  Id plist = h5::check_plist(H5Pcreate(cls), "H5Pcreate");
  check(H5Pset_obj_track_times(plist.get(), false), "H5Pset_obj_track_times");
  return plist;
}

Id make_group(hid_t parent, const char* name) {
  Id gcpl = untimed_plist(H5P_GROUP_CREATE);
  // Tensors are listed in model order (h5py's keys() and our reader follow creation order).
  check(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        "H5Pset_link_creation_order");
  return h5::check_group(H5Gcreate2(parent, name, H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                         std::string("creating group ") + name);
}

// A float32 tensor dataset of `shape` at `name` (creation properties `dcpl`), and its file space.
struct TensorDataset {
  Id space, dset;
};
TensorDataset create_f32_dataset(hid_t f, const std::string& name,
                                 const std::vector<hsize_t>& shape, hid_t dcpl) {
  TensorDataset out;
  out.space = h5::check_space(
      H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), "H5Screate_simple");
  out.dset = h5::check_dataset(
      H5Dcreate2(f, name.c_str(), H5T_IEEE_F32LE, out.space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "creating dataset " + name);
  return out;
}

// A 1-D dataset written whole by rank 0 (others select nothing).
void write_small(Team& team, hid_t file, hid_t xfer, const char* name, hid_t file_type,
                 hid_t mem_type, const void* data, size_t n, size_t elem_bytes) {
  const hsize_t dims[1] = {static_cast<hsize_t>(n)};
  Id space = h5::check_space(H5Screate_simple(1, dims, nullptr), "H5Screate_simple");
  Id dcpl = untimed_plist(H5P_DATASET_CREATE);
  Id dset = h5::check_dataset(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      std::string("creating dataset ") + name);
  Id mspace = h5::check_space(H5Screate_simple(1, dims, nullptr), "H5Screate_simple");
  if (team.rank() != 0 || n == 0) {
    check(H5Sselect_none(space.get()), "H5Sselect_none");
    check(H5Sselect_none(mspace.get()), "H5Sselect_none");
  }
  check(H5Dwrite(dset.get(), mem_type, mspace.get(), space.get(), xfer, data),
        std::string("writing dataset ") + name);
  h5::write_attr_u64(dset.get(), ckpt_format::kChecksumAttr, xxh3_64(data, n * elem_bytes));
}

void write_attribute(hid_t obj, const Attribute& a) {
  if (const auto* i = std::get_if<int64_t>(&a.value)) {
    h5::write_attr_i64(obj, a.name.c_str(), *i);
  } else if (const auto* d = std::get_if<double>(&a.value)) {
    h5::write_attr_f64(obj, a.name.c_str(), *d);
  } else {
    h5::write_attr_str(obj, a.name.c_str(), std::get<std::string>(a.value));
  }
}

// Root attributes, /model, the small datasets and the (empty) tensor groups.
void write_metadata(Team& team, hid_t f, hid_t xfer, const ckpt_format::Meta& meta) {
  const TrainProgress& p = meta.progress;
  h5::write_attr_i64(f, "format_version", ckpt_format::kVersion);
  h5::write_attr_i64(f, "step", p.step);
  h5::write_attr_i64(f, "tokens_seen", p.tokens_seen);
  h5::write_attr_f64(f, "lr", p.lr);
  h5::write_attr_i64(f, "adam_step", meta.adam_step);
  h5::write_attr_i64(f, "world_size", p.world_size);
  h5::write_attr_u64(f, "loader_seed", p.loader.seed);
  h5::write_attr_u64(f, "loader_epoch", p.loader.epoch);
  h5::write_attr_u64(f, "loader_cursor", p.loader.cursor);
  h5::write_attr_f64(f, "created_unix", meta.created_unix);
  h5::write_attr_str(f, "created", ckpt_format::iso_time(meta.created_unix));
  h5::write_attr_u64(f, ckpt_format::kMetaChecksumAttr,
                     ckpt_format::meta_checksum(meta, ckpt_format::kVersion));
  Id model = h5::check_group(
      H5Gcreate2(f, "model", H5P_DEFAULT, untimed_plist(H5P_GROUP_CREATE).get(), H5P_DEFAULT),
      "creating group model");
  for (const Attribute& a : meta.model) write_attribute(model.get(), a);
  write_small(team, f, xfer, "config_json", H5T_STD_U8LE, H5T_NATIVE_UINT8, p.config_json.data(),
              p.config_json.size(), 1);
  write_small(team, f, xfer, "rng_state", H5T_STD_U64LE, H5T_NATIVE_UINT64, p.rng_state.data(),
              p.rng_state.size(), 8);
  make_group(f, "params");
  Id adam = h5::check_group(
      H5Gcreate2(f, "adam", H5P_DEFAULT, untimed_plist(H5P_GROUP_CREATE).get(), H5P_DEFAULT),
      "creating group adam");
  make_group(adam.get(), "m");
  make_group(adam.get(), "v");
}

#if RAILYARD_PARALLEL_HDF5
void write_all(Team& team, Id file, const StoredTensors& layout, const ckpt_format::Meta& meta,
               const WriteSlice& s) {
  Id xfer = h5::check_plist(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate(xfer)");
#if RAILYARD_PARALLEL_HDF5
  if (team.collective()) {
    check(H5Pset_dxpl_mpio(xfer.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
  }
#endif
  const hid_t f = file.get();
  team.phase([&] { write_metadata(team, f, xfer.get(), meta); });

  Id dcpl = untimed_plist(H5P_DATASET_CREATE);
  // Every element is written, so HDF5 need not write fill values first.
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
  const Arrays arrays[3] = {{"params", s.params + s.begin}, {"adam/m", s.m}, {"adam/v", s.v}};
  int tag_base = 0;
  for (const Arrays& arr : arrays) {
    std::vector<uint64_t> digests;
    team.phase([&] { digests = tensor_digests(team, layout, arr, s, tag_base); });
    tag_base += 10000;
    for (size_t i = 0; i < layout.tensors.size(); ++i) {
      const StoredTensor& t = layout.tensors[i];
      const std::string name = std::string(arr.group) + "/" + t.name;
      team.phase([&] {
        const std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
        auto [space, dset] = create_f32_dataset(f, name, shape, dcpl.get());
        const size_t a = std::max(t.offset, s.begin);
        const size_t b = std::min(t.offset + t.numel, s.end);
        const hsize_t n = b > a ? b - a : 0;
        const hsize_t mdims[1] = {std::max<hsize_t>(n, 1)};
        Id mspace = h5::check_space(H5Screate_simple(1, mdims, nullptr), "H5Screate_simple");
        if (n == 0) {
          check(H5Sselect_none(mspace.get()), "H5Sselect_none");
          check(H5Sselect_none(space.get()), "H5Sselect_none");
        } else {
          select_range(space.get(), shape, a - t.offset, b - t.offset);
        }
        const float* src = n == 0 ? arr.base : arr.base + (a - s.begin);
        check(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, mspace.get(), space.get(), xfer.get(), src),
              "writing dataset " + name);
        h5::write_attr_u64(dset.get(), ckpt_format::kChecksumAttr, digests[i]);
        check(dset.close(), "closing dataset " + name);
      });
    }
  }
  // Closing flushes the metadata: a failure here (disk full) is a failed save.
  team.phase([&] { check(file.close(), "closing (flushing) the checkpoint file"); });
}

#endif

}  // namespace

#if RAILYARD_PARALLEL_HDF5
void write_checkpoint_collective(Communicator& comm, const std::string& path,
                                 const StoredTensors& layout, const ckpt_format::Meta& meta,
                                 const WriteSlice& slice) {
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Team team(&comm);
  Id file;
  team.phase([&] {
    Id fapl = h5::check_plist(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate(fapl)");
    check(H5Pset_fapl_mpio(fapl.get(), comm.native(), MPI_INFO_NULL), "H5Pset_fapl_mpio");
    file = h5::check_file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
                          "cannot create HDF5 file " + path);
  });
  write_all(team, std::move(file), layout, meta, slice);
}
#endif

TensorOffsets write_checkpoint_skeleton(const std::string& path, const StoredTensors& layout,
                                        const ckpt_format::Meta& meta) {
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Id fapl = h5::check_plist(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate(fapl)");
  // Large datasets start on a 4096-byte boundary, so their bytes can be written with O_DIRECT.
  check(H5Pset_alignment(fapl.get(), kAlignThreshold, DirectFile::kAlign), "H5Pset_alignment");
  Id file = h5::check_file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
                           "cannot create HDF5 file " + path);
  const hid_t f = file.get();
  Team team(nullptr);
  write_metadata(team, f, H5P_DEFAULT, meta);
  Id dcpl = untimed_plist(H5P_DATASET_CREATE);
  check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout");
  // Space now, so each dataset has its file offset; never filled, the caller writes every byte.
  check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time");
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
  TensorOffsets out;
  for (size_t a = 0; a < ckpt_format::kTensorGroups.size(); ++a) {
    for (const StoredTensor& t : layout.tensors) {
      const std::string name = std::string(ckpt_format::kTensorGroups[a]) + "/" + t.name;
      const std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
      const auto [space, dset] = create_f32_dataset(f, name, shape, dcpl.get());
      const haddr_t at = H5Dget_offset(dset.get());
      if (at == HADDR_UNDEF) throw std::runtime_error("no file space for dataset " + name);
      out.offset[a].push_back(static_cast<uint64_t>(at));
      // A placeholder of the same size; write_tensor_checksums sets it once the bytes are known.
      h5::write_attr_u64(dset.get(), ckpt_format::kChecksumAttr, 0);
    }
  }
  check(file.close(), "closing (flushing) the checkpoint file");
  return out;
}

void write_tensor_checksums(const std::string& path, const StoredTensors& layout,
                            const std::array<std::vector<uint64_t>, 3>& digests) {
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Id file = h5::check_file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT),
                           "cannot reopen HDF5 file " + path);
  for (size_t a = 0; a < digests.size(); ++a) {
    for (size_t i = 0; i < layout.tensors.size(); ++i) {
      const std::string name =
          std::string(ckpt_format::kTensorGroups[a]) + "/" + layout.tensors[i].name;
      Id dset = h5::check_dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT),
                                  "opening dataset " + name);
      Id attr = h5::check_attr(H5Aopen(dset.get(), ckpt_format::kChecksumAttr, H5P_DEFAULT),
                               "opening the checksum of " + name);
      check(H5Awrite(attr.get(), H5T_NATIVE_UINT64, &digests[a][i]),
            "writing the checksum of " + name);
    }
  }
  check(file.close(), "closing (flushing) the checkpoint file");
}

}  // namespace railyard
