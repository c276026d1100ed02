#!/usr/bin/env python3
"""bench/gemm_pins_from_survey.py: the committed pin table is the committed survey's picks; a
changed pick changes the table, a split-K pick gives way to an unsplit candidate as fast, --write
replaces only the generated part, and a survey the table cannot take (an in-place split-K
reduction, a pick without the same bits, a missing field) is refused with a message naming it.
The rules are tested on a frozen survey (tests/unit/data: the H200 survey of f93528b, 16
candidates a product), so that a new survey in bench/results changes only the first test."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "gemm_pins_from_survey.py")
SURVEY = os.path.join(ROOT, "bench", "results", "gemm-survey.json")
FROZEN = os.path.join(ROOT, "tests", "unit", "data", "gemm-survey-f93528b.json")
PINS = os.path.join(ROOT, "runtime", "cuda", "gemm_pins.cpp")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class GemmPinsFromSurvey(unittest.TestCase):
    def setUp(self):
        with open(FROZEN) as f:
            self.survey = json.load(f)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, content):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def product(self, survey, name):
        return next(p for p in survey["products"] if p["name"] == name)

    def test_committed_table_is_the_committed_survey(self):
        r = run(SURVEY, "--check", PINS)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_prints_one_entry_per_pick_other_than_the_first(self):
        out = run(FROZEN).stdout
        # Two products whose first splits K have an unsplit candidate as fast (fc1 and qkv
        # backward-weight =, the latter with the ones column).
        picks = [p for p in self.survey["products"] if p["pick"] != 0]
        self.assertEqual(out.count("{{"), len(picks) + 2)
        self.assertIn("{39, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 0, 0, 5}", out)

    def test_a_survey_under_the_power_limit_is_read_by_its_sustained_times(self):
        s = copy.deepcopy(self.survey)
        s["sustain_ms"] = 150
        for q in s["products"]:
            for c in q["candidates"]:
                c["sustained_ms"] = c["median_ms"]
        out = run(self.write("survey.json", s)).stdout
        code = lambda t: [l for l in t.splitlines() if not l.strip().startswith("//")]
        self.assertEqual(code(out), code(run(FROZEN).stdout))
        self.assertIn("under the power limit", out)
        # Slower under the limit than the first: the DGELU product's pin goes. A pinned
        # product whose first has no sustained time is refused, naming the field.
        p = self.product(s, "fc2 backward-input dgelu")
        pinned = "{39, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 0, 0, 5}"
        self.assertIn(pinned, out)
        pick = p["pick"]
        p["candidates"][pick]["sustained_ms"] = 2 * p["candidates"][0]["median_ms"]
        p["pick"] = 0
        self.assertNotIn(pinned, run(self.write("survey.json", s)).stdout)
        p["pick"] = pick
        del p["candidates"][0]["sustained_ms"]
        r = run(self.write("survey.json", s))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("sustained_ms", r.stderr)

    def test_a_split_k_pick_gives_way_to_an_unsplit_one_as_fast(self):
        s = copy.deepcopy(self.survey)
        p = self.product(s, "qkv backward-weight+bias (ones column) =")
        unsplit = ("776, 2304, 16384, CUDA_R_16BF, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, false, 1},"
                   "\n       {66, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 3, 0, 5}")
        self.assertEqual((p["pick"], p["candidates"][0]["splitk"]), (0, 2))
        self.assertIn(unsplit, run(FROZEN).stdout)
        first = p["candidates"][0]["median_ms"]
        for ms, workspace, taken in ((first, 0, True), (first * 1.001, 0, False),
                                     (first, 4096, True), (first, 4097, False)):
            p["candidates"][1].update(median_ms=ms, workspace_bytes=workspace)
            out = run(self.write("survey.json", s)).stdout
            self.assertEqual(unsplit in out, taken, (ms, workspace))
        p["candidates"][1].update(median_ms=first, workspace_bytes=0, rel_diff_vs_first=0.02)
        self.assertNotIn(unsplit, run(self.write("survey.json", s)).stdout)

    def test_an_enumerated_pick_replaces_the_generated_part_only(self):
        s = copy.deepcopy(self.survey)
        p = self.product(s, "fc1 backward-weight =")
        c = copy.deepcopy(p["candidates"][0])
        c.update(rank=len(p["candidates"]), source="enumerated", median_ms=0.09, splitk=3,
                 reduction="output_type", tile_id=201, custom_option=0, cluster_shape_id=2)
        p["candidates"].append(c)
        p["pick"] = c["rank"]
        survey = self.write("survey.json", s)
        with open(PINS) as f:
            original = f.read()
        pins = self.write("gemm_pins.cpp", original)
        self.assertEqual(run(survey, "--check", pins).returncode, 1)
        r = run(survey, "--write", pins)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run(survey, "--check", pins).returncode, 0)
        with open(pins) as f:
            text = f.read()
        self.assertIn("{66, 201, 35, 3, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, 0, 0, 0, 2}", text)
        self.assertRegex(text, r"\(#%d,\s*(//\s*)?enumerated\)" % c["rank"])
        head = original[:original.index("// BEGIN generated")]
        tail = original[original.index("// END generated"):]
        self.assertTrue(text.startswith(head))
        self.assertTrue(text.endswith(tail[tail.index("\n"):]))

    def test_an_enumerated_pick_gives_way_to_a_heuristic_one_within_the_margin(self):
        s = copy.deepcopy(self.survey)
        p = self.product(s, "fc2 backward-input dgelu")
        c = copy.deepcopy(p["candidates"][3])
        c.update(rank=len(p["candidates"]), source="enumerated", splitk=4294967295,
                 reduction="compute_type")
        p["candidates"].append(c)
        p["pick"] = c["rank"]
        fast = {"{39, 20, 35, 4294967295, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, 0, 0, 0, 5}"}
        for factor, heuristic in ((0.997, True), (0.99, False)):
            c["median_ms"] = p["candidates"][3]["median_ms"] * factor
            out = run(self.write("survey.json", s)).stdout
            self.assertEqual("{39, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 0, 0, 5}" in out,
                             heuristic, factor)
            self.assertEqual(any(f in out for f in fast), not heuristic, factor)

    def refused(self, survey, *words):
        r = run(self.write("bad.json", survey))
        self.assertEqual(r.returncode, 2, r.stdout)
        for w in words:
            self.assertIn(w, r.stderr)

    def test_refuses_an_in_place_reduction(self):
        s = copy.deepcopy(self.survey)
        p = self.product(s, "attn-proj backward-weight =")
        p["candidates"][p["pick"]]["reduction"] = "inplace"
        self.refused(s, "attn-proj backward-weight =", "'inplace'")

    def test_refuses_a_pick_without_the_same_bits(self):
        s = copy.deepcopy(self.survey)
        p = self.product(s, "attn-proj forward bias")
        p["candidates"][p["pick"]]["same_bits"] = False
        self.refused(s, "attn-proj forward bias", "same bits")

    def test_refuses_a_missing_field_or_a_pick_out_of_range(self):
        s = copy.deepcopy(self.survey)
        i = next(i for i, p in enumerate(s["products"]) if p["pick"] != 0)
        del s["products"][i]["m"]
        self.refused(s, f"products[{i}]", '"m"')
        s = copy.deepcopy(self.survey)
        s["products"][0]["pick"] = 999
        self.refused(s, "pick 999")
        r = run(self.write("broken.json", "{"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("broken.json", r.stderr)

    def test_a_file_without_the_region_is_refused(self):
        r = run(FROZEN, "--write", self.write("other.cpp", "int x;\n"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("BEGIN generated", r.stderr)


if __name__ == "__main__":
    unittest.main()
