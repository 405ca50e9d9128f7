"""benchmarks/: the FLOP counts behind the fraction-of-peak column, the configs the benchmark builds, its
PyTorch peers (in this folder, the sizes of our models) and its AVX2 emulation."""

import pathlib
import re
import subprocess
import types

import numpy as np
import pytest

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


BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
# Ways a script could name a place outside the repository: above its root, or an absolute directory.
OUTSIDE = re.compile(r"""\.\./|ROOT\.parent|parents\[\d+\]\.parent|parents\[[2-9]\]|["'](/work|/home|/tmp|/root|~)"""
                     r"""|shared/(bench|data)|["']shared["']""")


def test_no_benchmark_script_names_a_path_outside_the_repository():
    scripts = sorted(BENCHMARKS.glob("*.py")) + sorted(BENCHMARKS.glob("*.sh"))
    assert len(scripts) >= 10
    named = [f"{path.name}:{number}: {line.strip()}" for path in scripts
             for number, line in enumerate(path.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert named == []
    # The pattern finds what it is for (a guard against a pattern that matches nothing).
    assert all(OUTSIDE.search(line) for line in ('ROOT.parent / "shared" / "bench"', "'../shared/bench'",
                                                 'pathlib.Path("/work/shared/data")', "parents[2]"))


def test_the_peers_run_from_this_folder(monkeypatch):
    # What `--peers` runs: the scripts beside throughput.py, eager and compiled, and nothing else.
    from benchmarks import throughput

    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        line = '{"images_per_s": 100.0, "compile_s": 1.0, "parameters": 272474}'
        return subprocess.CompletedProcess(command, 0, stdout=line + "\n", stderr="")

    monkeypatch.setattr(throughput.subprocess, "run", fake_run)
    args = throughput.parse_args(["--models", "resnet20", "--peers"])
    assert throughput.run_peer("torch_resnet20.py", args, "resnet20", parameters=272474) == (100.0, 1.0)
    throughput.run_peer("torch_resnet20.py", args, "resnet20", compiled=True, bf16=True)
    scripts = [pathlib.Path(command[1]) for command in commands]
    assert scripts == [BENCHMARKS / "torch_resnet20.py"] * 2 and all(path.exists() for path in scripts)
    assert "--compile" in commands[1] and "--compile" not in commands[0]
    with pytest.raises(RuntimeError, match="272,475 parameters, ours 272,474"):
        monkeypatch.setattr(throughput.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
            command, 0, stdout='{"images_per_s": 1.0, "parameters": 272475}\n', stderr=""))
        throughput.run_peer("torch_resnet20.py", args, "resnet20", parameters=272474)


def test_a_crashed_torch_compile_peer_is_reported_not_a_crash_of_the_benchmark(monkeypatch, capsys):
    from benchmarks import throughput

    def crashed(command, **kwargs):
        return subprocess.CompletedProcess(command, -6, stdout="", stderr="corrupted size vs. prev_size\n")

    monkeypatch.setattr(throughput.subprocess, "run", crashed)
    args = throughput.parse_args(["--models", "resnet20", "--peers"])
    rate, seconds, error = throughput.compiled_peer("torch_resnet20.py", args, "resnet20", False, 272474)
    assert (rate, seconds) == (None, None) and "corrupted size" in error
    assert "torch.compile peer failed" in capsys.readouterr().err
    # A peer of another size is never excused: that is a wrong comparison, not the peer's crash.
    monkeypatch.setattr(throughput.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 0, stdout='{"images_per_s": 1.0, "parameters": 5}\n', stderr=""))
    with pytest.raises(RuntimeError, match="parameters, ours"):
        throughput.compiled_peer("torch_resnet20.py", args, "resnet20", False, 272474)


def test_the_peers_train_models_of_our_models_sizes():
    # The comparison is between the same networks: each peer's trainable parameters equal those of the model
    # the benchmark builds through the tracks (ResNet-20 with option-B shortcuts; the 4 x 128 char GPT).
    pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(BENCHMARKS))
    import torch_chargpt
    import torch_resnet20

    from benchmarks import throughput

    args = throughput.parse_args(["--models", "resnet20,chargpt", "--xla", "off"])
    ours = {}
    for name, setup in (("resnet20", throughput.vision_setup), ("chargpt", throughput.language_setup)):
        config, build, _, _, _ = setup(name, args)
        runtime = types.SimpleNamespace(xla=False, steps_per_execution=lambda requested: requested)
        model = build(runtime)
        ours[name] = sum(int(np.prod(weight.shape)) for weight in model.trainable_weights)
    assert ours == {"resnet20": 272_474, "chargpt": 818_241}
    assert torch_resnet20.training_step(batch_size=2)[2] == ours["resnet20"]
    assert torch_chargpt.training_step(batch_size=2)[2] == ours["chargpt"]


def test_the_benchmark_text_has_the_gpts_vocabulary_of_65():
    from benchmarks.throughput import BENCHMARK_ALPHABET, benchmark_text

    assert len(set(BENCHMARK_ALPHABET)) == len(BENCHMARK_ALPHABET) == 65
    assert benchmark_text(64, characters=5_000).vocab.size == 65


def test_the_avx2_emulation_caps_every_library_and_the_package_reads_it():
    from benchmarks.emulate_isa import emulated_environment
    from tracks.common.cpu_settings import choose_cpu_settings, cpu_kind

    environment = emulated_environment("avx2", {"XLA_FLAGS": "--xla_dump_to=x", "PATH": "/bin"})
    assert {key: environment[key] for key in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                                              "OPENBLAS_CORETYPE")} == {
        "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell"}
    # Without the CPUID mask nothing else caps YNNPACK, so it is switched off; with it, YNNPACK stays on.
    assert environment["XLA_FLAGS"].split() == ["--xla_dump_to=x", "--xla_cpu_max_isa=AVX2",
                                                "--xla_cpu_experimental_ynn_fusion_type="]
    assert environment["PATH"] == "/bin" and "TF_ENABLE_ONEDNN_OPTS" not in environment
    assert "LD_PRELOAD" not in environment
    masked = emulated_environment("avx2", {"LD_PRELOAD": "/lib/other.so"}, cpuid_mask="/tmp/mask.so")
    assert masked["LD_PRELOAD"] == "/tmp/mask.so /lib/other.so"
    assert masked["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX2"
    assert emulated_environment(None, {"PATH": "/bin"}) == {"PATH": "/bin"}
    with pytest.raises(ValueError, match="'avx1'"):
        emulated_environment("avx1", {})
    kind = cpu_kind(environ=environment)
    if kind.isa != "unknown":  # a Linux x86 machine with AVX2 or newer: seen as an AVX2 CPU
        assert (kind.isa, kind.tensorflow_onednn) == ("avx2", False)
        assert choose_cpu_settings(kind, environment).variables == {"TF_ENABLE_ONEDNN_OPTS": "1"}


def test_only_a_cpu_whose_flags_list_cpuid_fault_has_its_cpuid_masked(tmp_path):
    from benchmarks.emulate_isa import build_cpuid_mask

    refusal = "cannot trap CPUID (no cpuid_fault in /proc/cpuinfo)"
    for flags, trappable in (("fpu avx2 cpuid_fault hypervisor", True), ("fpu avx2 cpuid hypervisor", False),
                             (None, False)):
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text("processor\t: 0\n" + (f"flags\t\t: {flags}\n" if flags else ""))
        library, why_not = build_cpuid_mask("avx2", cache=tmp_path, cpuinfo=cpuinfo)
        # With the flag the mask is built, or refused for another reason (no compiler); without it, never built.
        assert (refusal not in (why_not or "")) == trappable and (library is None or trappable), (flags, why_not)


CPU_FEATURES = "from numpy._core._multiarray_umath import __cpu_features__ as f; print(f['AVX512F'], f['AVX2'])"


def test_the_masked_cpuid_shows_an_avx2_cpu_and_leaves_every_other_segfault_fatal(tmp_path):
    # numpy reads CPUID when it loads: under the mask it sees AVX2 and no AVX-512, in the process and in a child.
    # A real segmentation fault still reaches Python's faulthandler and ends the process, and so does a
    # SIGSEGV sent by kill: the mask answers only the CPUID instruction.
    import sys

    from benchmarks.emulate_isa import build_cpuid_mask, emulated_environment
    from tracks.common.cpu_settings import read_cpu_flags

    if "avx2" not in (read_cpu_flags() or ()):
        pytest.skip("no AVX2 on this CPU to emulate")
    library, why_not = build_cpuid_mask("avx2", cache=tmp_path)
    if library is None:
        pytest.skip(f"CPUID cannot be masked here: {why_not}")
    environment = emulated_environment("avx2", cpuid_mask=library)
    child = f"import subprocess, sys; {CPU_FEATURES}; subprocess.run([sys.executable, '-c', {CPU_FEATURES!r}])"
    seen = subprocess.run([sys.executable, "-c", child], env=environment, capture_output=True, text=True, timeout=60)
    assert seen.stdout.split() == ["False", "True"] * 2, seen.stderr[-500:]
    fault = subprocess.run([sys.executable, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"],
                           env=environment, capture_output=True, text=True, timeout=60)
    assert fault.returncode == -11 and "Fatal Python error: Segmentation fault" in fault.stderr, fault.stderr[-500:]
    sent = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                          env=environment, capture_output=True, text=True, timeout=60)
    assert sent.returncode == -11, sent.stderr[-500:]


def test_a_cache_folder_that_cannot_be_written_falls_back_to_the_variables(tmp_path):
    from benchmarks.emulate_isa import build_cpuid_mask

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    library, why_not = build_cpuid_mask("avx2", cache=blocker)
    assert library is None and why_not, (library, why_not)


@pytest.mark.parametrize("command", ["no-such-command", "/", "./benchmarks/NOTES.md"])
def test_a_command_that_cannot_run_under_the_emulation_is_one_line_and_exit_2(command, capsys):
    from benchmarks.emulate_isa import main

    assert main(["avx2", "--", command, "--help"]) == 2
    assert f"emulate_isa.py: cannot run {command}: " in capsys.readouterr().err.splitlines()[-1]
