"""benchmarks/: the FLOP counts behind the fraction-of-peak column, and the configs the benchmark builds."""

import numpy as np

import residual_keras as rk
from benchmarks.flops import char_gpt_forward_flops, cifar_resnet_forward_flops, fp32_matmul_peak


def test_resnet20_option_a_is_the_published_40_55_million_multiply_adds():
    # The count pruning papers quote for He et al.'s CIFAR ResNet-20 (option A shortcuts).
    assert cifar_resnet_forward_flops(20, projection_shortcuts=False) == 2 * 40_551_040


def test_projection_shortcuts_add_two_1x1_convolutions():
    extra = cifar_resnet_forward_flops(20) - cifar_resnet_forward_flops(20, projection_shortcuts=False)
    assert extra == 2 * (16**2 * 16 * 32 + 8**2 * 32 * 64)


def test_six_more_layers_add_one_block_of_two_3x3_convolutions_per_stage():
    per_block = sum(2 * 9 * (32 // 2**s) ** 2 * (16 * 2**s) ** 2 for s in range(3))
    assert cifar_resnet_forward_flops(26) - cifar_resnet_forward_flops(20) == 2 * per_block


def test_gpt_count_is_twice_the_model_matmul_weights_plus_attention():
    layers, width, length, vocabulary = 4, 128, 64, 65
    model = rk.transformer_lm(vocabulary, length, layers, embed_dim=width)
    # Every weight matrix that multiplies a token's activations, counted from the model itself
    # (embedding tables are looked up, not multiplied; vectors are biases and norms).
    matmul_weights = sum(
        int(np.prod(w.shape)) for w in model.trainable_weights
        if len(w.shape) >= 2 and "embedding" not in w.path
    )
    attention = 2 * layers * length * width  # scores q.k and the weighted sum of values
    assert char_gpt_forward_flops(layers, width, length, vocabulary) == 2 * (matmul_weights + attention)


def test_matmul_peak_is_the_best_slot_of_every_library_and_size():
    peak = fp32_matmul_peak(seconds=0.3, sizes=(64, 128), slot=0.1)
    assert set(peak["measured"]) == {"numpy 64", "numpy 128", "tensorflow 64", "tensorflow 128"}
    for measured in peak["measured"].values():
        assert len(measured["slots"]) >= 2 and min(measured["slots"]) > 0
        assert measured["best_gflops"] == max(measured["slots"]) >= measured["median_gflops"]
    best = max(measured["best_gflops"] for measured in peak["measured"].values())
    assert peak["best_gflops"] == best == peak["measured"][peak["best_of"]]["best_gflops"]


def test_the_peak_line_names_the_best_and_each_other_librarys_best():
    from benchmarks.throughput import describe_peak

    measured = {"numpy 1024": {"best_gflops": 230.1}, "numpy 4096": {"best_gflops": 229.7},
                "tensorflow 1024": {"best_gflops": 368.7}, "tensorflow 4096": {"best_gflops": 438.0}}
    peak = {"best_gflops": 438.0, "best_of": "tensorflow 4096", "measured": measured}
    assert describe_peak(peak) == "438.0 GFLOP/s (tensorflow 4096; numpy 1024: 230.1)"


def test_the_benchmark_builds_every_model_config_it_measures():
    # The benchmark builds its configs from the tracks' presets: a preset change must not break it
    # silently (one did: the quick language preset gained --warmup-variants).
    from benchmarks import throughput

    args = throughput.parse_args(["--models", "chargpt,chargpt-6x384"])
    for name in args.models:
        config, _, _, units_per_step, unit = throughput.language_setup(name, args)
        layers, width, heads, block, batch = throughput.LANGUAGE_SHAPES[name]
        assert (config.depths, config.embed_dim, config.num_heads) == ((layers,), width, heads)
        assert (units_per_step, unit) == (batch * block, "tokens")


def test_competing_processes_run_for_the_block_and_are_stopped():
    from benchmarks.throughput import Competitors

    with Competitors(1) as competing:
        assert len(competing.processes) == 1 and competing.processes[0].poll() is None  # running
    assert competing.processes[0].poll() is not None  # stopped when the block ends


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512_bf16 avx512_vp2intersect

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: another CPU
flags\t\t: fpu avx2 amx_bf16
"""


def test_the_cpu_is_named_by_its_first_processor_with_family_model_and_flags_of_note():
    from benchmarks.throughput import cpu_identity, describe_cpu

    identity = cpu_identity(CPUINFO)
    assert identity == {"model_name": "AMD EPYC", "family": 26, "model": 2,
                        "flags": ["avx2", "avx512f", "avx512_bf16"]}
    assert describe_cpu(identity) == "AMD EPYC, family 26 model 2: avx2, avx512f, avx512_bf16"
    assert cpu_identity("") == {} and describe_cpu({}) == "unknown"
    older = cpu_identity("cpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2\n")
    assert describe_cpu(older) == "AMD EPYC, family 25 model 17: none of avx2, avx512f, avx512_bf16, amx_bf16"
