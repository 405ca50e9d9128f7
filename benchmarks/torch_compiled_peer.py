"""The PyTorch peers of benchmarks/, with the model wrapped in `torch.compile`, or eager under bfloat16 autocast.

    python benchmarks/torch_compiled_peer.py resnet20 --threads 2 --steps 20
    python benchmarks/torch_compiled_peer.py chargpt --threads 2 --steps 150
    python benchmarks/torch_compiled_peer.py resnet20 --eager --autocast bf16   # like with like for our bf16

The models and their training steps are the peers' own (benchmarks/torch_resnet20.py
and benchmarks/torch_chargpt.py, which document how they match the tracks'):
the same fixed in-memory batch, optimizer, schedule and loss. The one
difference is `torch.compile(model)` (inductor, default mode), what a PyTorch
user picks for speed. Compilation happens in the warm-up steps and is reported
apart (`compile_s`); inductor caches compiled graphs on disk, so a second
process compiles faster than the first. `--eager` leaves the model uncompiled
(the eager peer's step, for `--autocast`); `--autocast bf16` runs the forward
pass and the loss under `torch.autocast("cpu", dtype=torch.bfloat16)`,
PyTorch's counterpart of Keras' `mixed_bfloat16` (float32 weights, bfloat16
matrix products and convolutions).

Prints one JSON line, as the eager peers do, with "peer": "torch-compile"
or "torch-eager" (and "autocast").
"""

import argparse
import importlib
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the peers beside this file

MODULES = {"resnet20": ("torch_resnet20", "images"), "chargpt": ("torch_chargpt", "tokens")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", choices=sorted(MODULES))
    parser.add_argument("--batch-size", type=int, default=None, help="default: 128 images / 12 windows")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps, compilation included")
    parser.add_argument("--threads", type=int, default=0, help="0 = torch default")
    parser.add_argument("--eager", action="store_true", help="no torch.compile: the eager peer's step")
    parser.add_argument("--autocast", choices=("none", "bf16"), default="none")
    args = parser.parse_args(argv)

    module_name, unit = MODULES[args.model]
    module = importlib.import_module(module_name)
    args.batch_size = args.batch_size or module.BATCH_SIZE
    args.compile = not args.eager
    made = module.training_step(args.batch_size, compile_model=args.compile,
                                autocast=None if args.autocast == "none" else args.autocast)
    print(json.dumps(module.run(made, args, args.model, unit)))


if __name__ == "__main__":
    main()
