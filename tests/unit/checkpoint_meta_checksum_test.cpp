// The metadata checksum of format version 1 is part of the file format: files written by any
// earlier railyard must still verify. A fixed metadata record against its checksum, computed by
// the code that wrote the first version-1 files (before the /model attributes were generic).
#include <gtest/gtest.h>

#include "../../runtime/ckpt/checkpoint_format.hpp"
#include "railyard/gpt_checkpoint.hpp"

using namespace railyard;

namespace {

ckpt_format::Meta gpt2_small_meta() {
  GptConfig c;
  c.vocab = 50257;
  c.padded_vocab = 50304;
  c.max_seq = 1024;
  c.layers = 12;
  c.heads = 12;
  c.dim = 768;
  ckpt_format::Meta m;
  m.model = gpt_attributes(c);
  m.progress.step = 1234;
  m.progress.tokens_seen = 5054464;
  m.progress.lr = 3e-4;
  m.progress.world_size = 8;
  m.progress.loader = {42, 3, 99};
  m.adam_step = 1234;
  return m;
}

}  // namespace

TEST(CheckpointMetaChecksum, MatchesTheValueVersionOneFilesCarry) {
  EXPECT_EQ(ckpt_format::meta_checksum(gpt2_small_meta(), 1), 0x8e3f6b192b06c857ULL);
}

TEST(CheckpointMetaChecksum, CoversEveryModelAttributeInOrder) {
  const ckpt_format::Meta base = gpt2_small_meta();
  const uint64_t want = ckpt_format::meta_checksum(base, 1);
  for (size_t i = 0; i < base.model.size(); ++i) {
    ckpt_format::Meta m = base;
    std::get<int64_t>(m.model[i].value) += int64_t{1} << 40;
    EXPECT_NE(ckpt_format::meta_checksum(m, 1), want) << m.model[i].name;
  }
  ckpt_format::Meta swapped = base;
  std::swap(swapped.model[3].value, swapped.model[4].value);  // layers 12, heads 12: same bytes
  EXPECT_EQ(ckpt_format::meta_checksum(swapped, 1), want);
  std::swap(swapped.model[0].value, swapped.model[5].value);
  EXPECT_NE(ckpt_format::meta_checksum(swapped, 1), want);
}

TEST(CheckpointMetaChecksum, StringAndFloatAttributesCountTheirBytes) {
  ckpt_format::Meta a = gpt2_small_meta();
  ckpt_format::Meta b = a;
  a.model.push_back({"note", std::string("ab")});
  b.model.push_back({"note", std::string("a")});
  b.model.push_back({"more", std::string("b")});
  EXPECT_NE(ckpt_format::meta_checksum(a, 1), ckpt_format::meta_checksum(b, 1));
  ckpt_format::Meta c = gpt2_small_meta();
  c.model.push_back({"scale", 0.5});
  ckpt_format::Meta d = gpt2_small_meta();
  d.model.push_back({"scale", 0.25});
  EXPECT_NE(ckpt_format::meta_checksum(c, 1), ckpt_format::meta_checksum(d, 1));
}
