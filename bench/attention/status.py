#!/usr/bin/env python3
"""The attention suite's current state, read from the committed raw records of the device calls.

    python3 bench/attention/status.py                 # the table (markdown) on stdout
    python3 bench/attention/status.py --stale         # the cells with no usable call, most wanted first
    python3 bench/attention/status.py --md OUT.md --png OUT.png [--calls] [--emit build/solder]

A call is a folder under bench/results/h100 holding solder*.jsonl and / or peers*.jsonl (one device
call's records). For each cell of `bench/suites.py --suite attention`, the table takes the newest call
(by the commit time of the Solder binary it ran, then by the call's time) that
  1. has a Solder record of the cell on the CURRENT kernel, and
  2. has, in the same call, a verified record of the cell's target peer (cuDNN SDPA for vanilla, gqa and
     causal; FlexAttention for the others),
and names that call. The other peers of the same call fill the other columns; nothing is mixed across
calls. A Solder record runs the current kernel when
  - the call's folder has kernels.tsv (bench/attention/table_stage.sh) and, with --emit SOLDER, the
    SHA-256 of `SOLDER emit --cuda` for the cell and the git tree of device/solder at HEAD equal the
    ones recorded; or else
  - the files that make an attention kernel (KERNEL_PATHS: device/solder/, the attention emitter, the
    fusion plan, and the cell's example) are the same at the call's Solder commit and at HEAD
    (`git diff --quiet COMMIT HEAD -- PATHS`).
The commit of a call is the Solder records' `commit` field (renamed through any hashes.txt of
bench/results/h100: old hash, new hash), else CALL_COMMITS below (from the call's notes); a call with
neither is never current. Solder records that ran a knob (solder-TAG.jsonl files, records whose `mode`
is not "default" or "new") are not the default kernel and are skipped; solder-rN.jsonl files are further
rounds of the default kernel. Where a call has several rounds of a cell, Solder's time and each peer's
(per compile mode) are the median of the rounds' medians, as bench/merged_table.py reports them.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import report  # noqa: E402
import suites  # noqa: E402

REPO = suites.REPO
RESULTS = os.path.join(REPO, "bench", "results", "h100")

# What makes an attention kernel: the headers the generated source includes (embedded in the binary),
# the attention emitter and the code that plans its kernels. Not in it: src/backend/cuda/cuda_names.cpp
# (reserved words, used to rename a program's identifiers that collide with them; no example's do).
KERNEL_PATHS = ["device/solder", "src/backend/cuda/mma_stream_analysis.cpp", "src/backend/cuda/mma_stream_codegen.cpp",
                "src/backend/cuda/mma_stream_codegen.h", "src/backend/cuda/mma_stream_expr.cpp",
                "src/backend/cuda/mma_stream_expr.h", "src/backend/cuda/mma_stream_skeleton.cpp",
                "src/backend/cuda/mma_stream_statements.cpp", "src/backend/cuda/mma_stream_wgmma.cpp",
                "src/backend/cuda/mma_stream_writer.h", "src/backend/cuda/attention_dual.cpp",
                "src/backend/cuda/attention_dual.h", "src/backend/cuda/cuda_codegen.cpp",
                "src/backend/cuda/kernel_writer.cpp", "src/backend/cuda/fusion_params.cpp",
                "src/backend/cuda/tma_operand.h", "src/runtime/attention_args.cpp", "src/fusion", "src/plan",
                "src/lower"]

# Calls whose Solder records carry no commit: the commit of the binary, from the call's notes
# (bench/NOTES.md, attention.md). Built from a modified tree (no commit holds its source): None.
CALL_COMMITS = {
    "attention-docmask-raw": "de31039",
    "attention-docmask2-raw": "a52366e",
    "attention-docmask3-raw": "28ec4ec",
    "attention-variants-raw/call2": "b3394ca",
    "attn-alibi-raw/call": "7f99f79",
    "attn-chain-raw/call": "c552c91",
    "attn-pingpong-raw/call": "e075fcc",
    "evoformer2-2026-11-27": "e6d4c91",
    "evoformer3-raw": "a6d11be",
    "attention-short-raw/call1": None,   # skeleton of 4af5597 with the emitter of a853bf8 before two rules
    "attention-short-raw/call2": None,
    "attn-variants-raw": None,           # the source of afc3479 plus uncommitted rules
    "diff-one-raw": None,                # f242e55 + 03e466f without its 32-key-tile rule
    "docmask4-raw": None,                # 309f72a + 1d05b6f with a different default and register split
}

# Commits that change KERNEL_PATHS but, read from their diff, not the kernel of every workload: commit ->
# the workloads, or single cells by case id, whose kernel it changes. A call before such a commit stays
# current for the others.
KERNEL_COMMITS_ONLY = {
    # the emitter's Dynamic and one-id defaults, both under `data` (a data mask): document_mask only
    "479f89e": ("document_mask",),
    # free consumers and the staged epilogue on masks of two comparisons: sliding_window, prefix_lm S 1k
    "42d96a1": ("sliding_window", "prefix_lm-d64-s1024"),  # (Dynamic two-Q-buffer kernels: prefix_lm S <= 1k)
    # the thirteenth session: the staged epilogue in the Q rows on one block per tile (header code under
    # Config::EpilogueInQ, which no kernel had before; the emitter's rule: the plain score, no mask)
    "d6f7ad6": ("vanilla", "gqa", "causal"),
    "62fa48e": ("vanilla", "gqa", "causal"),
    "63bfb78": ("vanilla", "gqa", "causal"),
    # the posted work-tile setup (header code under Config::PostedWork) and causal's rules by length
    "26fd59e": ("causal",),
    "673f3c9": ("causal",),
    # the multi-id boundary select (the header's kData branch) and the staged epilogue on data masks
    "b8cb728": ("document_mask",),
    "61ddb98": ("document_mask",),
    # the register pass's row kernels (src/fusion): quant_gemm's rows only, no attention kernel
    "2426322": ("quant_gemm",),
    "b43cb70": ("quant_gemm",),
    # the fourteenth session: evoformer hd64 on free consumers; ALiBi's score divided by a; prefix_lm S 4k
    # on the two comparisons' persistent kernel and its posted setup
    "06a8ccd": ("evoformer-b1-d64", "evoformer-b8-d64", "evoformer-b32-d64"),  # hd128 keeps the turns
    "1818aa7": ("alibi",),
    "20d9944": ("prefix_lm-d64-s4096",),
    "95e3cb3": ("prefix_lm-d64-s4096",),
    # header code under Config::QRowsEpilogue and its knob (no default kernel takes it), the bench's GPU
    # input draw (device/solder/random_inputs.cuh: no kernel of the suite)
    "33a8ff3": (), "2f36598": (), "897cd61": (), "3c4bbb6": (),
    # the thirteenth session: the stagger's comment (short-rows), no emitted change
    "be0b532": (),
    # diff-combine: the dual kernel's staged combine on persistent blocks (the dual mode's files, a trait in
    # functors.cuh only the dual mode reads): diff_attn's one-kernel cells, S <= 4k (S 16k: two kernels)
    **{c: ("diff_attn-d64-s1024", "diff_attn-d64-s4096", "diff_attn-d128-s1024", "diff_attn-d128-s4096")
       for c in ("d57dfbd", "bfbe121", "aee87c9", "8ce3c21", "3f5ec8a")},
    # docmask7: stamps, PostedWork and two Q buffers on a data mask, by knob only: the default kernels' SASS
    # is the same before and after (document_mask S 1k / 4k / 16k by docmask7; causal S 1k / 4k, vanilla
    # S 1k / 4k, sliding_window S 1k, prefix_lm S 4k, alibi S 4k, evoformer B8 by the integrator)
    "c9909de": (), "e2e60b6": (), "f335db3": (), "e60f015": (),
    # the emitter's staged word-and-row writer in one place: `solder emit --cuda` of every example and of the
    # 40 attention suite cells byte-identical before and after
    "8c2a326": (),
    # the fifteenth session. ab-driver: `solder bench --json` records when its replays ran (no kernel).
    # diff-mc: the dual kernel in clusters of two by knob only (SOLDER_ATTN_DUAL_CLUSTER=2); the default dual
    # kernels' SASS is the same before and after (diff_attn hd64 and hd128, nvcc -cubin sm_90a, cuobjdump).
    # decode2: the GEMV stream for one-row products (llama_decode's projections; no attention kernel).
    "ca240b7": (), "70e1b78": (), "6187389": (), "f35abd2": (), "4129d75": (), "b25037d": (),
    # lrb5: independent kernels on forked streams (no attention program of the suite has two independent
    # launches: each chain launches as before) and its programmatic-launch rule; the kernels' code unchanged
    "c884a56": (), "04d86a9": (),
    # the skeletons dump's header text (src/fusion/whole_contractions.cpp): no kernel
    "8fe2d0a": (),
    # whole_contractions.cpp's bookkeeping in one lambda: every example's emitted code byte-identical
    "e91aebb": (), "2c20814": (),
    # s-overlap: OverlapS merged (182e047, e582d77) and reverted (1f8c1c2): the kernel files are as before
    "182e047": (), "e582d77": (), "1f8c1c2": (),
    # docmask8: the ids ahead of the compare merged (b976fea, 4756acb) and reverted: the kernel files as before
    "b976fea": (), "4756acb": (), "de2775c": (),
    # decode3: split-KV for one-row streams and the warp-per-key reduce (only llama_decode's emitted code
    # changes among the examples and the 120 suite cells)
    "308a98d": (), "1071bc7": (), "daa3db3": (), "407ca55": (),  # (407ca55 reverts them: as before)
}

TARGET_PEER = {"vanilla": "sdpa_cudnn", "gqa": "sdpa_cudnn", "causal": "sdpa_cudnn", "attention_fp8": "sdpa_cudnn"}  # others: flex
# (attention_fp8: cuDNN's bf16 kernel on the dequantized inputs; the fp8 kernel should be well under 1.0x)
TARGET_RATIO = {"sdpa_cudnn": 1.0, "flex": 0.83}
HD128_TFLOPS = 600.0
PEERS_SHOWN = ["sdpa_cudnn", "sdpa_flash", "flex", "compile"]

# The order in which stale cells are wanted (issue 17's open questions first): --stale prints them so.
PRIORITY = [r"^(vanilla|causal)-d128-s(4096|16384)$", r"^softcap-", r"^sliding_window-", r"^prefix_lm-",
            r"^diff_attn-", r"^(gqa|vanilla)-d64-s(4096|16384)$", r"^causal-d64-s16384$", r"^causal-d64-s4096$",
            r"-s1024$", r"^alibi-", r"^evoformer-", r"^document_mask-"]


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True).stdout.strip()


def renamed_hashes(results=RESULTS):
    out = {}
    for path in glob.glob(os.path.join(results, "**", "hashes.txt"), recursive=True):
        for line in open(path):
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
    return out


def call_folders(extra=(), results=RESULTS):
    found = set()
    for pat in ("solder*.jsonl", "peers*.jsonl"):
        for p in glob.glob(os.path.join(results, "**", pat), recursive=True):
            found.add(os.path.dirname(p))
    found.update(os.path.abspath(e) for e in extra)
    return sorted(found)


# solder-rN.jsonl: the spots files' convention for another round of the default kernel (a tag r2, r3, ...
# with no knob), as merged_s11d.spots and merged_s15.spots wrote before merged_call.sh had ROUNDS.
ROUND_FILE = re.compile(r"^solder-r[0-9]+\.jsonl$")


def median_record(records, key="median_us"):
    """One record standing for several rounds of the same measurement: the median of their medians (the
    mean of the middle two for an even count), with `rounds` set to how many there were."""
    rs = sorted(records, key=lambda r: r[key])
    n = len(rs)
    mid = rs[n // 2] if n % 2 else rs[n // 2 - 1]
    value = rs[n // 2][key] if n % 2 else (rs[n // 2 - 1][key] + rs[n // 2][key]) / 2
    return {**mid, key: value, "rounds": n}


def solder_records(folder):
    """(case id, record) for the default kernel's records of a call."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "solder*.jsonl"))):
        name = os.path.basename(path)
        if name != "solder.jsonl" and not name.startswith("solder-attention") and not ROUND_FILE.match(name):
            continue                  # solder-TAG.jsonl: a knob forced for that spot
        for r in report.read_jsonl(path):
            if "result" in r and isinstance(r["result"], dict):
                if r.get("mode", "default") not in ("default", "new"):
                    continue
                r = {**r["result"], "case": r.get("case") or r["result"].get("case")}
            if r.get("error") or not isinstance(r.get("median_us"), (int, float)):
                continue
            cands = [c for c in suites.cases("attention")]
            for c in report.match_case(r, cands):
                out.append((c.id, r))
    return out


def peer_records(folder):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "peers*.jsonl"))):
        for r in report.read_jsonl(path):
            if r.get("record", "peer") == "peer" and r.get("suite") == "attention" and not r.get("small"):
                out.append(r)
    return out


class Status:
    def __init__(self, emit=None, extra=(), results=RESULTS, head="HEAD"):
        # head: the commit whose kernels count as current (HEAD; a fixed commit in tests, whose answers
        # must not change as later kernel changes land)
        self.head_ref = head
        self.head = git("rev-parse", "--short", head)
        self.results = results
        self.rename = renamed_hashes(results)
        self.emit = emit
        self._diff_cache, self._time_cache, self._emit_cache = {}, {}, {}
        self.calls = []
        for folder in call_folders(extra, results):
            rel = os.path.relpath(folder, results)
            key = rel[:-2] if rel.endswith("/r") else rel
            sol = solder_records(folder)
            peers = peer_records(folder)
            if not sol and not peers:
                continue
            commits = {r.get("commit") for _, r in sol if r.get("commit")}
            commit = self.rename.get(next(iter(commits)), next(iter(commits))) if len(commits) == 1 else None
            if not commits:
                commit = CALL_COMMITS.get(key)
            kernels = {}
            tsv = os.path.join(folder, "kernels.tsv")
            if os.path.exists(tsv):
                for line in open(tsv).read().splitlines()[1:]:
                    f = line.split("\t")
                    if len(f) >= 3:
                        kernels[f[0]] = (f[1], f[2])
            stamp = max([r.get("date", "") for r in peers] + [str(r.get("date", "")) for _, r in sol])
            self.calls.append({"folder": folder, "name": key, "commit": commit, "solder": sol, "peers": peers,
                               "kernels": kernels, "stamp": stamp})

    def commit_time(self, commit):
        if commit not in self._time_cache:
            self._time_cache[commit] = int(git("show", "-s", "--format=%ct", commit) or 0)
        return self._time_cache[commit]

    def same_kernel_files(self, commit, workload, case_id=None):
        """No commit between `commit` and HEAD changes the kernel files, except those that, by
        KERNEL_COMMITS_ONLY, change other workloads' (or other cells') kernels only. Without case_id, a
        commit that changes any cell of the workload counts."""
        key = (commit, workload, case_id)
        if key not in self._diff_cache:
            paths = KERNEL_PATHS + [f"examples/{workload}.sol"]
            if not git("rev-parse", "--verify", "--quiet", commit + "^{commit}"):
                self._diff_cache[key] = False
            else:
                changed = git("log", "--no-merges", "--format=%h", "--abbrev=7", f"{commit}..{self.head_ref}", "--",
                              *paths).split()
                def touches(only):
                    return any(w == workload or w == case_id or (case_id is None and w.startswith(workload + "-"))
                               for w in only)
                self._diff_cache[key] = not any(touches(KERNEL_COMMITS_ONLY.get(c[:7], (workload,)))
                                                for c in changed) and not self._diverged(commit, paths)
        return self._diff_cache[key]

    def _diverged(self, commit, paths):
        """The call's commit is not an ancestor of HEAD and its kernel files differ from its merge base."""
        base = git("merge-base", commit, self.head_ref)
        if base.startswith(git("rev-parse", commit)):
            return False
        return subprocess.run(["git", "-C", REPO, "diff", "--quiet", base, commit, "--", *paths],
                              capture_output=True).returncode != 0

    def emit_hash(self, case):
        if case.id not in self._emit_cache:
            args = [a for k, v in case.overrides.items() for a in ("--dim", f"{k}={v}")]
            src = subprocess.run([self.emit, "emit", case.example, "--cuda", *args], cwd=REPO,
                                 capture_output=True).stdout
            self._emit_cache[case.id] = hashlib.sha256(src).hexdigest()[:16]
        return self._emit_cache[case.id]

    def current(self, call, case):
        """(is the call's Solder kernel for this cell the current one, why)."""
        if case.id in call["kernels"] and self.emit:
            sha, tree = call["kernels"][case.id]
            ok = sha == self.emit_hash(case) and tree == git("rev-parse", f"{self.head_ref}:device/solder")
            return ok, "emitted source and headers " + ("equal" if ok else "differ")
        commit = call["commit"]
        if not commit:
            return False, "no commit holds the binary's source"
        if self.same_kernel_files(commit, case.workload, case.id):
            return True, f"kernel files of {commit} = HEAD's"
        return False, f"kernel files changed since {commit}"

    def cell(self, case, with_target=True):
        """The newest usable call for a cell: dict with the call, Solder's record and the peers. Without
        with_target: else the newest call with the current kernel and any peers (marked no_target)."""
        target = TARGET_PEER.get(case.workload, "flex")
        best = fallback = None
        for call in self.calls:
            sol = [r for cid, r in call["solder"] if cid == case.id]
            if not sol:
                continue
            ok, why = self.current(call, case)
            if not ok:
                continue
            rounds = {}
            for r in call["peers"]:
                if r.get("case") != case.id or r.get("status") != "ok" or not r.get("verified"):
                    continue
                rounds.setdefault((r["peer"], r.get("compile_mode")), []).append(r)
            peers = {}
            for (p, _), rs in rounds.items():
                r = median_record(rs)   # the median of a compile mode's rounds
                if p not in peers or r["median_us"] < peers[p]["median_us"]:
                    peers[p] = r        # the faster of two compile modes
            order = (self.commit_time(call["commit"]) if call["commit"] else 0, call["stamp"])
            got = {"order": order, "call": call, "solder": median_record(sol), "peers": peers, "why": why, "target": target}
            if target not in peers:
                if fallback is None or order > fallback["order"]:
                    fallback = got
                continue
            if best is None or order > best["order"]:
                best = got
        if best is None and fallback is not None and not with_target:
            return {**fallback, "no_target": True}
        return best


def cross_call(status, case):
    """For a cell without a usable call: the newest Solder record on the current kernel (any call) and
    the newest verified record of its target peer (any call): (solder record, its call, peer record, its
    call), each None where there is none. Not a same-call comparison: the table says so."""
    target = TARGET_PEER.get(case.workload, "flex")
    sol = peer = None
    for call in status.calls:
        for cid, r in call["solder"]:
            if cid == case.id and status.current(call, case)[0]:
                order = (status.commit_time(call["commit"]), call["stamp"])
                if sol is None or order > sol[0]:
                    sol = (order, r, call)
        for r in call["peers"]:
            if r.get("case") == case.id and r.get("peer") == target and r.get("status") == "ok" and r.get("verified"):
                if peer is None or r.get("date", "") > peer[0]:
                    peer = (r.get("date", ""), r, call)
    return (sol[1] if sol else None, sol[2] if sol else None, peer[1] if peer else None, peer[2] if peer else None)


def cross_table(status, cases, stale):
    lines = ["| case | Solder µs (current kernel) | its call | target peer µs | the peer's call | Solder / peer "
             "(across calls) |", "|---|---|---|---|---|---|"]
    for c in cases:
        if c.id not in stale:
            continue
        sr, scall, pr, pcall = cross_call(status, c)
        target = TARGET_PEER.get(c.workload, "flex")
        label = "cuDNN" if target == "sdpa_cudnn" else "Flex"
        mode = ""
        if pr and target == "flex":
            mode = f" {pr['compile_mode'].replace('-no-cudagraphs', '')}" if pr.get("compile_mode") else ", mode not recorded"
        lines.append(f"| {c.id} | {report._f(sr['median_us']) if sr else '—'} | "
                     f"{('`' + scall['name'] + '`') if scall else 'none on the current kernel'} | "
                     f"{(report._f(pr['median_us']) + ' (' + label + mode + ')') if pr else '—'} | "
                     f"{('`' + pcall['name'] + '` (' + pr.get('date', '')[:16].replace('T', ' ') + ')') if pr else '—'} | "
                     f"{('%.2f' % (sr['median_us'] / pr['median_us'])) if sr and pr else '—'} |")
    return lines


def floor_ceilings(status):
    """The newest measured copy / bf16 ceilings of any committed peers run (else the suite's reference)."""
    newest = None
    for path in glob.glob(os.path.join(status.results, "**", "peers*.jsonl"), recursive=True):
        for r in report.read_jsonl(path):
            if r.get("record") == "ceiling" and not r.get("error") and r.get("bf16_mm_TFLOPs"):
                if newest is None or r.get("date", "") > newest.get("date", ""):
                    newest = r
    return newest


def table(status, cases):
    ceil = floor_ceilings(status)
    lines, rows, stale, ratios = [], [], [], []
    met_count = [0, 0]
    head = ["case", "floor µs", "Solder µs", "×floor", "TFLOP/s", "cuDNN µs", "flash µs", "Flex µs (mode)",
            "torch.compile µs", "best peer", "Solder / best", "×floor of best", "target", "met", "source call"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for c in cases:
        fl = suites.floor_us(c, ceil)
        target = TARGET_PEER.get(c.workload, "flex")
        tgt_text = f"≤ {TARGET_RATIO[target]:.2f}× " + ("cuDNN" if target == "sdpa_cudnn" else "Flex")
        hd128 = c.dims().get("D") == 128 and c.dims().get("S", 0) >= 4096 and c.workload in TARGET_PEER
        if hd128:
            tgt_text += f", ≥ {HD128_TFLOPS:.0f} TFLOP/s"
        got = status.cell(c, with_target=False)
        if not got or got.get("no_target"):
            stale.append(c.id)
        if not got:
            lines.append(f"| {c.id} | {report._f(fl)} | — | — | — | — | — | — | — | — | — | — | {tgt_text} | "
                         "no call | — |")
            rows.append((c, fl, {}))
            continue
        s = got["solder"]["median_us"]
        tflops = c.flops() / s / 1e6
        cells, bars, best = [], {"Solder": s}, None
        for p in PEERS_SHOWN:
            r = got["peers"].get(p)
            if not r:
                cells.append("—")
                continue
            us = r["median_us"]
            bars[report.PEER_LABEL[p]] = us
            mode = ""
            if p == "flex":
                mode = " (max-autotune)" if "max-autotune" in str(r.get("compile_mode")) else " (default)"
            cells.append(f"{report._f(us)}{mode}")
            if best is None or us < best[1]:
                best = (p, us)
        call = got["call"]
        src = f"`{call['name']}` ({call['commit']}, {call['stamp'][:16].replace('T', ' ')})"
        if got.get("no_target"):
            best_text = [report.PEER_LABEL[best[0]], f"{s / best[1]:.2f}", report._f(best[1] / fl)] if best else ["—"] * 3
            lines.append(f"| {c.id} | {report._f(fl)} | {report._f(s)} | {report._f(s / fl)} | {tflops:.0f} | "
                         + " | ".join(cells) + " | " + " | ".join(best_text)
                         + f" | {tgt_text} | unknown: no {'cuDNN' if target == 'sdpa_cudnn' else 'Flex'} in the call | {src} |")
            rows.append((c, fl, bars))
            continue
        t_us = got["peers"][target]["median_us"]
        ratio_t = s / t_us
        met = ratio_t <= TARGET_RATIO[target] and (not hd128 or tflops >= HD128_TFLOPS)
        met_text = "**met**" if met else "missed"
        if hd128:
            met_text += f" ({ratio_t:.2f}× cuDNN {'✓' if ratio_t <= 1.0 else '✗'}, {tflops:.0f} TFLOP/s " \
                        f"{'✓' if tflops >= HD128_TFLOPS else '✗'})"
        ratios.append(s / best[1])
        met_count[0] += met
        met_count[1] += 1
        lines.append(f"| {c.id} | {report._f(fl)} | {report._f(s)} | {report._f(s / fl)} | {tflops:.0f} | "
                     + " | ".join(cells)
                     + f" | {report.PEER_LABEL[best[0]]} | {s / best[1]:.2f} | {report._f(best[1] / fl)} | "
                     f"{tgt_text} ({ratio_t:.2f}×) | {met_text} | {src} |")
        rows.append((c, fl, bars))
    return lines, rows, stale, ratios, ceil, met_count


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stale", action="store_true", help="print the cells with no usable call, most wanted first")
    ap.add_argument("--calls", action="store_true", help="also list every call, its commit and whether it is current")
    ap.add_argument("--md", help="write the table here instead of stdout")
    ap.add_argument("--png", help="write the plot here (report.py's plot)")
    ap.add_argument("--emit", help="a solder binary built from HEAD: compare kernels.tsv's emitted-source hashes")
    ap.add_argument("--extra", nargs="*", default=[], help="more call folders (e.g. a call not yet committed)")
    a = ap.parse_args(argv)
    st = Status(a.emit, a.extra)
    cases = suites.cases("attention")
    lines, rows, stale, ratios, ceil, met_count = table(st, cases)
    if a.stale:
        def rank(cid):
            return next((i for i, p in enumerate(PRIORITY) if re.search(p, cid)), len(PRIORITY))
        print("\n".join(sorted(stale, key=rank)))
        return 0
    g = report.geomean(ratios)
    text = "\n".join(lines) + "\n"
    text += (f"\n{len(cases) - len(stale)} of {len(cases)} cells have a call with the current kernel and the "
             f"target peer; the target is met in {met_count[0]} of them. Geometric mean of Solder / best peer "
             f"of the same call over them: {g:.2f}.\n" if g else "")
    if ceil:
        text += (f"Floor = max(bytes / {ceil['copy_TBps']:.2f} TB/s, FLOPs / {ceil['bf16_mm_TFLOPs']:.0f} TFLOP/s), "
                 f"the ceilings measured on {ceil.get('date', '?')[:10]} ({ceil.get('device', '?')}).\n")
    if stale:
        text += (f"\n**{len(stale)} cells have no call with the current kernel and the target peer** (not met / "
                 "missed: unknown). The newest numbers there, Solder's on the current kernel and the peer's "
                 "from another call (a ratio across calls, within the few per cent the same kernel moves "
                 "between calls, and only as good as the peer's mode):\n\n")
        text += "\n".join(cross_table(st, cases, stale)) + "\n"
    if a.calls:
        text += "\nCalls read (the commit of the Solder binary; the workloads whose kernel it ran is HEAD's):\n\n"
        for call in sorted(st.calls, key=lambda k: k["stamp"]):
            wls = sorted({suites.CASES_BY_ID[cid].workload for cid, _ in call["solder"]})
            cur = [w for w in wls if call["commit"] and st.same_kernel_files(call["commit"], w)]
            text += f"- `{call['name']}`: {call['commit'] or 'no commit'}, {call['stamp'][:16]}; " \
                    f"current: {', '.join(cur) or 'none'}\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    else:
        print(text, end="")
    if a.png:
        info = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-27", "commit": st.head,
                "torch": "2.11.0+cu130"}
        report.plot_suite("attention (current kernels, peers of the same call)", rows, info, a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
