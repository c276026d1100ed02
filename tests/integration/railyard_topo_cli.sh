#!/usr/bin/env bash
# railyard-topo on a small two-socket node (one GPU and one NIC behind a PCIe switch per
# socket, NIC names in the opposite order of the GPUs): the topology, the JSON plan, and exit
# status 2 with the option named for bad command lines. Also plans each shared real-node
# topology when ../shared/topologies is present.
set -euo pipefail

topo="${RAILYARD_BUILD_DIR:?}/plugin/railyard-topo"
[[ -x "$topo" ]] || { echo "skip: $topo not built"; exit 77; }
tmp="${RAILYARD_TEST_TMP:?}"
mkdir -p "$tmp"
xml="$tmp/two-socket.xml"

sets() {  # cpuset nodeset
  echo "cpuset=\"$1\" complete_cpuset=\"$1\" allowed_cpuset=\"$1\" nodeset=\"$2\" complete_nodeset=\"$2\" allowed_nodeset=\"$2\""
}
pus() {  # first last nodeset
  for ((c = $1; c <= $2; c++)); do
    printf '<object type="PU" os_index="%d" %s/>\n' "$c" "$(sets "$(printf '0x%08x' $((1 << c)))" "$3")"
  done
}
socket() {  # index cpuset nodeset first_pu bus nic
  local s=$1 b=$5
  cat <<XML
<object type="Package" os_index="$s" $(sets "$2" "$3")>
<object type="NUMANode" os_index="$s" $(sets "$2" "$3") local_memory="68719476736"/>
$(pus "$4" $(($4 + 3)) "$3")
<object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[$((b))-$((b + 3))]">
 <object type="Bridge" bridge_type="1-1" depth="1" bridge_pci="0000:[$((b + 1))-$((b + 3))]" pci_busid="0000:$(printf %02x "$b"):01.0" pci_type="0604 [8086:2030] [0000:0000] 00">
  <object type="Bridge" bridge_type="1-1" depth="2" bridge_pci="0000:[$((b + 2))-$((b + 3))]" pci_busid="0000:$(printf %02x $((b + 1))):00.0" pci_type="0604 [10b5:c010] [0000:0000] 00">
   <object type="Bridge" bridge_type="1-1" depth="3" bridge_pci="0000:[$((b + 2))-$((b + 2))]" pci_busid="0000:$(printf %02x $((b + 2))):00.0" pci_type="0604 [10b5:c010] [0000:0000] 00">
    <object type="PCIDev" pci_busid="0000:$(printf %02x $((b + 3))):00.0" pci_type="0302 [10de:2330] [10de:16c1] a1">
     <object type="OSDev" name="cuda$s" subtype="CUDA" osdev_type="5"><info name="GPUModel" value="NVIDIA H100 80GB HBM3"/></object>
    </object>
   </object>
   <object type="Bridge" bridge_type="1-1" depth="3" bridge_pci="0000:[$((b + 3))-$((b + 3))]" pci_busid="0000:$(printf %02x $((b + 2))):01.0" pci_type="0604 [10b5:c010] [0000:0000] 00">
    <object type="PCIDev" pci_busid="0000:$(printf %02x $((b + 3))):01.0" pci_type="0207 [15b3:101e] [15b3:0023] 00">
     <object type="OSDev" name="ib$6" osdev_type="2"><info name="Port" value="1"/></object>
     <object type="OSDev" name="mlx5_$6" osdev_type="3"><info name="Port1State" value="4"/></object>
    </object>
   </object>
  </object>
 </object>
</object>
</object>
XML
}
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<!DOCTYPE topology SYSTEM "hwloc2.dtd">'
  echo '<topology version="2.0">'
  echo "<object type=\"Machine\" os_index=\"0\" $(sets 0x000000ff 0x00000003)>"
  socket 0 0x0000000f 0x00000001 0 0 1
  socket 1 0x000000f0 0x00000002 4 16 0
  echo '</object></topology>'
} > "$xml"

"$topo" show --topology "$xml" > "$tmp/show.txt"
grep -q 'GPU-by-NIC distance' "$tmp/show.txt"
grep -Eq '^GPU0 +SYS +PIX$' "$tmp/show.txt" || { cat "$tmp/show.txt"; exit 1; }

"$topo" plan --ntasks 2 --topology "$xml" --node n1 --json > "$tmp/plan.json"
"$topo" plan --ntasks 2 --topology "$xml" --task-cpus '4-7;0-3' --visible isolate --json \
  > "$tmp/swapped.json"
python3 - "$tmp/plan.json" "$tmp/swapped.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
assert plan["node"] == "n1", plan["node"]
t0, t1 = plan["tasks"]
assert t0["local_rank"] == 0 and t1["local_rank"] == 1
assert t0["gpu_pci"] == ["0000:03:00.0"], t0["gpu_pci"]
assert t1["gpu_pci"] == ["0000:13:00.0"], t1["gpu_pci"]
assert t0["nics"] == ["mlx5_1"] and t1["nics"] == ["mlx5_0"], (t0["nics"], t1["nics"])
assert t0["cpus"] == "0-3" and t1["cpus"] == "4-7", (t0["cpus"], t1["cpus"])
assert t0["env"]["CUDA_VISIBLE_DEVICES"] == "0,1" and t1["env"]["CUDA_VISIBLE_DEVICES"] == "1,0"
assert t1["env"]["NCCL_IB_HCA"] == "=mlx5_0:1", t1["env"]
assert t1["env"]["UCX_NET_DEVICES"] == "mlx5_0:1"
assert t1["env"]["RAILYARD_LOCAL_RANK"] == "1"
swapped = json.load(open(sys.argv[2]))
s0, s1 = swapped["tasks"]
assert s0["gpu_pci"] == ["0000:13:00.0"] and s0["cpus"] == "4-7", s0
assert s0["env"]["CUDA_VISIBLE_DEVICES"] == "1", s0["env"]
assert s1["nics"] == ["mlx5_1"], s1
PY

# A GPU whose PCI bus hwloc knows no locality for (a VM; the host bridge hangs off the Machine):
# its NUMA node is unknown ("NUMA ?"), not the machine's only one.
vm="$tmp/vm.xml"
cat > "$vm" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
<object type="Machine" os_index="0" $(sets 0x0000000f 0x00000001)>
<object type="Package" os_index="0" $(sets 0x0000000f 0x00000001)>
<object type="NUMANode" os_index="0" $(sets 0x0000000f 0x00000001) local_memory="68719476736"/>
$(pus 0 3 0x00000001)
</object>
<object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-00]">
 <object type="PCIDev" pci_busid="0000:00:06.0" pci_type="0302 [10de:2335] [10de:18be] a1"/>
</object>
</object></topology>
XML
"$topo" show --topology "$vm" > "$tmp/vm.txt"
grep -Eq '^ *0 +0000:00:06.0 .*NUMA \? +cpus 0-3' "$tmp/vm.txt" || { cat "$tmp/vm.txt"; exit 1; }

expect_usage_error() {  # expected-text args...
  local want=$1 rc=0
  shift
  "$topo" "$@" > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
  if [[ $rc -ne 2 ]] || ! grep -qF -- "$want" "$tmp/err.txt"; then
    echo "railyard-topo $* exited $rc (want 2) with:"; cat "$tmp/err.txt"; exit 1
  fi
}
expect_usage_error "'--frobnicate'" plan --ntasks 2 --topology "$xml" --frobnicate
expect_usage_error "--gpu-choice: invalid GPU choice 'nearest'" plan -n 2 --topology "$xml" --gpu-choice nearest
expect_usage_error "--ntasks is required" plan --topology "$xml"
expect_usage_error "--task-cpus" plan -n 2 --topology "$xml" --task-cpus '0-3;x'
expect_usage_error "unknown command 'frob'" frob

rc=0
"$topo" show --topology "$tmp/missing.xml" 2> "$tmp/err.txt" || rc=$?
[[ $rc -eq 1 ]] && grep -qF "$tmp/missing.xml" "$tmp/err.txt"

shared="${RAILYARD_SOURCE_DIR:?}/../shared/topologies"
for real in "$shared"/*.xml; do
  [[ -e "$real" ]] || continue
  "$topo" plan --ntasks 4 --topology "$real" --json \
    | python3 -c 'import json,sys; p=json.load(sys.stdin); assert len(p["tasks"]) == 4 and all(t["cpus"] for t in p["tasks"]), p'
done
echo "railyard-topo CLI: ok"
