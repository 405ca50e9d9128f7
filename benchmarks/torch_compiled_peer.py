"""The PyTorch peers of ../shared/bench, with the model wrapped in `torch.compile`, or under bfloat16 autocast.

    python benchmarks/torch_compiled_peer.py resnet20 --threads 2 --steps 20
    python benchmarks/torch_compiled_peer.py chargpt --threads 2 --steps 150
    python benchmarks/torch_compiled_peer.py resnet20 --eager --autocast bf16   # like with like for our bf16

The model classes come from the eager peer scripts themselves (imported from
--peer-dir), and the training step is the eager scripts' step: the same batch
(one fixed in-memory batch, no input pipeline), optimizer and loss. The one
difference is `model = torch.compile(model)` (inductor, default mode), what a
PyTorch user picks for speed. Compilation happens in the warm-up steps and is
reported apart (`compile_s`); inductor caches compiled graphs on disk, so a
second process compiles faster than the first. `--eager` leaves the model
uncompiled (the eager script's step, for `--autocast`); `--autocast bf16`
runs the forward pass and the loss under `torch.autocast("cpu",
dtype=torch.bfloat16)`, PyTorch's counterpart of Keras' `mixed_bfloat16`
(float32 weights, bfloat16 matrix products and convolutions).

Prints one JSON line, as the eager peers do, with "peer": "torch-compile"
or "torch-eager" (and "autocast").
"""

import argparse
import importlib.util
import json
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = {"resnet20": "torch_resnet20.py", "chargpt": "torch_chargpt.py"}


def load_peer_module(peer_dir, model):
    path = pathlib.Path(peer_dir) / SCRIPTS[model]
    spec = importlib.util.spec_from_file_location(f"peer_{model}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def training_step(model_name, module, batch_size, compile_model=True, autocast=None):
    """(step function, units per step): the eager peer's step, its model compiled unless not `compile_model`,
    under `torch.autocast` to `autocast` ("bf16") when given."""
    import contextlib

    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    if model_name == "resnet20":
        model = module.ResNet20()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        x = torch.rand(batch_size, 3, 32, 32)
        y = torch.randint(0, 10, (batch_size,))
        units = batch_size
    else:  # the eager script's defaults: vocabulary 65, block 64, 4 layers x 128, 4 heads
        vocab, block = 65, 64
        model = module.CharGPT(vocab, block, 4, 128, 4)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randint(0, vocab, (batch_size, block))
        y = torch.randint(0, vocab, (batch_size, block))
        units = batch_size * block
    compiled = torch.compile(model) if compile_model else model

    def cast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if autocast == "bf16" else contextlib.nullcontext()

    def step():
        optimizer.zero_grad(set_to_none=True)
        with cast():
            logits = compiled(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()

    return step, units


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", choices=sorted(SCRIPTS))
    parser.add_argument("--peer-dir", default=str(ROOT.parent / "shared" / "bench"))
    parser.add_argument("--batch-size", type=int, default=None, help="default: 128 images / 12 windows")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps, compilation included")
    parser.add_argument("--threads", type=int, default=0, help="0 = torch default")
    parser.add_argument("--eager", action="store_true", help="no torch.compile: the eager peer's step")
    parser.add_argument("--autocast", choices=("none", "bf16"), default="none")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    batch_size = args.batch_size or (128 if args.model == "resnet20" else 12)
    step, units = training_step(args.model, load_peer_module(args.peer_dir, args.model), batch_size,
                                compile_model=not args.eager, autocast=None if args.autocast == "none" else args.autocast)
    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = time.perf_counter() - start
    unit = "images" if args.model == "resnet20" else "tokens"
    print(json.dumps({
        "peer": "torch-eager" if args.eager else "torch-compile", "autocast": args.autocast, "model": args.model, "batch_size": batch_size, "steps": args.steps,
        "seconds": round(seconds, 3), f"{unit}_per_s": round(args.steps * units / seconds, 1),
        "compile_s": round(compile_seconds, 1), "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
