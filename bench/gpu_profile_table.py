#!/usr/bin/env python3
"""Per-kernel device time from an ncu --csv log (metric gpu__time_duration.sum), grouped by
kernel name, largest first, as a share of the total: the step-time breakdown in bench/NOTES.md."""
import collections
import csv
import sys


def main():
    rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
    head, body = rows[0], rows[1:]
    name_i, unit_i, val_i = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
    total = collections.Counter()
    count = collections.Counter()
    for r in body:
        v = float(r[val_i].replace(",", ""))
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
                 "msecond": 1.0, "s": 1e3, "second": 1e3}[r[unit_i]]
        name = r[name_i].split("(")[0][:70]
        total[name] += v * scale
        count[name] += 1
    s = sum(total.values())
    print(f"{'kernel':70s} {'calls':>6s} {'ms':>9s} {'share':>6s}")
    for name, ms in total.most_common(25):
        print(f"{name:70s} {count[name]:6d} {ms:9.2f} {ms / s:6.1%}")
    print(f"{'total (' + str(sum(count.values())) + ' kernels)':70s} {'':6s} {s:9.2f}")


if __name__ == "__main__":
    main()
