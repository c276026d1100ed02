#!/bin/sh
# railyard-data: text, synthetic, from-bin and inspect produce token files railyard-train reads,
# with the documented contents; bad arguments exit 2.
set -eu
tool="$RAILYARD_BUILD_DIR/runtime/tools/railyard-data"
tmp="$RAILYARD_TEST_TMP"
rm -rf "$tmp" && mkdir -p "$tmp" && cd "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }

printf 'hello' > a.txt
printf ' world' > b.txt
"$tool" text a.txt b.txt -o text.h5
/usr/bin/python3 - <<'PY'
import h5py
with h5py.File("text.h5") as f:
    t = f["tokens"]
    assert t.dtype == "uint16", t.dtype
    assert bytes(t[:].astype("uint8")) == b"hello world", t[:]
    assert int(t.attrs["vocab_size"]) == 256
PY

"$tool" synthetic --tokens 1000 --vocab 70000 --seed 3 -o syn.h5
"$tool" synthetic --tokens 1000 --vocab 70000 --seed 3 -o syn2.h5
"$tool" inspect syn.h5 > syn.txt
grep -q "tokens: 1000" syn.txt || fail "inspect: $(cat syn.txt)"
grep -q "uint32" syn.txt || fail "a vocab above 65536 needs uint32: $(cat syn.txt)"
grep -q "vocab_size: 70000" syn.txt || fail "inspect: $(cat syn.txt)"
/usr/bin/python3 - <<'PY'
import h5py
a, b = h5py.File("syn.h5")["tokens"][:], h5py.File("syn2.h5")["tokens"][:]
assert (a == b).all(), "synthetic data must be a function of the seed"
assert a.max() < 70000 and len(set(a.tolist())) > 900
PY

# An llm.c shard: 256 int32 header (magic, version 1, count), then uint16 tokens.
/usr/bin/python3 - <<'PY'
import struct
with open("shard.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 5, *([0] * 253)))
    f.write(struct.pack("<5H", 50256, 1, 2, 3, 4))
PY
"$tool" from-bin shard.bin shard.bin -o bin.h5
/usr/bin/python3 - <<'PY'
import h5py
with h5py.File("bin.h5") as f:
    assert f["tokens"][:].tolist() == [50256, 1, 2, 3, 4] * 2
    assert int(f["tokens"].attrs["vocab_size"]) == 50257
PY
"$tool" inspect shard.bin | grep -q "llmc-bin" || fail "inspect of a .bin shard"

expect2() {
  set +e
  "$tool" "$@" > out.txt 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "railyard-data $*: exit $rc, expected 2: $(cat out.txt)"
}
expect2
expect2 frobnicate
expect2 text a.txt
expect2 synthetic --tokens 10 -o x.h5
expect2 synthetic --tokens -5 --vocab 10 -o x.h5
expect2 text missing.txt -o x.h5
grep -q "missing.txt" out.txt || fail "the message must name the file: $(cat out.txt)"
expect2 from-bin text.h5 -o x.h5
# The tool's own words, not railyard-train's options.
expect2 from-bin missing.bin -o x.h5
grep -q "'missing.bin': does not exist (no such file)" out.txt || fail "from-bin of a missing shard: $(cat out.txt)"
! grep -q -- "--data" out.txt || fail "from-bin names railyard-train's --data: $(cat out.txt)"
: > empty.bin
expect2 inspect empty.bin
grep -q "empty" out.txt || fail "an empty file must say so: $(cat out.txt)"
echo ok
