"""bench/attention/status.py: which call each cell of the attention table comes from. Synthetic call
folders in a temporary results tree (no GPU, no torch); the commit rule against this repository's history."""
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(BENCH, "attention"))
import status  # noqa: E402
import suites  # noqa: E402

HEAD = status.git("rev-parse", "--short", "HEAD")
pytestmark = pytest.mark.skipif(not HEAD, reason="not a git checkout: status.py decides by commits")


def solder(case_id, us, commit):
    c = suites.CASES_BY_ID[case_id]
    return {"program": c.workload, "dims": c.dims(), "median_us": us, "commit": commit, "date": "2026-11-27"}


def peer(case_id, name, us, date, mode=None):
    c = suites.CASES_BY_ID[case_id]
    r = {"record": "peer", "suite": "attention", "case": case_id, "peer": name, "dims": c.dims(),
         "status": "ok", "verified": True, "median_us": us, "date": date, "small": False}
    if mode:
        r["compile_mode"] = mode
    return r


def write_call(root, name, solder_records, peer_records):
    d = root / name
    d.mkdir(parents=True)
    (d / "solder.jsonl").write_text("".join(json.dumps(r) + "\n" for r in solder_records))
    (d / "peers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in peer_records))


def test_the_newest_current_call_with_the_target_peer_wins(tmp_path):
    cid = "vanilla-d64-s1024"
    write_call(tmp_path, "a", [solder(cid, 100.0, HEAD)], [peer(cid, "sdpa_cudnn", 90.0, "2026-11-27T10:00")])
    write_call(tmp_path, "b", [solder(cid, 120.0, HEAD)], [peer(cid, "sdpa_cudnn", 95.0, "2026-11-27T12:00")])
    write_call(tmp_path, "c", [solder(cid, 80.0, HEAD)], [peer(cid, "flex", 99.0, "2026-11-27T14:00")])
    got = status.Status(results=str(tmp_path)).cell(suites.CASES_BY_ID[cid])
    assert got["call"]["name"] == "b"          # c is newer but has no cuDNN, the target of vanilla
    assert got["solder"]["median_us"] == 120.0 and got["peers"]["sdpa_cudnn"]["median_us"] == 95.0


def test_a_cell_without_its_target_peer_is_listed_stale(tmp_path):
    cid = "prefix_lm-d64-s4096"
    write_call(tmp_path, "a", [solder(cid, 368.0, HEAD)], [peer(cid, "sdpa_cudnn", 1096.0, "2026-11-27T10:00")])
    st = status.Status(results=str(tmp_path))
    assert st.cell(suites.CASES_BY_ID[cid]) is None
    fallback = st.cell(suites.CASES_BY_ID[cid], with_target=False)
    assert fallback["no_target"] and fallback["call"]["name"] == "a"
    lines, _, stale, _, _, met = status.table(st, suites.cases("attention"))
    assert len(lines) == 2 + len(suites.cases("attention"))
    assert cid in stale and met == [0, 0]


def test_a_call_without_a_commit_is_never_current(tmp_path):
    cid = "softcap-d64-s1024"
    rec = solder(cid, 295.0, None)
    del rec["commit"]
    write_call(tmp_path, "unknown-call", [rec], [peer(cid, "flex", 560.0, "2026-11-27T10:00", "default")])
    assert status.Status(results=str(tmp_path)).cell(suites.CASES_BY_ID[cid]) is None


def test_the_faster_flex_mode_of_one_call_is_taken(tmp_path):
    cid = "softcap-d64-s4096"
    write_call(tmp_path, "a", [solder(cid, 1004.0, HEAD)],
               [peer(cid, "flex", 2161.0, "2026-11-27T10:00", "default"),
                peer(cid, "flex", 1409.0, "2026-11-27T10:01", "max-autotune-no-cudagraphs")])
    st = status.Status(results=str(tmp_path))
    got = st.cell(suites.CASES_BY_ID[cid])
    assert got["peers"]["flex"]["median_us"] == 1409.0
    _, _, _, _, _, met = status.table(st, [suites.CASES_BY_ID[cid]])
    assert met == [1, 1]                       # 1004 / 1409 = 0.71 <= 0.83


def test_rounds_of_one_call_give_the_median_of_their_medians(tmp_path):
    cid = "diff_attn-d64-s16384"
    write_call(tmp_path, "a", [solder(cid, 2334.0, HEAD)],
               [peer(cid, "flex", 2812.0, "2026-11-27T10:00", "max-autotune-no-cudagraphs"),
                peer(cid, "flex", 2900.0, "2026-11-27T10:05", "max-autotune-no-cudagraphs")])
    # a spots file's second round of the default kernel (tag r2, no knob), and a knob's spot beside it
    (tmp_path / "a" / "solder-r2.jsonl").write_text(json.dumps(solder(cid, 2336.0, HEAD)) + "\n")
    (tmp_path / "a" / "solder-knob.jsonl").write_text(json.dumps(solder(cid, 1000.0, HEAD)) + "\n")
    st = status.Status(results=str(tmp_path))
    got = st.cell(suites.CASES_BY_ID[cid])
    assert got["solder"]["median_us"] == 2335.0 and got["solder"]["rounds"] == 2
    assert got["peers"]["flex"]["median_us"] == 2856.0 and got["peers"]["flex"]["rounds"] == 2
    _, _, _, _, _, met = status.table(st, [suites.CASES_BY_ID[cid]])
    assert met == [1, 1]                       # 2335 / 2856 = 0.818
    (tmp_path / "a" / "solder-r3.jsonl").write_text(json.dumps(solder(cid, 2500.0, HEAD)) + "\n")
    got = status.Status(results=str(tmp_path)).cell(suites.CASES_BY_ID[cid])
    assert got["solder"]["median_us"] == 2336.0 and got["solder"]["rounds"] == 3


def has_commit(c):
    return subprocess.run(["git", "-C", status.REPO, "cat-file", "-e", c + "^{commit}"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not (has_commit("9dbd798") and has_commit("479f89e") and has_commit("ad09a01")), reason="history without 9dbd798")
def test_a_commit_that_changes_data_masks_only_keeps_other_calls_current():
    st = status.Status(results="/nonexistent", head="ad09a01")   # main before the twelfth session's kernels
    assert st.same_kernel_files("9dbd798", "alibi")              # only 479f89e's data-mask change since
    assert not st.same_kernel_files("9dbd798", "document_mask")
    assert not st.same_kernel_files("de8a0b9", "vanilla")        # the 2026-11-22 report's kernels
