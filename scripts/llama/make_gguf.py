#!/usr/bin/env python3
"""Writes llama.cpp models (GGUF) for tests and benchmarks: synthetic ones with deterministic
random weights, or converted from a Hugging Face checkpoint directory.

  make_gguf.py --list
  make_gguf.py --arch qwen35 --shape tiny --seed 1 --out F.gguf [--type f32|f16]
  make_gguf.py --arch mamba2 --shape tiny --seed 1 --hf-out DIR
      the random Hugging Face checkpoint behind a synthetic qwen35/mamba2/rwkv7 model
      (config.json + model.safetensors, as prefixd-hybrid reads it)
  make_gguf.py --from-hf DIR --out F.gguf [--type f32|f16]

Same arguments, same bytes. Needs numpy and llama.cpp's gguf-py (PREFIXD_LLAMA_GGUF_PY, or the
pinned copy in .deps/llama.cpp/gguf-py).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_io  # noqa: E402
import hf_models  # noqa: E402
import hf_to_gguf  # noqa: E402
import synthetic  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--list", action="store_true", help="print families and shapes")
    p.add_argument("--arch", help="qwen35, mamba2, rwkv7, qwen3 or granitehybrid")
    p.add_argument("--shape", default="tiny")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--type", default="f32", choices=["f32", "f16"],
                   help="weight matrices' type (vectors, norms and SSM tensors stay f32)")
    p.add_argument("--from-hf", metavar="DIR", help="convert this Hugging Face checkpoint")
    p.add_argument("--hf-out", metavar="DIR", help="write the random checkpoint, not a GGUF")
    p.add_argument("--out", help="the GGUF file to write")
    args = p.parse_args(argv)
    if not args.list and not args.from_hf and not args.arch:
        p.error("--arch, --from-hf or --list")
    if (args.arch or args.from_hf) and not (args.out or args.hf_out):
        p.error("--out (or --hf-out) is required")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.list:
        for family, shapes in synthetic.families().items():
            print(f"{family}: {' '.join(shapes)}")
        return 0
    if args.from_hf:
        config, tensors = gguf_io.read_checkpoint(args.from_hf)
        model = hf_to_gguf.convert(config, tensors)
    else:
        known = synthetic.families()
        if args.arch not in known or args.shape not in known[args.arch]:
            sys.exit(f"no shape '{args.shape}' for '{args.arch}' (see --list)")
        if args.hf_out:
            if args.arch not in hf_models.CHECKPOINTS:
                sys.exit(f"--hf-out: no Hugging Face layout for '{args.arch}'")
            config, tensors = hf_models.checkpoint(args.arch, args.shape, args.seed)
            gguf_io.write_checkpoint(args.hf_out, config, tensors)
            return 0
        model = synthetic.model(args.arch, args.shape, args.seed)
    gguf_io.write_gguf(model, args.out, args.type)
    return 0


if __name__ == "__main__":
    sys.exit(main())
