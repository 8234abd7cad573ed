#!/usr/bin/env python3
"""llama.cpp runs the synthetic models that scripts/llama/make_gguf.py writes, one family per
run: the tiny GGUF loads with llama_vocab_n_tokens equal to the file's vocabulary, a 1024-token
prompt decodes to finite logits, 32 greedy tokens are not all the same token, and a sequence
state saved with llama_state_seq_get_data and loaded back into a cleared context gives
bit-identical next-token logits. Also checks that make_gguf.py is
deterministic (same seed, same bytes; another seed, other bytes).

Usage: llama_models_test.py FAMILY PATH/TO/prefixd-llama-run
Exits 77 (skipped) without numpy, unless the environment sets CI, where that is a failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import require_numpy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_GGUF = os.environ.get("PREFIXD_LLAMA_MAKE_GGUF") or os.path.join(
    HERE, "..", "..", "scripts", "llama", "make_gguf.py")



def make_gguf(family, seed, out):
    subprocess.run([sys.executable, MAKE_GGUF, "--arch", family, "--shape", "tiny",
                    "--seed", str(seed), "--out", out], check=True)
    with open(out, "rb") as f:
        return f.read()


def written_vocab(path):
    """The vocabulary size the file says ({arch}.vocab_size) and its token_embd rows."""
    sys.path.insert(0, os.path.dirname(MAKE_GGUF))
    from gguf_io import import_gguf
    reader = import_gguf().GGUFReader(path)
    arch = reader.get_field("general.architecture").contents()
    rows = next(int(t.shape[1]) for t in reader.tensors if t.name == "token_embd.weight")
    return reader.get_field(f"{arch}.vocab_size").contents(), rows


def main():
    family, runner = sys.argv[1], sys.argv[2]
    require_numpy()
    with tempfile.TemporaryDirectory(prefix=f"llama-{family}-") as d:
        model = os.path.join(d, "model.gguf")
        first = make_gguf(family, 1, model)
        assert make_gguf(family, 1, os.path.join(d, "again.gguf")) == first, "not deterministic"
        assert make_gguf(family, 2, os.path.join(d, "other.gguf")) != first, "seed ignored"

        out = os.path.join(d, "run.json")
        # One thread: the two cores here are shared, and ggml's threads meet at a barrier after
        # every op, which costs a scheduling delay each time the other thread is not running.
        start = time.monotonic()
        subprocess.run([runner, "--model", model, "--random-tokens", "1024", "--seed", "7",
                        "--decode", "32", "--threads", "1", "--check-state",
                        "--json-out", out], check=True)
        elapsed = time.monotonic() - start
        with open(out) as f:
            r = json.load(f)
        vocab, rows = written_vocab(model)
    print(f"{family}: n_vocab {r['n_vocab']}, 1024-token prefill {r['prefill_ms']:.1f} ms, "
          f"32 greedy in {r['decode_ms']:.1f} ms, state {r['state_bytes']} B, "
          f"greedy {r['greedy'][:8]}..., run {elapsed:.2f} s")
    assert r["n_vocab"] == vocab == rows, f"n_vocab {r['n_vocab']}, file {vocab}, rows {rows}"
    assert r["prompt_tokens"] == 1024
    assert r["logits_finite"], "non-finite logits after the prompt"
    assert len(r["greedy"]) == 32
    assert len(set(r["greedy"])) > 1, f"greedy tokens all {r['greedy'][0]}"
    assert r["state_bytes"] > 0
    assert r["state_bitexact"], "restored state gives different next-token logits"
    print("ok")


if __name__ == "__main__":
    main()
