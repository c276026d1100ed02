#!/usr/bin/env python3
"""Where the time of a training step goes on the GPU, from the CUPTI timeline of a normal run
(bench/step_timeline_cupti.cpp: every kernel, memcpy and memset with GPU start and end, and the
CUDA runtime calls, on one clock). Cut into steps from one AdamW update to the next (as
bench/gpu_profile_table.py cuts ncu's list), the first --skip steps left out as warm-up. Per
step: wall from the end of the previous step's AdamW to the end of its own (the step's period
on the GPU, so the idle time before its first kernel is counted too), busy time (the union of the
intervals, since kernels may overlap), idle time (wall - busy), the gaps between activities
(count, total, p50, p90, max), the largest gaps with the kernels before and after and the runtime
calls in flight meanwhile, and the busy time per phase (gpu_profile_table's classification).

usage: step_timeline.py TIMELINE.json [--skip N] [--top N] [--log-json RUN.jsonl] [--json OUT]
Prints a table; --json writes the figures (bench/results/step-timeline.json)."""
import argparse
import collections
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_profile_table import phase  # noqa: E402  (the one phase classification)

DEVICE_KINDS = ("kernel", "memcpy", "memset")


class TimelineError(Exception):
    pass


def load(path):
    """The records of a timeline file, checked: (device activities by start, runtime calls by
    start, dropped record count)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise TimelineError(f"{path}: cannot read the timeline ({e}); run the timeline stage "
                            "(bash bench/gpu_bench.sh env build timeline)")
    recs = doc.get("records") if isinstance(doc, dict) else None
    if not isinstance(recs, list):
        raise TimelineError(f"{path}: no 'records' list: not a step_timeline_cupti output")
    dev, api = [], []
    for i, r in enumerate(recs):
        try:
            item = (int(r["start"]), int(r["end"]), str(r["name"]), str(r["kind"]))
        except (KeyError, TypeError, ValueError):
            raise TimelineError(f"{path}: record {i} lacks start, end, name or kind: {r!r}")
        if item[1] < item[0]:
            raise TimelineError(f"{path}: record {i} ({item[2]}) ends at {item[1]} before its "
                                f"start {item[0]}")
        (dev if item[3] in DEVICE_KINDS else api).append(item)
    dev.sort()
    api.sort()
    return dev, api, int(doc.get("dropped", 0))


def cut_steps(dev):
    """Whole steps: the activities after one AdamW kernel up to and including the next, led by
    a zero-length mark at the end of the first AdamW, so that a step's wall is its period on the
    GPU and the idle time before its first kernel counts as a gap of that step. Activities that
    started while the first AdamW ran (copies on other streams) count from its end: the AdamW
    kept the GPU busy until then."""
    marks = [i for i, a in enumerate(dev) if "adamw" in a[2].lower()]
    steps = []
    for a, b in zip(marks, marks[1:]):
        end, name = dev[a][1], dev[a][2]
        acts = [(max(s, end), max(e, end)) + tuple(rest) for s, e, *rest in dev[a + 1:b + 1]]
        steps.append(sorted([(end, end, name, "mark")] + acts))
    return steps


def busy_and_holes(acts):
    """Union of the [start, end) intervals of acts (sorted by start): (busy ns, holes), each hole
    (start, end, name of the activity ending last before it, name of the one starting after)."""
    busy, holes = 0, []
    cur_start, cur_end, cur_name = acts[0][0], acts[0][1], acts[0][2]
    for s, e, name, _ in acts[1:]:
        if s > cur_end:
            busy += cur_end - cur_start
            holes.append((cur_end, s, cur_name, name))
            cur_start, cur_end, cur_name = s, e, name
        elif e >= cur_end:
            cur_end, cur_name = e, name
    busy += cur_end - cur_start
    return busy, holes


def percentile(sorted_values, p):
    """Nearest rank (0 for none)."""
    if not sorted_values:
        return 0
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]


def ms(ns):
    return round(ns / 1e6, 4)


def us(ns):
    return round(ns / 1e3, 2)


def gap_stats(holes):
    sizes = sorted(e - s for s, e, _, _ in holes)
    return {"count": len(sizes), "total_us": us(sum(sizes)), "p50_us": us(percentile(sizes, 0.5)),
            "p90_us": us(percentile(sizes, 0.9)), "max_us": us(sizes[-1] if sizes else 0)}


def in_flight(api, start, end):
    """Names of the runtime calls that overlap [start, end), with their count."""
    names = collections.Counter(n for s, e, n, _ in api if s < end and e > start)
    return dict(names.most_common())


def largest_gaps(holes, api, top):
    out = []
    for s, e, before, after in sorted(holes, key=lambda h: h[0] - h[1])[:top]:
        out.append({"us": us(e - s), "after_kernel": before, "before_kernel": after,
                    "phase_after": phase(after), "runtime_calls": in_flight(api, s, e)})
    return out


def memset_figures(acts, holes, is_memset=lambda a: a[3] == "memset"):
    """Memsets in a step (the libraries issue them, not the engine): their count, busy time, the
    idle time next to them, and which kernels follow them (the library's kernel that needs it)."""
    after = collections.Counter()
    for i, a in enumerate(acts):
        if is_memset(a):
            nxt = next((b[2] for b in acts[i + 1:] if b[3] == "kernel" and not is_memset(b)),
                       "none")
            after[nxt] += 1
    names = {a[2] for a in acts if is_memset(a)}
    return {"count": sum(after.values()),
            "busy_us": us(sum(a[1] - a[0] for a in acts if is_memset(a))),
            "idle_us_next_to_them": us(sum(e - s for s, e, before, nxt in holes
                                           if before in names or nxt in names)),
            "followed_by": dict(after.most_common())}


def graph_memset_kernel(a):
    """A captured memset that the step's graphs run as a kernel (runtime/cuda/graph_memsets.cu),
    the hoisted zeroing at a graph's head included."""
    return a[3] == "kernel" and "memset_kernel(" in a[2]


def step_figures(acts, api, top):
    """One step's figures (times in ms unless named _us)."""
    wall = max(a[1] for a in acts) - acts[0][0]
    busy, holes = busy_and_holes(acts)
    phases = collections.Counter()
    for s, e, name, _ in acts:
        phases[phase(name)] += e - s
    gaps_before = collections.Counter()
    for s, e, _, after in holes:
        gaps_before[phase(after)] += e - s
    kernels = collections.defaultdict(lambda: [0, 0])  # name -> [launches, ns]
    for s, e, name, _ in acts:
        kernels[name][0] += 1
        kernels[name][1] += e - s
    return {"activities": sum(1 for a in acts if a[3] != "mark"),
            "kernels": sum(1 for a in acts if a[3] == "kernel"),
            "wall_ms": ms(wall), "busy_ms": ms(busy), "idle_ms": ms(wall - busy),
            "overlap_ms": ms(sum(a[1] - a[0] for a in acts) - busy),
            "gaps": gap_stats(holes), "largest_gaps": largest_gaps(holes, api, top),
            "phases_ms": {p: ms(ns) for p, ns in phases.most_common()},
            "gap_us_before_phase": {p: us(ns) for p, ns in gaps_before.most_common()},
            "memsets": memset_figures(acts, holes),
            "memset_kernels": memset_figures(acts, holes, graph_memset_kernel),
            "kernels_by_time": [{"name": n, "phase": phase(n), "launches": c, "total_us": us(ns)}
                                for n, (c, ns) in sorted(kernels.items(), key=lambda k: (-k[1][1], k[0]))]}


def host_step_ms(path, skip):
    """Median host-measured step time of the traced run (railyard-train --log-json) after skip."""
    rows = [json.loads(line) for line in open(path) if line.strip().startswith("{")]
    times = [r["step_ms"] for r in rows if r.get("type") == "step" and r.get("step", 0) > skip]
    return statistics.median(times) if times else None


def analyse(dev, api, skip, top):
    steps = cut_steps(dev)
    if len(steps) <= skip:
        raise TimelineError(f"{len(steps)} whole steps (AdamW to AdamW) in {len(dev)} device "
                            f"activities, {skip} skipped as warm-up: none left; run more steps "
                            "or lower --skip")
    per_step = [step_figures(acts, api, top) for acts in steps[skip:]]
    med = sorted(per_step, key=lambda s: s["wall_ms"])[(len(per_step) - 1) // 2]
    all_holes = [h for acts in steps[skip:] for h in busy_and_holes(acts)[1]]
    return {"steps": len(per_step), "skipped": skip, "median_step": med,
            "gaps_all_steps": gap_stats(all_holes),
            "per_step": [{k: v for k, v in s.items() if k not in ("largest_gaps", "kernels_by_time",
                                                                  "memsets", "memset_kernels")}
                         for s in per_step]}


def print_table(out):
    m = out["median_step"]
    print(f"{out['steps']} steps after {out['skipped']} warm-up; the median step by wall:")
    print(f"  {m['kernels']} kernels ({m['activities']} activities), wall {m['wall_ms']:.3f} ms, "
          f"busy {m['busy_ms']:.3f} ms, idle {m['idle_ms']:.3f} ms, "
          f"overlap {m['overlap_ms']:.3f} ms")
    if out.get("host_step_ms"):
        print(f"  host step time of the traced run (median): {out['host_step_ms']:.3f} ms")
    g = m["gaps"]
    print(f"  gaps: {g['count']}, total {g['total_us']:.1f} us, p50 {g['p50_us']:.2f} us, "
          f"p90 {g['p90_us']:.2f} us, max {g['max_us']:.1f} us")
    print(f"{'phase':12s} {'busy ms':>8s} {'share of wall':>14s}")
    for p, ms in m["phases_ms"].items():
        print(f"{p:12s} {ms:8.3f} {ms / m['wall_ms']:14.1%}")
    print(f"{'idle':12s} {m['idle_ms']:8.3f} {m['idle_ms'] / m['wall_ms']:14.1%}")
    print("gap time by the phase of the kernel after it (us): " + ", ".join(
        f"{p} {us:.1f}" for p, us in m["gap_us_before_phase"].items()))
    print("largest gaps (us, after -> before, runtime calls in flight):")
    for gap in m["largest_gaps"]:
        calls = ", ".join(f"{n} x{c}" for n, c in gap["runtime_calls"].items()) or "none"
        print(f"  {gap['us']:8.1f}  {gap['after_kernel'][:50]} -> {gap['before_kernel'][:50]}"
              f"  [{calls}]")
    for key, what in (("memsets", "memsets"), ("memset_kernels", "memsets as kernels")):
        ms_ = m[key]
        print(f"{what}: {ms_['count']}, busy {ms_['busy_us']:.1f} us, idle next to them "
              f"{ms_['idle_us_next_to_them']:.1f} us; followed by: " + ", ".join(
                  f"{n[:60]} x{c}" for n, c in ms_["followed_by"].items()))
    print("every kernel of the median step, by busy time (us, launches, phase):")
    for k in m["kernels_by_time"]:
        print(f"  {k['total_us']:9.1f} {k['launches']:4d}  {k['phase']:11s} {k['name'][:90]}")
    print("per step: wall / busy / idle ms: " + "; ".join(
        f"{s['wall_ms']:.2f}/{s['busy_ms']:.2f}/{s['idle_ms']:.2f}" for s in out["per_step"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--skip", type=int, default=3, help="warm-up steps left out (default 3)")
    ap.add_argument("--top", type=int, default=10, help="largest gaps listed (default 10)")
    ap.add_argument("--log-json", help="the traced run's railyard-train --log-json file")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    try:
        dev, api, dropped = load(args.timeline)
        if dropped:
            raise TimelineError(f"{args.timeline}: CUPTI dropped {dropped} records: the timeline "
                                "has holes; rerun (fewer steps)")
        out = analyse(dev, api, args.skip, args.top)
    except TimelineError as e:
        print(f"step_timeline: {e}", file=sys.stderr)
        return 1
    if args.log_json:
        out["host_step_ms"] = host_step_ms(args.log_json, args.skip + 1)
    print_table(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
