"""bench/merged_call.sh (the A/B call driver) and bench/merged_table.py, without a GPU: the dry run's
commands and round order, every committed spots file still planned as before (one round, solder then peers),
a whole call against stand-ins for nvidia-smi, solder, peers.py and a device test (records tagged with their
round and span, the clock log, the table), and the table on a committed fixture (tests/data/merged_call:
two rounds, a knob mode, peers, a clock log with idle samples and the device's local time an hour ahead)."""
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "bench")
sys.path.insert(0, BENCH)
import merged_table  # noqa: E402

FIXTURE = os.path.join(REPO, "tests", "data", "merged_call")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in ("bash", "tac", "stdbuf")),
                                reason="the driver is a bash script (coreutils' tac and stdbuf)")

SPOTS = """# a test spots file: TAG SUITE CASES PEERS PEER-SECONDS [ENV]
-    attention ^causal-d64-s1024$ sdpa_cudnn,flex 20
old  attention ^causal-d64-s1024$ - - SOLDER_ATTN_EPIQ=1 SOLDER_ATTN_STAGES=3
ch   gemm_chains ^ffn-S(1|2)$ eager 30
"""
CAUSAL = "examples/causal.sol --dim B=16 --dim S=1024 --dim D=64 --dim H=16"


def start_dry_run(tmp_path, spots_text=None, spots=None, **env):
    if spots is None:
        spots = tmp_path / "t.spots"
        spots.write_text(spots_text)
    e = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path / "out"), "SPOTS": str(spots), **env}
    e["PATH"] = str(_fake_bin(tmp_path, marker=True)) + os.pathsep + e["PATH"]
    return subprocess.Popen(["bash", "bench/merged_call.sh"], cwd=REPO, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(tmp_path, proc):
    out, err = proc.communicate(timeout=300)
    assert not (tmp_path / "nvidia-smi-called").exists(), "a dry run called nvidia-smi"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def dry_run(tmp_path, spots_text=None, spots=None, **env):
    return finish(tmp_path, start_dry_run(tmp_path, spots_text, spots, **env))


def steps(out):
    """(round, 'solder' | 'peers', records file, command) of a dry run's step lines."""
    got = []
    for line in out.splitlines():
        if line.startswith("round "):
            head, cmd = line.split(": ", 1)
            _, k, kind, _, dest = head.split()
            got.append((int(k), kind, dest, cmd))
    return got


def test_dry_run_prints_every_command_and_reverses_each_round(tmp_path):
    p = dry_run(tmp_path, SPOTS, ROUNDS="3", DEVICE_TESTS="attention:50:Qr gemm:20", VERIFY="^causal-d64-s1024$",
                PEER_ARGS="--compile-mode default", DEADLINE="300")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "timeout 50 bin/test_sm90_attention 2026 Qr" in out and "timeout 20 bin/test_sm90_gemm 2026 >" in out
    assert "bash tests/gpu/run.sh" in out
    assert f"timeout 120 build/solder run --backend cuda {CAUSAL}" in out            # VERIFY
    assert f"SOLDER_ATTN_EPIQ=1 SOLDER_ATTN_STAGES=3 timeout 120 build/solder bench {CAUSAL} --compile-only" in out
    assert "nvidia-smi --query-gpu=timestamp,clocks.sm" in out                          # the clock log
    got = steps(out)
    one = [(kind, dest, cmd.split(" build/solder bench ")[-1].split(" --json")[0] if kind == "solder"
            else cmd.split("--cases ")[1].split(" ")[0]) for k, kind, dest, cmd in got if k == 1]
    assert one == [("solder", "r/solder.jsonl", CAUSAL), ("solder", "r/solder-old.jsonl", CAUSAL),
                   ("solder", "r/solder-ch.jsonl", "examples/ffn.sol --dim M=128 --dim N=8192 --dim K=3072 --dim L=3072"),
                   ("solder", "r/solder-ch.jsonl", "examples/ffn.sol --dim M=128 --dim N=5632 --dim K=2048 --dim L=2048"),
                   ("peers", "r/peers.jsonl", "'^causal-d64-s1024$'"),
                   ("peers", "r/peers.jsonl", "'^ffn-S(1|2)$'")]
    by_round = {k: [(kind, dest, cmd) for kk, kind, dest, cmd in got if kk == k] for k in (1, 2, 3)}
    assert by_round[2] == by_round[1][::-1] and by_round[3] == by_round[1]
    assert [k for k, *_ in got] == [1] * 6 + [2] * 6 + [3] * 6
    knob = [cmd for k, kind, dest, cmd in got if dest == "r/solder-old.jsonl"]
    assert len(knob) == 3 and all(c.startswith("SOLDER_ATTN_EPIQ=1 SOLDER_ATTN_STAGES=3 timeout 30 build/solder") for c in knob)
    peers = [cmd for k, kind, dest, cmd in got if kind == "peers"]
    assert all("--compile-mode default" in c and "--no-ceilings" in c for c in peers)
    assert "--peers sdpa_cudnn,flex --time-limit 20" in peers[0]
    plan = (tmp_path / "out" / "r" / "plan.tsv").read_text().splitlines()
    assert len(plan) == 18 and plan[0].split("\t")[:3] == ["1", "S", "solder.jsonl"]


def test_every_committed_spots_file_plans_one_round_of_solder_then_peers(tmp_path):
    """bench/**/*.spots: ROUNDS unset plans what the driver planned before rounds."""
    import suites
    files = sorted(p for p in glob.glob(os.path.join(BENCH, "**", "*.spots"), recursive=True)
                   if os.sep + "results" + os.sep not in p)
    assert files
    runs = []
    for n, path in enumerate(files):       # all at once: each is a few suites.py starts
        d = tmp_path / str(n)
        d.mkdir()
        runs.append((d, path, start_dry_run(d, spots=path, DEVICE_TESTS="", RUN_SH="0")))
    for d, path, proc in runs:
        p = finish(d, proc)
        assert p.returncode == 0, (path, p.stderr)
        got = steps(p.stdout)
        lines = [ln.split() for ln in open(path) if ln.strip() and not ln.lstrip().startswith("#")]
        want_solder = sum(len(suites.cases(ln[1], False, ln[2])) for ln in lines)
        want_peers = sum(ln[3] != "-" for ln in lines)
        kinds = [kind for _, kind, _, _ in got]
        assert kinds == ["solder"] * want_solder + ["peers"] * want_peers, path
        assert {k for k, *_ in got} == ({1} if want_solder + want_peers else set()), path  # a call of checks only


def test_rounds_must_be_a_positive_integer(tmp_path):
    for bad in ("0", "two", "-1"):
        p = dry_run(tmp_path, SPOTS, ROUNDS=bad)
        assert p.returncode == 2 and "ROUNDS" in p.stderr


FAKE_SOLDER = r"""#!/usr/bin/env bash
# stands in for `solder bench FILE --dim K=V ... (--json | --compile-only)`: 100 µs, 120 with SOLDER_ATTN_EPIQ=1
file=$2; shift 2; dims=""; json=0
while [ $# -gt 0 ]; do
  case $1 in --dim) dims="$dims${dims:+, }\"${2%%=*}\": ${2#*=}"; shift 2;; --json) json=1; shift;; *) shift;; esac
done
us=100; [ "${SOLDER_ATTN_EPIQ:-}" = 1 ] && us=120
sleep 0.2
if [ $json = 1 ]; then
  echo "{\"program\": \"$(basename $file .sol)\", \"file\": \"$file\", \"dims\": {$dims}, \"kernels\": 1, \"median_us\": $us, \"min_us\": $((us - 2)), \"replays\": 30}"
else
  echo "$file: 1 kernel(s), compiled in 0.1 s"
fi
"""

FAKE_PEERS = r"""import argparse, json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suites
ap = argparse.ArgumentParser()
for a in ("--out", "--suite", "--cases", "--peers", "--time-limit", "--compile-mode"):
    ap.add_argument(a)
ap.add_argument("--no-ceilings", action="store_true")
a = ap.parse_args()
with open(a.out, "a") as f:
    for c in suites.cases(a.suite, False, a.cases):
        for p in a.peers.split(","):
            t0 = time.time(); time.sleep(0.2)
            f.write(json.dumps({"record": "peer", "suite": c.suite, "case": c.id, "workload": c.workload,
                                "program": c.program.name, "dims": c.dims(), "peer": p, "status": "ok",
                                "median_us": 105.0, "min_us": 103.0, "verified": True,
                                "timed_span_ms": [int(t0 * 1e3), int(time.time() * 1e3)]}) + "\n")
print("# fake peers done")
"""

FAKE_SMI = r"""#!/usr/bin/env bash
[ -n "${MARKER:-}" ] && touch "$MARKER"
case "$*" in
  *-lms*) while :; do echo "$(date '+%Y/%m/%d %H:%M:%S.%3N'), 1980 MHz, 2619 MHz, 612.50 W, 50, 0x0000000000000000"; sleep 0.1; done;;
  *timestamp*) echo "$(date '+%Y/%m/%d %H:%M:%S.%3N'), 1980 MHz, 2619 MHz, 612.50 W, 50, 0x0000000000000000";;
  *) echo "Fake H100, 580.0, 1980 MHz";;
esac
"""


def _fake_bin(tmp_path, marker=False):
    b = tmp_path / "fakebin"
    b.mkdir(exist_ok=True)
    smi = b / "nvidia-smi"
    smi.write_text(FAKE_SMI.replace("${MARKER:-}", str(tmp_path / "nvidia-smi-called") if marker else ""))
    smi.chmod(0o755)
    return b


def test_a_whole_call_on_stand_ins_tags_rounds_spans_and_clocks(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(BENCH, root / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    shutil.copytree(os.path.join(REPO, "examples"), root / "examples")
    for d in ("build", "bin"):
        (root / d).mkdir()
    (root / "build" / "solder").write_text(FAKE_SOLDER)
    (root / "bin" / "test_sm90_attention").write_text("#!/usr/bin/env bash\necho case one ok\necho all 1 passed\n")
    for f in ("build/solder", "bin/test_sm90_attention"):
        (root / f).chmod(0o755)
    (root / "bench" / "peers.py").write_text(FAKE_PEERS)
    (root / "COMMIT").write_text("fake123\n")
    (root / "bench" / "t.spots").write_text(SPOTS)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "SPOTS": "bench/t.spots", "ROUNDS": "2", "RUN_SH": "0",
           "DEVICE_TESTS": "attention:10", "DEADLINE": "300"}
    env["PATH"] = str(_fake_bin(tmp_path)) + os.pathsep + env["PATH"]
    p = subprocess.run(["bash", "bench/merged_call.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = out / "r"
    dt = (r / "dt-attention.txt").read_text().splitlines()
    assert len(dt) == 2 and dt[1].split(None, 1)[1] == "all 1 passed"        # stamped with its second

    def records(name):
        return [json.loads(x) for x in (r / name).read_text().splitlines()]
    default, old, chains, peers = (records(n) for n in ("solder.jsonl", "solder-old.jsonl", "solder-ch.jsonl", "peers.jsonl"))
    assert [x["round"] for x in default] == [1, 2] and [x["median_us"] for x in default] == [100, 100]
    assert [x["round"] for x in old] == [1, 2] and [x["median_us"] for x in old] == [120, 120]
    assert sorted(x["round"] for x in chains) == [1, 1, 2, 2]
    assert sorted((x["round"], x["case"], x["peer"]) for x in peers) == sorted(
        (k, c, p) for k in (1, 2) for c, p in (("causal-d64-s1024", "sdpa_cudnn"), ("causal-d64-s1024", "flex"),
                                             ("ffn-S1", "eager"), ("ffn-S2", "eager")))
    # the steps ran in the plan's order (round 2 reversed), each record inside its step's span
    st = [ln.split("\t") for ln in (r / "steps.tsv").read_text().splitlines()]
    assert [(s[0], s[1], s[2]) for s in st] == [tuple(ln.split("\t")[:3]) for ln in (r / "plan.tsv").read_text().splitlines()]
    assert [s[1] for s in st] == list("SSSSPP") + list("PPSSSS") and all(s[5] == "0" for s in st)
    starts = [float(s[3]) for s in st]
    assert starts == sorted(starts)
    for x in default + old + chains + peers:
        assert x["span"][0] <= x["span"][1]
        assert any(abs(float(s[3]) - x["span"][0]) < 1e-6 and s[0] == str(x["round"]) for s in st)
    clocks = (r / "clocks.csv").read_text().splitlines()
    assert clocks[0].startswith("# ref ") and len(clocks) > 10
    table = (r / "summary.md").read_text()
    assert "| causal-d64-s1024 | old | 1,2 | 1 | 120.00 | 118.00 | 1980 | sdpa_cudnn | 105.00 | 103.00 | 1980 | 1.143 |" in table
    assert (out / "r.tgz").exists()


def cells(text, heading):
    """{(case, tag, round or rounds): [cells]} of one of the table's two sections."""
    part = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in part.splitlines():
        if line.startswith("| ") and not line.startswith("| case") and not line.startswith("|---"):
            c = [x.strip() for x in line.strip("|").split("|")]
            rows[(c[0], c[1], c[2])] = c[3:]
    return rows


def test_table_of_the_fixture():
    text = merged_table.table(FIXTURE)
    per = cells(text, "## per round")
    # Solder µs, fastest, SM MHz, target peer, peer µs, fastest, SM MHz, Solder / target, best, best µs, ratio
    assert per[("causal-d64-s1024", "-", "1")] == ["100.00", "98.00", "1980", "sdpa_cudnn", "105.00", "103.00",
                                                    "1980", "0.952", "sdpa_cudnn", "105.00", "0.952"]
    assert per[("causal-d64-s1024", "-", "2")][:8] == ["110.00", "97.00", "1755", "sdpa_cudnn", "104.00", "102.00",
                                                        "1980", "1.058"]
    assert per[("causal-d64-s1024", "old", "1")][2] == "1755"      # its span's samples run slow
    assert per[("causal-d64-s1024", "old", "2")][2] == "1980"      # the idle sample in its span is left out
    # ffn: no attention target, so the best verified peer of the round (compile's unverified 10 µs is not)
    assert per[("ffn-S1", "-", "1")][3:8] == ["eager", "60.00", "58.00", "1755", "0.833"]
    assert per[("document_mask-d64-s1024", "-", "1")][3:5] == ["flex", "-"]
    over = cells(text, "## over the rounds")
    # kernels, Solder µs, fastest, SM MHz, target, peer µs, fastest, SM MHz, ratio, fastest ratio, target, met
    assert over[("causal-d64-s1024", "-", "1,2")][:12] == ["1", "105.00", "97.00", "1868", "sdpa_cudnn", "104.50",
                                                          "102.00", "1980", "1.005", "0.951", "≤ 1.00× sdpa_cudnn", "no"]
    assert over[("causal-d64-s1024", "old", "1,2")][8] == "1.167"
    assert over[("ffn-S1", "-", "1,2")][8:12] == ["0.864", "0.860", "≤ 1.00× eager", "yes"]
    assert over[("document_mask-d64-s1024", "-", "1")][10:12] == ["≤ 0.83× flex", "-"]
    assert "cells meeting their target in this call (median of the rounds' medians): 1 of 3" in text


def test_clock_log_stamps_are_mapped_by_the_reference_line():
    clocks = merged_table.load_clocks(os.path.join(FIXTURE, "clocks.csv"))
    assert clocks[0][0] == pytest.approx(1764309600.0) and clocks[2][0] == pytest.approx(1764309601.0)
    assert clocks[2][2] and not clocks[1][2]                       # 345 MHz with the idle reason
    assert merged_table.clock_in(clocks, {"span": [1764309600.9, 1764309601.1]}) is None
    assert merged_table.clock_in(clocks, {"span": [0, 1], "timed_span_ms": [1764309610500, 1764309611000]}) == 1755


def test_records_without_rounds_are_round_one(tmp_path):
    """A call from before rounds (no round, no span, no clock log) still gives its table."""
    for name in ("solder.jsonl", "peers.jsonl"):
        lines = [json.loads(x) for x in open(os.path.join(FIXTURE, name))]
        (tmp_path / name).write_text("".join(json.dumps({k: v for k, v in x.items() if k not in ("round", "span", "timed_span_ms")}) + "\n"
                                             for x in lines if x.get("round", 1) == 1))
    text = merged_table.table(str(tmp_path))
    over = cells(text, "## over the rounds")
    assert over[("causal-d64-s1024", "-", "1")][1:4] == ["100.00", "98.00", "-"]
    assert over[("causal-d64-s1024", "-", "1")][8] == "0.952" and "(no clocks.csv: no SM clock)" in text
