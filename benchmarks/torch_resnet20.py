"""The PyTorch peer of the vision track's ResNet-20: the same network and training step, in PyTorch.

    pip install torch==2.13.0
    python benchmarks/torch_resnet20.py --threads 2 --steps 20          # eager
    python benchmarks/torch_resnet20.py --threads 2 --compile           # the model under torch.compile

What `python benchmarks/throughput.py --peers` sets beside our ResNet-20
(`--models resnet20`: the vision track's `projection` variant at width 16,
batch 128), written to match it:

- the network: He et al.'s CIFAR ResNet-20 with option-B shortcuts (a 1x1
  convolution and BatchNorm where the shape changes), as
  `residual_keras.cifar_resnet(20, width=16, block=blocks.basic(shortcut="B"))`
  builds it: a 3x3 stem, 3 stages of 3 basic blocks (conv-BN-ReLU-conv-BN,
  ReLU after the addition), global average pooling, a dense classifier;
  convolutions without bias, BatchNorm momentum 0.1 (Keras' 0.9) and epsilon
  1e-5; 272,474 trainable parameters, as ours (tests/tracks/test_benchmarks.py);
- the step: cross-entropy on logits, SGD with momentum 0.9 at the track's
  peak learning rate 0.1 on a cosine schedule, and the paper's coupled weight
  decay 1e-4 on every convolution and dense kernel only (the track's
  `weight_decay / 2 * ||W||^2` penalty adds `1e-4 * W` to those gradients,
  which is what SGD's `weight_decay` does to the group it is given).

What differs, by design: one fixed in-memory batch of random images and
labels, no input pipeline (ours reads the track's tf.data pipeline with
augmentation, so the peer is spared work ours does); NCHW tensors, PyTorch's
own layout, converted by oneDNN to its blocked layouts as PyTorch does.

Prints one JSON line: {"peer": "torch-eager" or "torch-compile", "model":
"resnet20", "images_per_s": ..., "parameters": ...}.
"""

import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 128
LEARNING_RATE = 0.1  # the vision track's peak learning rate (tracks/vision/presets.py)
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4  # coupled, on kernels only (residual_keras.cifar_resnet's L2 penalty)
SCHEDULE_STEPS = 1000  # the cosine schedule's length: the benchmark runs well inside it


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN, plus the shortcut (identity, or option B's 1x1 conv + BN), then ReLU."""

    def __init__(self, channels_in, channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Identity()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def forward(self, x):  # (B, C, H, W)
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.shortcut(x) + self.bn2(self.conv2(y)))


class ResNet20(nn.Module):
    def __init__(self, blocks_per_stage=3, width=16, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        blocks, channels_in = [], width
        for stage in range(3):
            channels = width * 2**stage
            for index in range(blocks_per_stage):
                blocks.append(BasicBlock(channels_in, channels, 2 if stage and not index else 1))
                channels_in = channels
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(channels_in, num_classes)

    def forward(self, x):  # (B, 3, 32, 32) -> (B, classes)
        x = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(x.mean((2, 3)))


def count_parameters(model):
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)


def training_step(batch_size=BATCH_SIZE, compile_model=False, autocast=None):
    """(step function, images per step, trainable parameters): one SGD step of the vision track's recipe
    on a fixed batch; `compile_model`: the model under `torch.compile`; `autocast="bf16"`: the forward
    pass and the loss under `torch.autocast` to bfloat16 (Keras' mixed_bfloat16)."""
    torch.manual_seed(0)
    model = ResNet20()
    kernels = [p for p in model.parameters() if p.dim() > 1]  # convolution and dense kernels
    others = [p for p in model.parameters() if p.dim() <= 1]  # BatchNorm's scale and offset, the dense bias
    optimizer = torch.optim.SGD([{"params": kernels, "weight_decay": WEIGHT_DECAY},
                                 {"params": others, "weight_decay": 0.0}], lr=LEARNING_RATE, momentum=MOMENTUM)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, SCHEDULE_STEPS) / SCHEDULE_STEPS)))
    x = torch.rand(batch_size, 3, 32, 32)
    y = torch.randint(0, 10, (batch_size,))
    forward = torch.compile(model) if compile_model else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bf16"):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        optimizer.step()
        schedule.step()

    return step, batch_size, count_parameters(model)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation included)")
    parser.add_argument("--threads", type=int, default=0, help="0 = PyTorch's default")
    parser.add_argument("--compile", action="store_true", help="the model under torch.compile (inductor)")
    parser.add_argument("--autocast", choices=("none", "bf16"), default="none")
    args = parser.parse_args(argv)
    print(json.dumps(run(training_step(args.batch_size, args.compile, args.autocast), args, "resnet20", "images")))


def run(made, args, model_name, unit):
    """Times `made` = (step, units per step, parameters) as the CLI asks; the JSON line's fields."""
    step, units, parameters = made
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    warmup_seconds = time.perf_counter() - start
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        step()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "peer": "torch-compile" if args.compile else "torch-eager", "autocast": args.autocast, "model": model_name,
        "batch_size": args.batch_size, "steps": args.steps, "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3), f"{unit}_per_s": round(args.steps * units / seconds, 1), "compile_s": round(warmup_seconds, 1),
        "parameters": parameters, "threads": torch.get_num_threads(), "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


if __name__ == "__main__":
    main()
