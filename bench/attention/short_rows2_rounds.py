#!/usr/bin/env python3
"""The timing rounds of bench/attention/short_rows2_call.sh, in one Python process (torch imported once):
round r runs `solder bench --json` for every setting (TAG ENV... lines of --settings; odd rounds in file
order, even rounds reversed) on vanilla and gqa at the given dims, each record tagged with its setting and
round into DIR/solder.jsonl, then cuDNN SDPA on both cells (bench/peers.py's sdpa_cudnn: CUDA graphs, the
median of the replays) into DIR/peers-rR.jsonl. A round starts only while the clock is before --stop-at
(seconds since the epoch) with 12 s to spare.
Usage: short_rows2_rounds.py --settings FILE --dir DIR --stop-at EPOCH [--rounds N] DIMS..."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import peers  # noqa: E402  (imports torch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--stop-at", type=float, required=True)
    ap.add_argument("--rounds", type=int, default=6)
    opt, dims = ap.parse_known_args()
    settings = []
    for line in open(opt.settings):
        line = line.strip()
        if line and not line.startswith("#"):
            tag, *envs = line.split()
            settings.append((tag, [e for e in envs if e != "-"]))
    out = open(os.path.join(opt.dir, "solder.jsonl"), "a")
    for r in range(1, opt.rounds + 1):
        if time.time() > opt.stop_at - 12:
            print(f"deadline before round {r}", flush=True)
            break
        order = settings if r % 2 else settings[::-1]
        for cell in ("vanilla", "gqa"):
            for tag, envs in order:
                env = dict(os.environ)
                for e in envs:
                    k, v = e.split("=", 1)
                    env[k] = v
                p = subprocess.run(["build/solder", "bench", f"examples/{cell}.sol", *dims, "--json"], env=env,
                                   capture_output=True, text=True, timeout=30)
                recs = [line for line in p.stdout.splitlines() if line.startswith("{")]
                if not recs:
                    print(f"round {r} {cell} {tag}: no record (rc {p.returncode}): {p.stderr.strip()[-300:]}", flush=True)
                    continue
                rec = json.loads(recs[0])
                rec.update(tag=tag, round=r)
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(f"round {r} {cell:8} {tag:5} {rec.get('median_us', 0):8.1f} us (min {rec.get('min_us', 0):.1f})", flush=True)
        peers.main(["--no-ceilings", "--out", os.path.join(opt.dir, f"peers-r{r}.jsonl"), "--suite", "attention",
                    "--cases", "^(vanilla|gqa)-d64-s1024$", "--peers", "sdpa_cudnn"])
    out.close()


if __name__ == "__main__":
    main()
