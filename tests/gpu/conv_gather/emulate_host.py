#!/usr/bin/env python3
"""Runs the gathered-GEMM kernels Solder generates for a convolution program on the host (no GPU).

    tests/gpu/conv_gather/emulate_host.py [--solder build/solder] [--env NAME=VALUE]... PROGRAM.sol [--dim NAME=VALUE]...

PROGRAM is examples/conv_chain.sol or one of tests/gpu/conv_gather/*.sol (x -> conv (stride, padding) ->
[+ b1] -> ReLU -> h -> 1x1 conv -> y2). `solder emit --cuda --json` gives the module; every kernel of it
that runs on the gathered GEMM is compiled as C++ with host_shim.h (each CUDA thread a std::thread,
BlockGemm a scalar stand-in over the same swizzled layout, the cluster's shared memory shared) and run on
random inputs; h and y2 (whichever the gathered kernels write) are compared with numpy's float64
convolution. Prints one PASS/FAIL line. What it does not check: the tensor cores' fragment layout
(block_gemm.cuh, unchanged), cp.async's asynchrony, timing. Needs g++ (C++20) and the CUDA headers.
"""
import argparse, json, os, re, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_dims(sol, overrides):
    dims = {}
    for line in open(sol):
        line = line.split("#")[0].strip()
        if line.startswith("dim "):
            for part in line[4:].split(","):
                k, v = part.split("=")
                if v.strip().isdigit():  # derived dims (H2 = H // 2) are computed where needed
                    dims[k.strip()] = int(v)
    for o in overrides:
        k, v = o.split("=")
        dims[k] = int(v)
    return dims


def geometry(sol, d):
    """(NB, C, H, W, O1, O2, KH, KW, stride, padH, padW, HO, WO, has_bias)"""
    if "NB" in d:  # tests/gpu/conv_gather programs
        s = int(re.search(r"r \* (\d+) \+ u", open(sol).read()).group(1))
        return d["NB"], d["C"], d["H"], d["W"], d["O1"], d["O2"], d["KH"], d["KW"], s, d["KH"] // 2, d["KW"] // 2, d["HO"], d["WO"], True
    ks = d["KS"]
    return d["N"], d["IC"], d["HH"], d["WW"], d["OC1"], d["OC2"], ks, ks, 1, ks // 2, ks // 2, d["HH"], d["WW"], False


def to_bits(a, dtype):
    a = np.asarray(a, np.float32)
    if dtype == "__half":
        return a.astype(np.float16).view(np.uint16)
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(u, dtype):
    if dtype == "__half":
        return u.view(np.float16).astype(np.float64)
    return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def conv(x, w, stride, ph, pw, ho, wo):
    nb, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((nb, c, h + 2 * ph + kh, wd + 2 * pw + kw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    out = np.zeros((nb, o, ho, wo))
    for u in range(kh):
        for v in range(kw):
            patch = xp[:, :, u:u + stride * (ho - 1) + 1:stride, v:v + stride * (wo - 1) + 1:stride]
            out += np.einsum("bchw,oc->bohw", patch, w[:, :, u, v])
    return out


def host_source(kernels):
    body = []
    for name, text in kernels:
        t = re.sub(r"extern __shared__ __align__\(128\) unsigned char smem\[\];", "unsigned char* smem = shim_smem;", text)
        t = re.sub(r'asm volatile\("barrier\.cluster[^;]*;[^;]*;" ::: "memory"\);', "shim_cluster_barrier->arrive_and_wait();", t)
        t = re.sub(r'asm volatile\("mapa[^;]*;" : "=r"\((\w+)\) : "r"\((\w+)\), "r"\((\w+)\)\);', r"\1 = shim_mapa(\2, \3);", t)
        # the cluster chain's 16-byte DSM accesses (four words each)
        t = re.sub(r'asm volatile\("ld\.shared::cluster\.v4\.f32[^;]*;" : "=f"\(([^)]*)\), "=f"\(([^)]*)\), "=f"\(([^)]*)\), "=f"\(([^)]*)\) : '
                   r'"r"\(([^)]*)\) : "memory"\);',
                   r"\1 = shim_ld_cluster(\5); \2 = shim_ld_cluster(\5 + 4); \3 = shim_ld_cluster(\5 + 8); \4 = shim_ld_cluster(\5 + 12);", t)
        t = re.sub(r'asm volatile\("st\.shared::cluster\.v4\.b32[^;]*;" :: "r"\(([^)]*)\), "r"\(([^)]*)\), "r"\(([^)]*)\), "r"\(([^)]*)\), '
                   r'"r"\(([^)]*)\) : "memory"\);',
                   r"shim_st_cluster(\1, \2); shim_st_cluster(\1 + 4, \3); shim_st_cluster(\1 + 8, \4); shim_st_cluster(\1 + 12, \5);", t)
        t = re.sub(r'asm volatile\("ld\.shared::cluster[^;]*;" : "=f"\(part_\) : "r"\(remote_\) : "memory"\);', "part_ = shim_ld_cluster(remote_);", t)
        t = re.sub(r'asm volatile\("griddepcontrol\.\w+;" ::: "memory"\);', "", t)  # programmatic launch: nothing to emulate
        assert "asm" not in t, "unhandled asm in " + name
        if os.environ.get("EMULATE_CORRUPT"):  # negative control: drop each rank's last K step
            t = t.replace("kt_ < kt1_; ++kt_", "kt_ < kt1_ - 1; ++kt_")
        body.append(t)
    return body


def run_host(kernels, blocks, names, dtype, counts, inputs, tmp):
    """Compiles and runs the kernels; inputs: name -> uint16 bits; returns name -> uint16 bits."""
    main_cpp = ['#include "host_shim.h"', "#include <cstdio>"] + host_source(kernels) + ["int main() {"]
    for n in names:
        main_cpp.append(f"  std::vector<{dtype}> {n}_buf({counts[n]});")
        main_cpp.append(f'  {{ FILE* f = fopen("{tmp}/{n}.bin", "rb"); if (f) {{ fread({n}_buf.data(), 2, {counts[n]}, f); fclose(f); }} }}')
    args = ", ".join(f"{n}_buf.data()" for n in names)
    for name, text in kernels:
        threads = int(re.search(r"__launch_bounds__\((\d+)\)", text).group(1))
        m = re.search(r"blockIdx\.x % (\d+);  // split-K", text)
        main_cpp.append(f"  shim_launch([&] {{ {name}({args}); }}, {blocks[name]}, {threads}, {int(m.group(1)) if m else 1}, 232448);")
    for n in names:
        main_cpp.append(f'  {{ FILE* f = fopen("{tmp}/{n}.out", "wb"); fwrite({n}_buf.data(), 2, {n}_buf.size(), f); fclose(f); }}')
    main_cpp.append("}")
    open(f"{tmp}/main.cpp", "w").write("\n".join(main_cpp) + "\n")
    for n, bits in inputs.items():
        bits.tofile(f"{tmp}/{n}.bin")
    subprocess.check_call(["g++", "-O1", "-std=c++20", "-pthread", f"-I{HERE}", "-I/usr/local/cuda/include", "-o", f"{tmp}/emu", f"{tmp}/main.cpp"])
    subprocess.check_call([f"{tmp}/emu"])
    return {n: np.fromfile(f"{tmp}/{n}.out", np.uint16) for n in names}


def nerf(opt, d, kernels, blocks):
    """nerf_mlp's gathered layers: h0 = relu(x w0 + b0), h5 = relu(cat(x, h4) w5 + b5), hv = relu(cat(feat, dir) w_view + b_view),
    each from random inputs (h4 and feat too: the skeleton's layers are not emulated)."""
    n, IN, DIN, H = d["N"], d["IN"], d["DIN"], d["H"]
    H2 = H // 2
    shapes = {"x": (n, IN), "dir": (n, DIN), "h4": (n, H), "feat": (n, H), "w0": (IN, H), "b0": (H,), "w5": (IN + H, H), "b5": (H,),
              "w_view": (H + DIN, H2), "b_view": (H2,), "h0": (n, H), "h5": (n, H), "hv": (n, H2)}
    sig = re.search(r"\w+_kernel\(([^)]*)\)", kernels[0][1]).group(1)
    params = re.findall(r"(const )?(__half|__nv_bfloat16|float)\* __restrict__ (\w+)", sig)
    names, dtype = [p[2] for p in params], params[0][1]
    counts = {nm: int(np.prod(shapes.get(nm, (n * (IN + H + DIN),)))) for nm in names}
    rng = np.random.default_rng(opt.seed)
    vals, bits = {}, {}
    for nm in ("x", "dir", "h4", "feat", "w0", "b0", "w5", "b5", "w_view", "b_view"):
        bits[nm] = to_bits(rng.normal(0, 1 if nm in ("x", "dir", "h4", "feat") else 0.1, shapes[nm]), dtype)
        vals[nm] = from_bits(bits[nm], dtype).reshape(shapes[nm])
    with tempfile.TemporaryDirectory() as tmp:
        out = run_host(kernels, blocks, names, dtype, counts, bits, tmp)
    refs = {"h0": np.maximum(vals["x"] @ vals["w0"] + vals["b0"], 0),
            "h5": np.maximum(np.concatenate([vals["x"], vals["h4"]], 1) @ vals["w5"] + vals["b5"], 0),
            "hv": np.maximum(np.concatenate([vals["feat"], vals["dir"]], 1) @ vals["w_view"] + vals["b_view"], 0)}
    ok, report = True, []
    for name, _ in kernels:
        t = name[:-len("_kernel")]
        got = from_bits(out[t], dtype).reshape(shapes[t])
        err = np.abs(got - refs[t]).max() / max(np.abs(refs[t]).max(), 1e-9)
        ok &= err < 1e-2
        report.append(f"{t} rel {err:.1e}")
    print(f"{'PASS' if ok else 'FAIL'} nerf_mlp {' '.join(opt.dim)} {' '.join(opt.env)}: {', '.join(report)}")
    return 0 if ok else 1


def gemm_cast(opt, d, kernels, blocks):
    """tests/gpu/conv_gather/gemm_cast.sol: y = cast(a * 2, bf16) b."""
    m, n, k = d["M"], d["N"], d["K"]
    shapes = {"a": (m, k), "b": (k, n), "y": (m, n)}
    sig = re.search(r"\w+_kernel\(([^)]*)\)", kernels[0][1]).group(1)
    params = re.findall(r"(const )?(__half|__nv_bfloat16|float)\* __restrict__ (\w+)", sig)
    names, dtype = [p[2] for p in params], params[0][1]
    rng = np.random.default_rng(opt.seed)
    bits = {nm: to_bits(rng.normal(0, 1, shapes[nm]), dtype) for nm in ("a", "b")}
    vals = {nm: from_bits(b, dtype).reshape(shapes[nm]) for nm, b in bits.items()}
    with tempfile.TemporaryDirectory() as tmp:
        out = run_host(kernels, blocks, names, dtype, {nm: int(np.prod(shapes[nm])) for nm in names}, bits, tmp)
    ref = (vals["a"] * 2) @ vals["b"]  # a * 2 is exact in bf16
    err = np.abs(from_bits(out["y"], dtype).reshape(shapes["y"]) - ref).max() / np.abs(ref).max()
    ok = err < 1e-2
    print(f"{'PASS' if ok else 'FAIL'} gemm_cast {' '.join(opt.dim)} {' '.join(opt.env)}: y rel {err:.1e}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--solder", default="build/solder")
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--seed", type=int, default=1)
    opt = ap.parse_args()
    env = dict(os.environ)
    for e in opt.env:
        k, v = e.split("=", 1)
        env[k] = v
    dim_args = sum((["--dim", d] for d in opt.dim), [])
    emitted = json.loads(subprocess.check_output([opt.solder, "emit", opt.program, "--cuda", "--json"] + dim_args, env=env))
    blocks = {c["kernel"]: c["blocks"] for c in emitted["contractions"]}
    source = emitted["source"]
    chunks = re.split(r"(?m)^// ---- kernel (\w+):.*$", source)
    kernels = []  # (name, text)
    for i in range(1, len(chunks), 2):
        name, text = chunks[i], chunks[i + 1]
        if "implicit GEMM with gathered operands" in text:
            kernels.append((name, text))
    if not kernels:
        print(f"SKIP {opt.program} {' '.join(opt.dim)}: no gathered kernel in the plan")
        return 0
    d = parse_dims(opt.program, opt.dim)
    if os.path.basename(opt.program).startswith("nerf_mlp"):
        return nerf(opt, d, kernels, blocks)
    if os.path.basename(opt.program).startswith("gemm_cast"):
        return gemm_cast(opt, d, kernels, blocks)
    nb, c, h, w, o1, o2, kh, kw, stride, ph, pw, ho, wo, has_bias = geometry(opt.program, d)
    shapes = {"x": (nb, c, h, w), "w1": (o1, c, kh, kw), "b1": (o1,), "w2": (o2, o1), "h": (nb, o1, ho, wo), "y2": (nb, o2, ho, wo)}
    sig = re.search(r"h?\w+_kernel\(([^)]*)\)", kernels[0][1]).group(1)
    params = re.findall(r"(const )?(__half|__nv_bfloat16|float)\* __restrict__ (\w+)", sig)
    dtype = params[0][1]
    rng = np.random.default_rng(opt.seed)
    values = {"x": rng.normal(0, 1, shapes["x"]), "w1": rng.normal(0, 0.1, shapes["w1"]), "b1": rng.normal(0, 0.5, shapes["b1"]),
              "w2": rng.normal(0, 0.1, shapes["w2"])}
    written = [name[:-len("_kernel")] for name, _ in kernels]
    h_ref = conv(from_bits(to_bits(values["x"], dtype), dtype).reshape(shapes["x"]),
                 from_bits(to_bits(values["w1"], dtype), dtype).reshape(shapes["w1"]), stride, ph, pw, ho, wo)
    if has_bias:
        h_ref += from_bits(to_bits(values["b1"], dtype), dtype)[None, :, None, None]
    h_ref = np.maximum(h_ref, 0)
    if "h" not in written:  # a fused kernel computes h: the gathered y2 reads the reference's
        values["h"] = h_ref
    with tempfile.TemporaryDirectory() as tmp:
        body = host_source(kernels)
        names = [p[2] for p in params]
        main_cpp = ['#include "host_shim.h"', "#include <cstdio>"] + body + ["int main() {"]
        for n in names:
            count = int(np.prod(shapes[n]))
            main_cpp.append(f"  std::vector<{dtype}> {n}_buf({count});")
            main_cpp.append(f'  {{ FILE* f = fopen("{tmp}/{n}.bin", "rb"); if (f) {{ fread({n}_buf.data(), 2, {count}, f); fclose(f); }} }}')
        args = ", ".join(f"{n}_buf.data()" for n in names)
        for name, text in kernels:
            threads = int(re.search(r"__launch_bounds__\((\d+)\)", text).group(1))
            m = re.search(r"blockIdx\.x % (\d+);  // split-K", text)
            cluster = int(m.group(1)) if m else 1
            main_cpp.append(f"  shim_launch([&] {{ {name}({args}); }}, {blocks[name]}, {threads}, {cluster}, 232448);")
        for n in names:
            main_cpp.append(f'  {{ FILE* f = fopen("{tmp}/{n}.out", "wb"); fwrite({n}_buf.data(), 2, {n}_buf.size(), f); fclose(f); }}')
        main_cpp.append("}")
        open(f"{tmp}/main.cpp", "w").write("\n".join(main_cpp) + "\n")
        for n, v in values.items():
            if n in names:
                bits = to_bits(v, dtype)
                values[n] = from_bits(bits, dtype).reshape(shapes[n])
                bits.tofile(f"{tmp}/{n}.bin")
        subprocess.check_call(["g++", "-O1", "-std=c++20", "-pthread", f"-I{HERE}", "-I/usr/local/cuda/include", "-o", f"{tmp}/emu",
                               f"{tmp}/main.cpp"])
        subprocess.check_call([f"{tmp}/emu"])
        out = {n: from_bits(np.fromfile(f"{tmp}/{n}.out", np.uint16), dtype).reshape(shapes[n]) for n in ("h", "y2") if n in names}
        if "h" not in written:
            out["h"] = values["h"]
    report, ok = [], True
    if "h" in written:
        ref = h_ref
        err = np.abs(out["h"] - ref).max() / max(np.abs(ref).max(), 1e-9)
        ok &= err < 1e-2
        report.append(f"h rel {err:.1e}")
    if "y2" in written:
        ref = np.einsum("bohw,po->bphw", out["h"], values["w2"])
        err = np.abs(out["y2"] - ref).max() / max(np.abs(ref).max(), 1e-9)
        ok &= err < 1e-2
        report.append(f"y2 rel {err:.1e}")
    label = f"{os.path.basename(opt.program)} {' '.join(opt.dim)} {' '.join(opt.env)}".strip()
    print(f"{'PASS' if ok else 'FAIL'} {label}: {', '.join(report)} (kernels {', '.join(written)})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
