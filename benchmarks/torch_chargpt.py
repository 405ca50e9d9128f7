"""The PyTorch peer of the language track's baby char GPT: the same model and training step, in PyTorch.

    pip install torch==2.13.0
    python benchmarks/torch_chargpt.py --threads 2 --steps 150          # eager
    python benchmarks/torch_chargpt.py --threads 2 --compile            # the model under torch.compile

What `python benchmarks/throughput.py --peers` sets beside our char GPT
(`--models chargpt`: the language track's Pre-LN model at nanoGPT's CPU "baby
GPT" shape), written to match it:

- the model: `residual_keras.transformer_lm(65, 64, 4, embed_dim=128,
  num_heads=4)`: token and position embeddings, 4 Pre-LN blocks
  (`x + attention(LN(x))`, `x + MLP(LN(x))`; causal attention of 4 heads of
  32; a 512-wide MLP with the exact GELU), a final LayerNorm (epsilon 1e-5)
  and a dense head with bias, not tied to the embedding; 818,241 trainable
  parameters, as ours (tests/tracks/test_benchmarks.py);
- the step: cross-entropy on the next character at every position, batch 12
  windows of 64; AdamW (betas 0.9 and 0.99, weight decay 0.1 on the matrices
  and embeddings, none on biases and LayerNorms, as the track and nanoGPT
  decay) at the quick preset's peak learning rate 2e-3 on a cosine schedule
  to 2e-4, the gradient clipped to a global norm of 1.

What differs, by design: one fixed in-memory batch, no input pipeline (ours
reads the track's tf.data pipeline); attention through PyTorch's
`scaled_dot_product_attention` (its fused kernel, what a PyTorch user
writes), where ours writes the softmax out; AdamW as PyTorch runs it by
default on a CPU.

Prints one JSON line: {"peer": "torch-eager" or "torch-compile", "model":
"chargpt", "tokens_per_s": ..., "parameters": ...}.
"""

import argparse
import json
import math
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # run as a script or imported: its neighbour
from torch_resnet20 import count_parameters, run  # noqa: E402  (the same timing and JSON line)

VOCABULARY, BLOCK, LAYERS, WIDTH, HEADS, BATCH_SIZE = 65, 64, 4, 128, 4, 12
LEARNING_RATE, MIN_LEARNING_RATE = 2e-3, 2e-4  # the quick language preset (tracks/language/presets.py)
BETAS, WEIGHT_DECAY, GRADIENT_CLIP = (0.9, 0.99), 0.1, 1.0
SCHEDULE_STEPS = 1500  # the quick preset's steps


class Block(nn.Module):
    """Pre-LN: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):  # (B, T, C)
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, 2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))  # (B, h, T, C/h)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CharGPT(nn.Module):
    def __init__(self, vocabulary=VOCABULARY, block=BLOCK, layers=LAYERS, width=WIDTH, heads=HEADS):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocabulary, width), nn.Embedding(block, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocabulary)
        self.register_buffer("positions", torch.arange(block))

    def forward(self, tokens):  # (B, T) -> (B, T, vocabulary)
        x = self.tok(tokens) + self.pos(self.positions[: tokens.shape[1]])
        return self.head(self.ln(self.blocks(x)))


def training_step(batch_size=BATCH_SIZE, compile_model=False, autocast=None):
    """(step function, tokens per step, trainable parameters): one AdamW step of the language track's recipe
    on a fixed batch; `compile_model`: the model under `torch.compile`; `autocast="bf16"`: the forward pass
    and the loss under `torch.autocast` to bfloat16."""
    torch.manual_seed(0)
    model = CharGPT()
    decayed = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings
    others = [p for p in model.parameters() if p.dim() < 2]  # biases and LayerNorms
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": WEIGHT_DECAY},
                                   {"params": others, "weight_decay": 0.0}], lr=LEARNING_RATE, betas=BETAS)
    floor = MIN_LEARNING_RATE / LEARNING_RATE
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: floor + (1 - floor) * 0.5 * (
        1 + math.cos(math.pi * min(step, SCHEDULE_STEPS) / SCHEDULE_STEPS)))
    x = torch.randint(0, VOCABULARY, (batch_size, BLOCK))
    y = torch.randint(0, VOCABULARY, (batch_size, BLOCK))
    forward = torch.compile(model) if compile_model else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bf16"):
            logits = forward(x)
            loss = F.cross_entropy(logits.reshape(-1, VOCABULARY), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRADIENT_CLIP)
        optimizer.step()
        schedule.step()

    return step, batch_size * BLOCK, count_parameters(model)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--steps", type=int, default=150, help="timed steps")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation included)")
    parser.add_argument("--threads", type=int, default=0, help="0 = PyTorch's default")
    parser.add_argument("--compile", action="store_true", help="the model under torch.compile (inductor)")
    parser.add_argument("--autocast", choices=("none", "bf16"), default="none")
    args = parser.parse_args(argv)
    print(json.dumps(run(training_step(args.batch_size, args.compile, args.autocast), args, "chargpt", "tokens")))


if __name__ == "__main__":
    main()
