#!/usr/bin/env python3
"""bench/step_timeline.py on hand-made timelines: steps cut from one AdamW to the next with the
idle time before a step's first kernel counted in it, busy time as the union of overlapping
intervals, the gaps' count, total, percentiles and largest (with the kernels around them and the
runtime calls in flight), busy time per phase, and damaged or short timelines refused with a
message naming what is wrong."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "step_timeline.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import step_timeline as st  # noqa: E402


def rec(name, start, end, kind="kernel"):
    return {"kind": kind, "name": name, "start": start, "end": end, "stream": 7, "graph": 1}


def step_records(t0):
    """One step of 10,000 ns from t0 (the previous AdamW ends at t0): gaps of 500 (AdamW ->
    embedding), 0, 300, overlap (two kernels on two streams), 1,200 and 100 ns."""
    return [
        rec("embedding_forward_kernel", t0 + 500, t0 + 1500),
        rec("nvjet_tst_128x160", t0 + 1500, t0 + 4000),  # back to back: no gap
        rec("layernorm_forward", t0 + 4300, t0 + 5000),
        rec("bias_grad_kernel", t0 + 4800, t0 + 6000),  # overlaps the LayerNorm by 200
        rec("cudnn_sdpa_bprop", t0 + 5500, t0 + 5800),  # inside the bias kernel
        rec("memcpy DtoH", t0 + 7200, t0 + 7400, "memcpy"),
        rec("void adamw_kernel<bf16>(float*)", t0 + 7500, t0 + 10000),
    ]


def timeline(steps=5, api=()):
    recs = [rec("void adamw_kernel<bf16>(float*)", 0, 1000)]
    for i in range(steps):
        recs += step_records(1000 + 10000 * i)
    recs += [rec(n, s, e, "api") for n, s, e in api]
    return {"tool": "test", "dropped": 0, "records": recs}


class StepTimeline(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, doc):
        path = os.path.join(self.tmp.name, "timeline.json")
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def analyse(self, doc, skip=1, top=3):
        dev, api, _ = st.load(self.write(doc))
        return st.analyse(dev, api, skip, top)

    def test_union_gaps_and_idle(self):
        m = self.analyse(timeline())["median_step"]
        self.assertEqual(m["kernels"], 6)
        self.assertEqual(m["activities"], 7)
        self.assertAlmostEqual(m["wall_ms"], 0.010)
        # holes 500 + 300 + 1200 + 100 = 2100 ns; busy = 10000 - 2100
        self.assertAlmostEqual(m["idle_ms"], 0.0021)
        self.assertAlmostEqual(m["busy_ms"], 0.0079)
        self.assertAlmostEqual(m["overlap_ms"], 0.0005)  # 200 + 300 ns counted twice in the sum
        self.assertEqual(m["gaps"], {"count": 4, "total_us": 2.1, "p50_us": 0.3, "p90_us": 1.2,
                                     "max_us": 1.2})

    def test_a_copy_beside_the_previous_adamw_is_no_gap(self):
        # As on the H200: the next batch's copy (another stream) runs while AdamW still does; it
        # must not open a hole from its end to the AdamW's.
        doc = timeline()
        for t in [200] + [1000 + 10000 * i + 8000 for i in range(5)]:  # inside every AdamW
            doc["records"].append({"kind": "memcpy", "name": "memcpy HtoD", "start": t,
                                   "end": t + 100, "stream": 30, "graph": 0})
        m = self.analyse(doc)["median_step"]
        self.assertAlmostEqual(m["idle_ms"], 0.0021)
        self.assertEqual(m["gaps"]["max_us"], 1.2)

    def test_largest_gaps_name_neighbours_and_runtime_calls(self):
        t0 = 1000 + 10000 * 2  # the third step: the median of five equal ones is the third
        doc = timeline(api=[("cudaGraphLaunch_v10000", t0 + 6100, t0 + 7300),
                            ("cudaStreamSynchronize_v3020", 0, 5)])
        gaps = self.analyse(doc, skip=0)["median_step"]["largest_gaps"]
        self.assertEqual([g["us"] for g in gaps], [1.2, 0.5, 0.3])
        self.assertEqual(gaps[0]["after_kernel"], "bias_grad_kernel")
        self.assertEqual(gaps[0]["before_kernel"], "memcpy DtoH")
        self.assertEqual(gaps[0]["runtime_calls"], {"cudaGraphLaunch_v10000": 1})
        self.assertEqual(gaps[1]["after_kernel"], "void adamw_kernel<bf16>(float*)")
        self.assertEqual(gaps[1]["phase_after"], "embedding")
        self.assertEqual(gaps[2]["runtime_calls"], {})

    def test_phases_use_the_profile_classification(self):
        m = self.analyse(timeline())["median_step"]
        self.assertEqual(m["phases_ms"], {"optimizer": 0.0025, "matmul": 0.0025, "bias": 0.0012,
                                          "embedding": 0.001, "layernorm": 0.0007,
                                          "attention": 0.0003, "other": 0.0002})
        self.assertEqual(m["gap_us_before_phase"], {"other": 1.2, "embedding": 0.5,
                                                    "layernorm": 0.3, "optimizer": 0.1})

    def test_every_kernel_is_listed_by_busy_time(self):
        m = self.analyse(timeline())["median_step"]
        ks = m["kernels_by_time"]
        self.assertEqual([k["name"] for k in ks[:2]],
                         ["nvjet_tst_128x160", "void adamw_kernel<bf16>(float*)"])
        self.assertEqual(ks[0], {"name": "nvjet_tst_128x160", "phase": "matmul", "launches": 1,
                                 "total_us": 2.5})
        self.assertEqual(len(ks), 7)
        self.assertAlmostEqual(sum(k["total_us"] for k in ks), 8.4)  # overlapping kernels each count in full
        self.assertNotIn("kernels_by_time", self.analyse(timeline())["per_step"][0])

    def test_memsets_their_idle_time_and_the_kernels_after_them(self):
        doc = timeline()
        # One memset in the last step's 300 ns hole between the product and the LayerNorm: 150 ns
        # after the product, 100 ns long, 50 ns before the LayerNorm.
        doc["records"].insert(-1, rec("memset", 40000 + 1000 + 4150, 40000 + 1000 + 4250, "memset"))
        steps = st.cut_steps(st.load(self.write(doc))[0])
        holes = st.busy_and_holes(steps[-1])[1]
        m = st.memset_figures(steps[-1], holes)
        self.assertEqual(m["count"], 1)
        self.assertEqual(m["busy_us"], 0.1)
        self.assertEqual(m["followed_by"], {"layernorm_forward": 1})
        self.assertEqual(m["idle_us_next_to_them"], 0.2)

    def test_memsets_as_kernels_and_the_kernels_after_them(self):
        doc = timeline()
        # The graphs' memsets run as kernels: one in the same hole, one at the step's head (the
        # hoisted zeroing, followed by the embedding); a real memset is not counted among them.
        name = "railyard::cuda::(anonymous namespace)::memset_kernel(char*, unsigned long)"
        doc["records"].insert(-1, rec(name, 40000 + 1000 + 4150, 40000 + 1000 + 4250))
        doc["records"].insert(-1, rec(name, 40000 + 1000 + 100, 40000 + 1000 + 200))
        doc["records"].insert(-1, rec("memset", 40000 + 1000 + 6100, 40000 + 1000 + 6200, "memset"))
        steps = st.cut_steps(st.load(self.write(doc))[0])
        holes = st.busy_and_holes(steps[-1])[1]
        m = st.memset_figures(steps[-1], holes, st.graph_memset_kernel)
        self.assertEqual(m["count"], 2)
        self.assertEqual(m["busy_us"], 0.2)
        self.assertEqual(m["followed_by"], {"embedding_forward_kernel": 1, "layernorm_forward": 1})
        self.assertIn("memset_kernels", self.analyse(doc)["median_step"])

    def test_warm_up_steps_are_left_out_and_the_median_step_is_by_wall(self):
        doc = timeline(steps=4)
        for r in doc["records"]:  # the second step's final AdamW starts 0.3 us late
            if r["start"] >= 11000 + 7500 and r["end"] <= 21000:
                r["start"] += 300
                r["end"] += 300
        out = self.analyse(doc, skip=0)
        self.assertEqual(out["steps"], 4)  # five AdamW kernels: four periods
        walls = [round(s["wall_ms"] * 1e6) for s in out["per_step"]]
        self.assertEqual(walls, [10000, 10300, 9700, 10000])  # the late AdamW shortens the next
        self.assertEqual(round(out["median_step"]["wall_ms"] * 1e6), 10000)
        skipped = self.analyse(doc, skip=2)
        self.assertEqual([round(s["wall_ms"] * 1e6) for s in skipped["per_step"]], [9700, 10000])

    def test_gaps_over_all_steps(self):
        out = self.analyse(timeline(), skip=1)
        self.assertEqual(out["gaps_all_steps"]["count"], 16)
        self.assertAlmostEqual(out["gaps_all_steps"]["total_us"], 8.4)

    def test_too_few_steps_are_refused(self):
        with self.assertRaisesRegex(st.TimelineError, "2 whole steps .* none left"):
            self.analyse(timeline(steps=2), skip=2)

    def test_cli_writes_json_and_fails_on_damaged_files(self):
        out = os.path.join(self.tmp.name, "out.json")
        ok = subprocess.run([sys.executable, SCRIPT, self.write(timeline()), "--skip", "1",
                             "--json", out], capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("4 steps after 1 warm-up", ok.stdout)
        with open(out) as f:
            self.assertEqual(json.load(f)["steps"], 4)
        cases = [("{", "cannot read the timeline"), ({"x": 1}, "no 'records' list"),
                 ({"records": [{"name": "k", "start": 1}]}, "record 0 lacks"),
                 ({"records": [rec("k", 5, 2)]}, "ends at 2 before its start 5"),
                 (dict(timeline(), dropped=3), "CUPTI dropped 3 records")]
        for doc, message in cases:
            bad = subprocess.run([sys.executable, SCRIPT, self.write(doc)], capture_output=True,
                                 text=True)
            self.assertEqual(bad.returncode, 1, doc)
            self.assertIn(message, bad.stderr)


if __name__ == "__main__":
    unittest.main()
