# Shared by tests/slurm/plugin_*.sh: the cluster, the plugin line, and a synthetic topology.
# Sourced, not run (the folder's *.sh glob does not see lib/).

plugin_test_setup() { # test name
  [[ -n ${RAILYARD_CLUSTER_DIR:-} && -f $RAILYARD_CLUSTER_DIR/env.sh ]] || {
    echo "SKIP: no local cluster (RAILYARD_CLUSTER_DIR/env.sh)"
    exit 77
  }
  # shellcheck disable=SC1091
  source "$RAILYARD_CLUSTER_DIR/env.sh"
  plugstack="$RAILYARD_CLUSTER_DIR/etc/plugstack.conf"
  grep -q 'spank_railyard.so' "$plugstack" 2>/dev/null || {
    echo "SKIP: the cluster runs without spank_railyard.so"
    exit 77
  }
  scratch="${RAILYARD_TEST_TMP:-/tmp}/$1"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  cp "$plugstack" "$scratch/plugstack.conf.orig"
  trap plugin_test_restore EXIT
  cluster="$RAILYARD_SOURCE_DIR/slurm/local-cluster"
  ncpu=$(nproc)
}

plugin_test_restore() {
  cp "$scratch/plugstack.conf.orig" "$plugstack"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

set_plugstack() { # args...
  "$cluster" set-plugstack --state-dir "$RAILYARD_CLUSTER_DIR" "$@" >/dev/null
}

node_state() { sinfo -h -n node1 -o %T; }

# Fails unless node1 is idle (a plugin error must fail the step, never drain the node).
expect_node_idle() {
  local state
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    state=$(node_state)
    [[ $state == idle ]] && return 0
    sleep 0.5
  done
  fail "node1 is '$state' after a failed step, expected idle"
}

# A DGX-like node for the cluster's 4 fake GPUs: 2 sockets, each GPU and its NIC behind one
# PCIe switch, NICs numbered out of GPU order (GPU i has mlx5_${nic_of_gpu[i]}). The cpus are
# the machine's own, split between the sockets, and socket 1 claims 4 cpus the machine does
# not have, so a plan that trusted the XML alone would leave the allocation.
nic_of_gpu=(2 0 3 1)
write_dgx_like_xml() { # path
  python3 - "$1" "$ncpu" "${nic_of_gpu[@]}" <<'PY'
import sys

path, ncpu = sys.argv[1], int(sys.argv[2])
nic_of_gpu = [int(x) for x in sys.argv[3:]]
half = max(1, ncpu // 2)
sockets = [list(range(0, half)), list(range(half, max(ncpu, half + 1) + 4))]


def bitmap(cpus):
    words = max(cpus) // 32 + 1
    out = []
    for w in reversed(range(words)):
        bits = sum(1 << (c - 32 * w) for c in cpus if 32 * w <= c < 32 * w + 32)
        out.append("0x%08x" % bits)
    return ",".join(out)


def sets(cpus, nodes):
    c, n = bitmap(cpus), bitmap(nodes)
    return (f' cpuset="{c}" complete_cpuset="{c}" allowed_cpuset="{c}"'
            f' nodeset="{n}" complete_nodeset="{n}" allowed_nodeset="{n}"')


bus = 0
gpu = 0
def pair():
    """A PCIe switch with a GPU and a NIC behind it."""
    global bus, gpu
    up = bus = bus + 1
    gpu_bus = bus = bus + 1
    nic_bus = bus = bus + 1
    nic = nic_of_gpu[gpu]
    xml = (f'<object type="Bridge" bridge_type="1-1" depth="1" bridge_pci="0000:[{up:02x}-{nic_bus:02x}]"'
           f' pci_busid="0000:{up - 1:02x}:00.0" pci_type="0604 [10b5:c010] [10b5:a064] 00">\n'
           f'<object type="Bridge" bridge_type="1-1" depth="2" bridge_pci="0000:[{gpu_bus:02x}-{gpu_bus:02x}]"'
           f' pci_busid="0000:{up:02x}:00.0" pci_type="0604 [10b5:c010] [10b5:a064] 00">\n'
           f'<object type="PCIDev" pci_busid="0000:{gpu_bus:02x}:00.0" pci_type="0302 [10de:2330] [0000:0000] 00">\n'
           f'<object type="OSDev" name="cuda{gpu}" subtype="CUDA" osdev_type="5"/>\n</object>\n</object>\n'
           f'<object type="Bridge" bridge_type="1-1" depth="2" bridge_pci="0000:[{nic_bus:02x}-{nic_bus:02x}]"'
           f' pci_busid="0000:{up:02x}:01.0" pci_type="0604 [10b5:c010] [10b5:a064] 00">\n'
           f'<object type="PCIDev" pci_busid="0000:{nic_bus:02x}:00.0" pci_type="0207 [15b3:101e] [0000:0000] 00">\n'
           f'<object type="OSDev" name="ib{nic}" osdev_type="2"><info name="Port" value="1"/></object>\n'
           f'<object type="OSDev" name="mlx5_{nic}" osdev_type="3"><info name="Port1State" value="4"/></object>\n'
           f'</object>\n</object>\n</object>\n')
    gpu += 1
    return xml


all_cpus = sorted(set(sockets[0] + sockets[1]))
out = ['<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
       '<topology version="2.0">\n', f'<object type="Machine" os_index="0"{sets(all_cpus, [0, 1])}>\n']
for s, cpus in enumerate(sockets):
    out.append(f'<object type="Package" os_index="{s}"{sets(cpus, [s])}>\n')
    out.append(f'<object type="NUMANode" os_index="{s}"{sets(cpus, [s])} local_memory="68719476736"/>\n')
    for c in cpus:
        out.append(f'<object type="PU" os_index="{c}"{sets([c], [s])}/>\n')
    out.append(f'<object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[{bus + 1:02x}-{bus + 6:02x}]">\n')
    out.append(pair())
    out.append(pair())
    out.append('</object>\n</object>\n')
out.append('</object>\n</topology>\n')
open(path, "w").write("".join(out))
PY
}

# The cpu list of socket S in that XML, as the planner writes it.
socket_cpus() { # socket
  local half=$((ncpu / 2 > 0 ? ncpu / 2 : 1))
  if (($1 == 0)); then
    ((half == 1)) && echo 0 || echo "0-$((half - 1))"
  else
    local last=$((ncpu > half + 1 ? ncpu : half + 1))
    echo "$half-$((last + 3))"
  fi
}

# The intersection of two cpu list strings, as a list string ("" when empty).
cpu_intersect() { # list list
  python3 - "$1" "$2" <<'PY'
import sys

def expand(text):
    out = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out

cpus = sorted(expand(sys.argv[1]) & expand(sys.argv[2]))
ranges, start = [], None
for i, c in enumerate(cpus):
    if start is None:
        start = c
    if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
        ranges.append(str(start) if start == c else f"{start}-{c}")
        start = None
print(",".join(ranges))
PY
}

# What one task sees, as one '|'-separated line: local id, CUDA_VISIBLE_DEVICES, NCCL_IB_HCA,
# UCX_NET_DEVICES, RAILYARD_CPUS, RAILYARD_LOCAL_RANK, Cpus_allowed_list.
# shellcheck disable=SC2016,SC2034  # expanded in the task; used by the sourcing tests
task_probe='echo "probe|$SLURM_LOCALID|${CUDA_VISIBLE_DEVICES-unset}|${NCCL_IB_HCA-unset}|${UCX_NET_DEVICES-unset}|${RAILYARD_CPUS-unset}|${RAILYARD_LOCAL_RANK-unset}|$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
