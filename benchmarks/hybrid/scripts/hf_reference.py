#!/usr/bin/env python3
"""transformers' Qwen3.5 as an independent reference for prefixd-hybrid's CUDA backend.

  hf_reference.py gpu --bin prefixd-hybrid --work DIR --out transformers.md [--budget S]
      On a GPU machine with PyTorch and transformers (run-gpu-check.sh calls it):
      1. writes random-weight checkpoints with the upstream tensor names (config.json +
         model.safetensors, text-only layout "model.layers.N...", tied embeddings);
      2. runs `prefixd-hybrid logits --backend cuda` on them, loads the same files into
         transformers' Qwen3_5ForCausalLM in fp32 on the GPU, and compares the logits after the
         prompt and at each greedy step, and the greedy tokens;
      3. times transformers' prefill (use_cache, last-token logits) at 2K/8K/32K tokens on the
         Qwen3.5-0.8B and 4B shapes, in bf16 and fp32: the cold prefill a user would otherwise run.
      Writes a markdown report; exits 1 when a comparison fails.

  hf_reference.py selftest --bin prefixd-hybrid --work DIR
      numpy only (runs in CI, no torch): writes a checkpoint of the tiny shape, checks that
      prefixd-hybrid loads it and decodes on the CPU, and that the comparison fails on NaN/Inf,
      on a wrong token and on an error beyond tolerance, and tolerates a near tie.

Only numpy is needed at import time; torch and transformers are imported by `gpu`.
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np

# ---- Shapes (Hugging Face text-config fields) -------------------------------------------------

QWEN35_COMMON = {
    "model_type": "qwen3_5_text",
    "architectures": ["Qwen3_5ForCausalLM"],
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "head_dim": 256,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "vocab_size": 248320,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "max_position_embeddings": 262144,
    "full_attention_interval": 4,
}

SHAPES = {
    # The built-in shapes of prefixd-hybrid (benchmarks/hybrid/config.cc), field for field.
    "tiny": dict(QWEN35_COMMON, vocab_size=512, hidden_size=64, intermediate_size=128,
                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                 linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                 linear_value_head_dim=16),
    "small": dict(QWEN35_COMMON, vocab_size=32768, hidden_size=512, intermediate_size=1536,
                  num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=1,
                  head_dim=128, linear_num_key_heads=4, linear_num_value_heads=8,
                  linear_key_head_dim=64, linear_value_head_dim=64),
    "qwen3.5-0.8b": dict(QWEN35_COMMON, hidden_size=1024, intermediate_size=3584,
                         num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2,
                         linear_num_value_heads=16),
    "qwen3.5-4b": dict(QWEN35_COMMON, hidden_size=2560, intermediate_size=9216,
                       num_hidden_layers=32, num_attention_heads=16, num_key_value_heads=4,
                       linear_num_value_heads=32),
}


def hf_config(shape):
    """The config.json dict for a shape: explicit layer_types and RoPE parameters."""
    c = dict(SHAPES[shape])
    interval = c.pop("full_attention_interval")
    c["layer_types"] = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                        for i in range(c["num_hidden_layers"])]
    half = int(c["head_dim"] * 0.25) // 2
    # M-RoPE sections sum to the rotated frequencies ([11, 11, 10] for head_dim 256); for text
    # all three positions are equal, so they do not change the result.
    first = -(-half // 3)
    second = -(-(half - first) // 2)
    section = [first, second, half - first - second]
    c["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e7,
                            "partial_rotary_factor": 0.25, "mrope_section": section,
                            "mrope_interleaved": True}
    return c


def tensor_specs(c):
    """(name, shape, init, gain) for every parameter, with the upstream names of a text-only
    checkpoint. Init kinds mirror prefixd-hybrid's synthetic weights (weights.h)."""
    h, ffn = c["hidden_size"], c["intermediate_size"]
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    heads, kv, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    conv_dim = 2 * hk * dk + hv * dv
    specs = [("model.embed_tokens.weight", (c["vocab_size"], h), "embedding", 1.0)]
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        specs.append((p + "input_layernorm.weight", (h,), "zero_norm", 1.0))
        if kind == "linear_attention":
            a = p + "linear_attn."
            specs += [(a + "in_proj_qkv.weight", (conv_dim, h), "linear", 1.0),
                      (a + "in_proj_z.weight", (hv * dv, h), "linear", 1.0),
                      (a + "in_proj_b.weight", (hv, h), "linear", 1.0),
                      (a + "in_proj_a.weight", (hv, h), "linear", 1.0),
                      (a + "conv1d.weight", (conv_dim, 1, c["linear_conv_kernel_dim"]), "conv", 1.0),
                      (a + "A_log", (hv,), "a_log", 1.0),
                      (a + "dt_bias", (hv,), "dt_bias", 1.0),
                      (a + "norm.weight", (dv,), "plain_norm", 1.0),
                      (a + "out_proj.weight", (h, hv * dv), "linear", 0.5)]
        else:
            a = p + "self_attn."
            specs += [(a + "q_proj.weight", (heads * d * 2, h), "linear", 1.0),
                      (a + "k_proj.weight", (kv * d, h), "linear", 1.0),
                      (a + "v_proj.weight", (kv * d, h), "linear", 1.0),
                      (a + "o_proj.weight", (h, heads * d), "linear", 0.5),
                      (a + "q_norm.weight", (d,), "zero_norm", 1.0),
                      (a + "k_norm.weight", (d,), "zero_norm", 1.0)]
        specs += [(p + "post_attention_layernorm.weight", (h,), "zero_norm", 1.0),
                  (p + "mlp.gate_proj.weight", (ffn, h), "linear", 1.0),
                  (p + "mlp.up_proj.weight", (ffn, h), "linear", 1.0),
                  (p + "mlp.down_proj.weight", (h, ffn), "linear", 0.5)]
    specs.append(("model.norm.weight", (h,), "zero_norm", 1.0))
    if not c["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (c["vocab_size"], h), "embedding", 1.0))
    return specs


def random_tensor(rng, shape, init, gain):
    n = int(np.prod(shape))
    u = rng.random(n, dtype=np.float32) * 2 - 1  # uniform [-1, 1): std 1/sqrt(3)
    s3 = math.sqrt(3.0)
    if init == "linear":
        x = u * np.float32(s3 * gain / math.sqrt(shape[-1]))
    elif init == "embedding":
        x = u * np.float32(s3 * 0.02)
    elif init == "zero_norm":
        x = u * np.float32(0.1)
    elif init == "plain_norm":
        x = 1 + u * np.float32(0.1)
    elif init == "conv":
        x = u * np.float32(s3 / math.sqrt(3 * shape[-1]))
    elif init == "a_log":
        x = np.log(1 + (u + 1) * 7.5)  # log U(1, 16)
    elif init == "dt_bias":
        dt = np.exp(np.log(1e-3) + (u + 1) / 2 * (np.log(1e-1) - np.log(1e-3)))
        x = np.log(np.expm1(dt))  # softplus⁻¹(dt)
    else:
        raise ValueError(init)
    return x.astype(np.float32).reshape(shape)


def write_checkpoint(directory, shape, seed=1):
    """config.json and model.safetensors (fp32) of random weights for `shape` in `directory`."""
    os.makedirs(directory, exist_ok=True)
    c = hf_config(shape)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    specs = tensor_specs(c)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dims, _, _ in specs:
        nbytes = 4 * int(np.prod(dims))
        header[name] = {"dtype": "F32", "shape": list(dims), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    rng = np.random.default_rng(seed)
    path = os.path.join(directory, "model.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, dims, init, gain in specs:
            random_tensor(rng, dims, init, gain).tofile(f)
    return path


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


# ---- Running prefixd-hybrid and comparing -----------------------------------------------------

def run_ours(binary, directory, backend, prompt_tokens, decode_tokens, seed=1):
    """`prefixd-hybrid logits` on a checkpoint: (prompt, tokens, logits [decode, vocab])."""
    out = os.path.join(directory, f"ours-{backend}-{prompt_tokens}")
    subprocess.run([binary, "logits", "--backend", backend,
                    "--model", os.path.join(directory, "config.json"),
                    "--weights", os.path.join(directory, "model.safetensors"),
                    "--prompt-tokens", str(prompt_tokens), "--prompt-seed", str(seed),
                    "--decode-tokens", str(decode_tokens), "--out", out], check=True)
    with open(out + ".json") as f:
        meta = json.load(f)
    logits = np.fromfile(out + ".f32", dtype="<f4").reshape(decode_tokens, meta["vocab"])
    return meta["prompt"], meta["tokens"], logits, meta


def compare_runs(ours_tokens, ours_logits, ref_tokens, ref_logits, tolerance):
    """Greedy runs of two implementations from the same prompt. Row s of each logits array came
    from the same inputs as long as the tokens before s agree, so rows are compared up to the
    first differing token. A difference there fails unless the reference's top two logits were
    within `tolerance` of each other (a near tie that rounding may break either way).
    Returns a dict: ok, worst (largest max|Δ| / max|ref| over compared rows), agree, total,
    rows, note."""
    out = {"ok": True, "worst": 0.0, "agree": 0, "total": len(ref_tokens), "rows": 0, "note": ""}
    if len(ours_tokens) != len(ref_tokens) or ours_logits.shape != ref_logits.shape:
        return dict(out, ok=False, note="different lengths")
    for s in range(len(ref_tokens)):
        a = ours_logits[s].astype(np.float64)
        b = ref_logits[s].astype(np.float64)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            return dict(out, ok=False, worst=float("nan"),
                        note=f"NaN/Inf in the logits at step {s}")
        scale = max(np.abs(b).max(), 1e-30)
        rel = float(np.abs(a - b).max() / scale)
        out["worst"] = max(out["worst"], rel)
        out["rows"] = s + 1
        if rel > tolerance:
            out["ok"] = False
        if ours_tokens[s] != ref_tokens[s]:
            top2 = np.sort(b)[-2:]
            margin = float((top2[1] - top2[0]) / scale)
            if margin > tolerance:
                out["ok"] = False
                out["note"] = f"token {s} differs (reference margin {margin:.1e})"
            else:
                out["note"] = f"near tie at token {s} (margin {margin:.1e}); compared to there"
            return out
        out["agree"] += 1
    return out


# ---- selftest (numpy only) ---------------------------------------------------------------------

def selftest(args):
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    directory = os.path.join(args.work, "tiny")
    path = write_checkpoint(directory, "tiny", seed=3)
    header = read_safetensors_header(path)
    names = [n for n in header if n != "__metadata__"]
    expect(len(names) == len(tensor_specs(hf_config("tiny"))), "every tensor in the header")
    expect(all(n.startswith("model.") for n in names), "upstream text-only names")
    expect(any(".linear_attn.in_proj_qkv." in n for n in names) and
           any(".self_attn.q_norm." in n for n in names), "both layer kinds present")
    expect(os.path.getsize(path) == 8 + (len(json.dumps(header, separators=(",", ":")).encode()) +
                                          7) // 8 * 8 + 4 * sum(int(np.prod(header[n]["shape"]))
                                                                for n in names),
           "file size = header + data")
    # prefixd-hybrid loads the file (every name and shape checked by its loader) and decodes.
    prompt, tokens, logits, _ = run_ours(args.bin, directory, "cpu", 20, 4)
    expect(len(prompt) == 20 and len(tokens) == 4, "prompt and token counts")
    expect(np.isfinite(logits).all(), "finite logits")
    expect(list(np.argmax(logits, axis=1)) == tokens, "tokens are the argmax of each row")
    # Our output against itself, then perturbed.
    ok = compare_runs(tokens, logits, tokens, logits, 1e-3)
    expect(ok["ok"] and ok["agree"] == 4 and ok["worst"] == 0, "identical runs pass")
    scale = np.abs(logits[1]).max()
    small = logits.copy()
    small[1, 5] += 1e-5 * scale
    expect(compare_runs(tokens, small, tokens, logits, 1e-3)["ok"], "a tiny error passes")
    big = logits.copy()
    big[1, 5] += 1e-2 * scale
    expect(not compare_runs(tokens, big, tokens, logits, 1e-3)["ok"], "a large error fails")
    for bad in (np.nan, np.inf, -np.inf):
        broken = logits.copy()
        broken[2, 7] = bad
        r = compare_runs(tokens, broken, tokens, logits, 1e-3)
        expect(not r["ok"] and "NaN/Inf" in r["note"], f"{bad} fails")
        r = compare_runs(tokens, logits, tokens, broken, 1e-3)
        expect(not r["ok"], f"{bad} in the reference fails")
    # A wrong token where the reference's choice is clear fails ...
    wrong = list(tokens)
    clear = logits.copy()
    top = int(np.argmax(clear[2]))
    clear[2, top] += 0.5 * scale
    wrong[2] = (top + 1) % logits.shape[1]
    r = compare_runs(wrong, clear, tokens[:2] + [top] + tokens[3:], clear, 1e-3)
    expect(not r["ok"] and "differs" in r["note"], "a clear token mismatch fails")
    # ... and where the top two are within rounding it ends the comparison without failing.
    tie = logits.copy()
    order = np.argsort(tie[1])
    tie[1, order[-2]] = tie[1, order[-1]] - 1e-6 * scale
    swapped = list(tokens)
    swapped[1] = int(order[-2])
    r = compare_runs(swapped, tie, [tokens[0], int(order[-1])] + tokens[2:], tie, 1e-3)
    expect(r["ok"] and "near tie" in r["note"] and r["rows"] == 2, "a near tie is tolerated")
    print("selftest:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


# ---- gpu: transformers on the GPU --------------------------------------------------------------

def gpu(args):
    import torch
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (our backend: no TF32)
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        from transformers import Qwen3_5ForCausalLM as CausalLM, Qwen3_5TextConfig as TextConfig
    except ImportError:  # the class names of transformers 5.x; fall back to the Auto classes
        from transformers import AutoConfig, AutoModelForCausalLM as CausalLM
        TextConfig = None
    start = time.time()
    deadline = start + args.budget
    device = torch.device("cuda")
    lines = ["# transformers against prefixd-hybrid's CUDA backend", "",
             f"GPU {torch.cuda.get_device_name(0)}; torch {torch.__version__}, transformers "
             f"{transformers.__version__}; class {CausalLM.__name__}.", ""]
    try:
        from transformers.utils import is_flash_linear_attention_available
        lines.append(f"flash-linear-attention kernels: {is_flash_linear_attention_available()} "
                     "(False: transformers' torch fallback for the Gated DeltaNet).")
        lines.append("")
    except ImportError:
        pass

    def progress(text):
        print(f"[hf {time.time() - start:6.1f} s] {text}", flush=True)

    # 1. Correctness: the same checkpoint in both, fp32, greedy.
    lines += ["## Logits and greedy tokens (fp32, same checkpoint)", "",
              "| shape | prompt | logits max rel err | greedy tokens | verdict |",
              "|---|---|---|---|---|"]
    all_ok = True
    cases = [("small", [40, 1000]), ("qwen3.5-0.8b", [300])]
    for shape, lengths in cases:
        if time.time() > deadline - 60:
            lines.append(f"| {shape} | | | | skipped: time budget |")
            continue
        directory = os.path.join(args.work, shape)
        model = None
        try:
            progress(f"writing a random {shape} checkpoint")
            write_checkpoint(directory, shape, seed=11)
            progress(f"loading {shape} into transformers (fp32, eager attention)")
            model = CausalLM.from_pretrained(directory, dtype=torch.float32,
                                             attn_implementation="eager").to(device).eval()
            for length in lengths:
                prompt, tokens, ours, _ = run_ours(args.bin, directory, "cuda", length,
                                                   args.decode)
                ids = torch.tensor([prompt], device=device)
                ref_tokens, ref_rows = [], []
                with torch.no_grad():
                    for _ in range(args.decode):  # no cache: each step is a full forward pass
                        row = model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1]
                        ref_rows.append(row.float().cpu().numpy())
                        ref_tokens.append(int(row.argmax()))
                        ids = torch.cat([ids, torch.tensor([[ref_tokens[-1]]], device=device)], 1)
                r = compare_runs(tokens, ours, ref_tokens, np.stack(ref_rows), args.tolerance)
                all_ok = all_ok and r["ok"]
                lines.append(f"| {shape} | {length} | {r['worst']:.2e} over {r['rows']} rows | "
                             f"{r['agree']}/{r['total']} | {'ok' if r['ok'] else 'FAIL'} "
                             f"{r['note']} |")
                progress(lines[-1])
        except Exception as e:  # one broken case must not lose the rest of the report
            all_ok = False
            lines.append(f"| {shape} | | | | FAIL: {type(e).__name__}: {str(e)[:300]} |")
            progress(lines[-1])
        del model
        torch.cuda.empty_cache()
    lines += ["", f"Tolerance {args.tolerance:g} of the largest |logit| per row.", ""]

    # 2. transformers' cold prefill.
    lines += ["## transformers prefill (cold TTFT), ms", "",
              "Random weights, `use_cache=True`, last-token logits only, default attention "
              "(sdpa); after a 256-token warm-up, the best of 2 runs up to 8K and one run at 32K.", "",
              "| shape | dtype | " + " | ".join(f"{n // 1024}K" for n in args.lengths) + " |",
              "|---|---|" + "---|" * len(args.lengths)]
    for shape in ("qwen3.5-0.8b", "qwen3.5-4b"):
        for dtype in (torch.bfloat16, torch.float32):
            name = str(dtype).replace("torch.", "")
            cells = []
            if time.time() > deadline - 20:
                lines.append(f"| {shape} | {name} | skipped: time budget |")
                continue
            progress(f"building {shape} in {name} on the GPU")
            cfg = hf_config(shape)
            fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
            model = None
            try:
                config = (TextConfig(**fields) if TextConfig
                          else AutoConfig.for_model(cfg["model_type"], **fields))
                with device:  # random init on the GPU, in fp32, then cast
                    model = CausalLM(config) if TextConfig else CausalLM.from_config(config)
                model = model.to(dtype).eval()
                rng = np.random.default_rng(5)

                def prompt(n):
                    return torch.from_numpy(rng.integers(0, cfg["vocab_size"], n))[None].to(device)

                with torch.no_grad():
                    model(input_ids=prompt(256), use_cache=True, logits_to_keep=1)
                    for n in args.lengths:
                        if time.time() > deadline - 10:
                            cells.append("skipped")
                            continue
                        ids, times = prompt(n), []
                        try:
                            for _ in range(2 if n <= 8192 else 1):
                                torch.cuda.synchronize()
                                t0 = time.perf_counter()
                                model(input_ids=ids, use_cache=True, logits_to_keep=1)
                                torch.cuda.synchronize()
                                times.append((time.perf_counter() - t0) * 1000)
                            cells.append(f"{min(times):.0f}")
                        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
                            cells.append("OOM" if "out of memory" in str(e).lower() else
                                         f"error: {str(e)[:80]}")
                        torch.cuda.empty_cache()
                        progress(f"{shape} {name} {n}: {cells[-1]} ms")
            except Exception as e:
                cells.append(f"error: {type(e).__name__}: {str(e)[:200]}")
                progress(cells[-1])
            lines.append(f"| {shape} | {name} | " + " | ".join(cells) + " |")
            del model
            torch.cuda.empty_cache()
    lines += ["", f"Total {time.time() - start:.0f} s.", ""]
    write_report(args.out, lines)
    return 0 if all_ok else 1


def write_report(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("selftest", help="numpy-only checks (CI)")
    t.add_argument("--bin", required=True, help="prefixd-hybrid")
    t.add_argument("--work", required=True, help="a scratch directory")
    g = sub.add_parser("gpu", help="transformers on the GPU against our CUDA backend")
    g.add_argument("--bin", required=True, help="prefixd-hybrid (with CUDA)")
    g.add_argument("--work", required=True, help="a scratch directory (~4 GB for the 0.8B file)")
    g.add_argument("--out", required=True, help="the markdown report")
    g.add_argument("--decode", type=int, default=8, help="greedy tokens compared")
    g.add_argument("--tolerance", type=float, default=1e-3, help="of max |logit| per row")
    g.add_argument("--lengths", type=lambda s: [int(x) for x in s.split(",")],
                   default=[2048, 8192, 32768], help="prefill lengths to time")
    g.add_argument("--budget", type=float, default=100, help="seconds; later steps are skipped")
    args = parser.parse_args()
    sys.exit(selftest(args) if args.command == "selftest" else gpu(args))


if __name__ == "__main__":
    main()
