"""bench/suite15/table.py: issue 15's per-cell table from one call of bench/suite15/call.sh, read from the
committed records of suite15's call (bench/results/h200/suite15-raw) and from a copy whose last peers step was
cut (its records only in step.jsonl, as call.sh's timeout leaves them)."""
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(REPO, "bench", "suite15", "table.py")
RAW = os.path.join(REPO, "bench", "results", "h200", "suite15-raw")


def table(d):
    p = subprocess.run([sys.executable, TABLE, str(d)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def row(out, first):
    return next(line.split(" | ") for line in out.splitlines() if line.startswith(f"| {first} |"))


def test_every_cell_with_its_floor_peers_and_verdict():
    out = table(RAW)
    assert "copy 4.23 TB/s, bf16 792 TFLOP/s, fp8 1443 TFLOP/s" in out
    r = row(out, "quant_gemm-Q6")
    assert r[2] == "117.67" and r[5] == "114.74" and r[8] == "compile" and r[-1].startswith("**missed**")
    # S4 and G8 share a shape: each gets one of the two records, in the spots' order
    assert row(out, "ffn-S4")[2] == "28.42" and row(out, "ffn-G8")[2] == "28.59"
    assert sum("met here (H100: not claimed)" in line for line in out.splitlines() if line.startswith("| ")) == 55


def test_misses_ranked_by_absolute_gap():
    out = table(RAW)
    ranked = [line.split(" | ")[1] for line in out.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert ranked == ["skeleton bf16 8192³", "rmsnorm_gemm-L2"]


def test_a_cut_peers_step_keeps_its_finished_records(tmp_path):
    shutil.copytree(RAW, tmp_path / "raw")
    r = tmp_path / "raw" / "mc1" / "r"
    lines = (r / "peers.jsonl").read_text().splitlines(keepends=True)
    moe = [ln for ln in lines if '"case": "moe_routing-R1"' in ln]
    (r / "peers.jsonl").write_text("".join(ln for ln in lines if ln not in moe))
    (r / "step.jsonl").write_text("".join(moe))
    assert row(table(tmp_path / "raw"), "moe_routing-R1")[8] == "compile"
    (r / "step.jsonl").write_text("")
    assert row(table(tmp_path / "raw"), "moe_routing-R1")[8] == "–"
