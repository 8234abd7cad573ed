#!/usr/bin/env python3
"""prefixd-hybrid against llama.cpp on the same weights: a random tiny Hugging Face checkpoint
(scripts/llama/hf_models.py) runs through `prefixd-hybrid forward`, and the same checkpoint,
converted by `make_gguf.py --from-hf`, through llama.cpp (prefixd-llama-run). The last prompt
token's logits must agree to 1e-4 relative (max |diff| / max |prefixd-hybrid|) and all 32 greedy
tokens must be equal.

Usage: fidelity_test.py CASE PATH/TO/prefixd-hybrid PATH/TO/prefixd-llama-run
CASE is qwen35, mamba2, rwkv7 or mamba2-groups2 (Mamba-2 with two groups, whose gated RMSNorm
llama.cpp normalises per group). Exits 77 (skipped) without numpy, unless CI is set.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import require_numpy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts", "llama")
MAKE_GGUF = os.path.join(SCRIPTS, "make_gguf.py")

PROMPT_TOKENS = 517  # two of llama.cpp's 512-token ubatches, and no multiple of a chunk size
GREEDY_TOKENS = 32
TOLERANCE = 1e-4

# family, seed, shape overrides
CASES = {
    "qwen35": ("qwen35", 11, {}),
    "mamba2": ("mamba2", 12, {}),
    "rwkv7": ("rwkv7", 13, {}),
    # Two groups: the gated RMSNorm is per group (mamba_ssm, llama.cpp, vLLM; not transformers'
    # Mamba2, which normalises all of d_inner), and prefixd-hybrid must follow.
    "mamba2-groups2": ("mamba2", 14, {"n_groups": 2}),
}



def write_checkpoint(directory, family, seed, overrides):
    sys.path.insert(0, SCRIPTS)
    import gguf_io
    import hf_models
    config, tensors = hf_models.checkpoint(family, "tiny", seed, **overrides)
    gguf_io.write_checkpoint(directory, config, tensors)
    return config["vocab_size"]


def run_prefixd_hybrid(binary, checkpoint, tokens, out):
    subprocess.run([binary, "forward", "--model", checkpoint, "--weights", checkpoint,
                    "--threads", "1", "--tokens", ",".join(map(str, tokens)),
                    "--decode-tokens", str(GREEDY_TOKENS), "--out", out], check=True)
    with open(out) as f:
        r = json.load(f)
    return r["logits"], r["greedy"]


def run_llama(runner, model, tokens, directory):
    """Attention in fp32: an F32 K/V cache and no flash attention, whose CPU kernel rounds Q
    (and with an F16 cache K and V) to fp16, a 1.4e-4 relative error on the qwen35 case."""
    logits, result = os.path.join(directory, "llama.f32"), os.path.join(directory, "llama.json")
    subprocess.run([runner, "--model", model, "--tokens", ",".join(map(str, tokens)),
                    "--decode", str(GREEDY_TOKENS), "--threads", "1", "--kv-type", "f32",
                    "--flash-attn", "off", "--logits-out", logits, "--json-out", result],
                   check=True)
    import numpy as np
    with open(result) as f:
        return np.fromfile(logits, dtype=np.float32), json.load(f)["greedy"]


def compare(case, hybrid, llama):
    import numpy as np
    want, want_greedy = np.asarray(hybrid[0], dtype=np.float64), hybrid[1]
    got, got_greedy = llama[0].astype(np.float64), llama[1]
    assert got.shape == want.shape, f"{got.shape} logits from llama.cpp, {want.shape} expected"
    assert np.all(np.isfinite(got)) and np.all(np.isfinite(want)), "non-finite logits"
    assert np.max(np.abs(want)) > 1e-3, "degenerate logits"
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    same = sum(a == b for a, b in zip(want_greedy, got_greedy))
    first_diff = next((i for i, (a, b) in enumerate(zip(want_greedy, got_greedy)) if a != b), None)
    print(f"{case}: {PROMPT_TOKENS}-token prompt, logits max rel err {err:.2e}, greedy "
          f"{same}/{GREEDY_TOKENS} equal" + ("" if first_diff is None else
                                            f" (first difference at {first_diff})"))
    return err < TOLERANCE and same == GREEDY_TOKENS == len(got_greedy), err, same


def main():
    case, hybrid_binary, runner = sys.argv[1:]
    require_numpy()
    family, seed, overrides = CASES[case]
    with tempfile.TemporaryDirectory(prefix=f"llama-fidelity-{case}-") as d:
        checkpoint = os.path.join(d, "hf")
        vocab = write_checkpoint(checkpoint, family, seed, overrides)
        model = os.path.join(d, "model.gguf")
        subprocess.run([sys.executable, MAKE_GGUF, "--from-hf", checkpoint, "--out", model],
                       check=True)
        rng = random.Random(seed)
        tokens = [rng.randrange(vocab) for _ in range(PROMPT_TOKENS)]
        hybrid = run_prefixd_hybrid(hybrid_binary, checkpoint, tokens,
                                    os.path.join(d, "hybrid.json"))
        llama = run_llama(runner, model, tokens, d)
    _, err, same = compare(case, hybrid, llama)
    assert err < TOLERANCE, f"{case}: logits differ by {err:.2e} > {TOLERANCE}"
    assert same == GREEDY_TOKENS, f"{case}: {same}/{GREEDY_TOKENS} greedy tokens equal"
    print("ok")


if __name__ == "__main__":
    main()
