"""bench/attention/dossier_table.py: the ncu table of issue 17's dossier call, read from ncu's raw CSV pages
(tests/data/dossier_ncu: a Solder cell whose CSV has ncu's ==PROF== lines mixed in, and a peers file of two
kernels named by dossier_peer_ncu.py's "profiled" lines); the hd256 suite outside the head table's 40 cells."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(BENCH, "attention"))
import dossier_table  # noqa: E402
import suites  # noqa: E402

DATA = os.path.join(HERE, "..", "data", "dossier_ncu")


def rows():
    return dict(dossier_table.collect(DATA))


def test_units_scale_to_microseconds_megahertz_and_gigabytes():
    s = rows()["document_mask-d64-s4096"]
    assert s["kernel"] == "fused_o"
    assert abs(s["us"] - 145.6) < 1e-9          # "145,600" nsecond
    assert abs(s["mhz"] - 1980.0) < 1e-9        # 1.98 cycle/nsecond
    assert abs(s["dram_gb"] - 0.185) < 1e-9     # 150 + 35 Mbyte
    assert s["tensor"] == 41.5 and s["issue"] == 30.2 and s["regs"] == 168


def test_top_two_stalls_leave_out_selected_and_share_all_states():
    s = rows()["document_mask-d64-s4096"]
    # wait 1.20, selected 1.00 (the issue itself), long_scoreboard 0.60, barrier 0.40: 3.20 per issue
    assert [r for r, _, _ in s["stalls"]] == ["wait", "long_scoreboard"]
    assert abs(s["stalls"][0][2] - 100 * 1.2 / 3.2) < 1e-9
    assert abs(s["per_issue"] - 3.2) < 1e-9


def test_peer_kernels_named_by_the_profiled_lines_in_order():
    r = rows()
    assert r["vanilla-d64-s1024 sdpa_cudnn"]["kernel"].startswith("cudnn_generated")
    assert r["document_mask-d64-s4096 flex"]["kernel"] == "triton_tem_fused_0"
    assert abs(r["document_mask-d64-s4096 flex"]["us"] - 148.0) < 1e-9
    assert r["document_mask-d64-s4096 flex"]["occ_theory"] == 18.75


def test_table_has_one_row_per_kernel_and_dashes_for_missing_values():
    text = dossier_table.table(dossier_table.collect(DATA))
    lines = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert len(lines) == 3
    assert "wait 1.20 (38 %); long_scoreboard 0.60 (19 %)" in text
    assert "| 41.5 | — | 30.2 |" in text            # tensor pipe, XU pipe (not in the fixture), issue slots
    assert dossier_table.f(None) == "—"


def test_hd256_cells_are_their_own_suite_not_the_head_tables():
    hd256 = suites.cases("attention_hd256")
    assert [c.id for c in hd256] == ["vanilla-d256-s4096", "vanilla-d256-s16384", "causal-d256-s4096",
                                     "causal-d256-s16384"]
    assert all(c.overrides["D"] == 256 and c.overrides["B"] * c.overrides["S"] == 16384 for c in hd256)
    assert len(suites.cases("attention")) == 40
    assert not any(c.id.startswith(("vanilla-d256", "causal-d256")) for c in suites.cases("attention"))
    # causal counts half the pairs, as the attention suite does
    v, c = suites.CASES_BY_ID["vanilla-d256-s4096"], suites.CASES_BY_ID["causal-d256-s4096"]
    assert v.flops() == 4 * 4 * 16 * 4096 * 4096 * 256 and c.flops() == v.flops() / 2
