"""How a process is set up for its kind of CPU before TensorFlow loads (tracks/common/cpu_settings.py).

The CPU's kind is read from /proc/cpuinfo, capped by ONEDNN_MAX_CPU_ISA, so
that an AVX2 CPU emulated on an AVX-512 machine (benchmarks/emulate_isa.py)
gets the setting a real AVX2 laptop gets: TensorFlow's oneDNN kernels on,
where TensorFlow leaves them off.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from tracks.common.config import ConfigError
from tracks.common.cpu_settings import (
    ONEDNN_VARIABLE,
    CpuKind,
    apply_cpu_settings,
    capped_flags,
    choose_cpu_settings,
    cpu_kind,
    describe_cpu_settings,
)
from tracks.common.environment import read_environment

ROOT = pathlib.Path(__file__).resolve().parents[2]

# First-processor `flags` lines of real CPUs (trimmed to what matters here).
ZEN3 = "fpu sse4_1 sse4_2 avx f16c fma avx2 bmi2"  # AMD EPYC/Ryzen 5000: the AVX2 machine
ALDER_LAKE = "fpu sse4_1 avx fma avx2 avx_vnni"  # Intel 12th generation laptops: AVX-VNNI, no AVX-512
SKYLAKE_X = "fpu avx fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl"
ZEN4 = "fpu avx fma avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16"
SAPPHIRE_RAPIDS = ZEN4 + " avx_vnni avx512_fp16 amx_bf16 amx_tile amx_int8"
SANDY_BRIDGE = "fpu sse4_1 sse4_2 avx"


def _cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: a CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    return str(path)


@pytest.mark.parametrize("flags, isa, tensorflow_onednn, bf16", [
    (ZEN3, "avx2", False, False), (ALDER_LAKE, "avx2", True, False), (SKYLAKE_X, "avx512", False, False),
    (ZEN4, "avx512", True, True), (SAPPHIRE_RAPIDS, "avx512", True, True), (SANDY_BRIDGE, "older", False, False),
])
def test_the_cpu_kind_and_tensorflows_own_onednn_default_come_from_the_flags(tmp_path, flags, isa,
                                                                              tensorflow_onednn, bf16):
    assert cpu_kind(_cpuinfo(tmp_path, flags), environ={}) == CpuKind(isa, tensorflow_onednn, bf16, None)


def test_no_flags_is_an_unknown_kind_left_to_tensorflow(tmp_path):
    kind = cpu_kind(str(tmp_path / "missing"), environ={})
    assert kind == CpuKind("unknown", None, False, None)
    settings = choose_cpu_settings(kind, {})
    assert settings.variables == {} and settings.onednn is None


@pytest.mark.parametrize("cap, isa, tensorflow_onednn, bf16", [
    ("AVX2", "avx2", False, False), ("avx2", "avx2", False, False), ("AVX2_VNNI", "avx2", True, False),
    ("AVX512_CORE", "avx512", False, False), ("AVX512_CORE_VNNI", "avx512", True, False),
    ("AVX512_CORE_BF16", "avx512", True, True), ("AVX", "older", False, False), ("ALL", "avx512", True, True),
])
def test_onednns_isa_cap_makes_a_newer_cpu_the_kind_it_stands_for(tmp_path, cap, isa, tensorflow_onednn, bf16):
    cpuinfo = _cpuinfo(tmp_path, SAPPHIRE_RAPIDS)
    expected_cap = None if cap == "ALL" else cap.upper()
    assert cpu_kind(cpuinfo, environ={"ONEDNN_MAX_CPU_ISA": cap}) == CpuKind(isa, tensorflow_onednn, bf16,
                                                                             expected_cap)
    assert cpu_kind(cpuinfo, environ={"DNNL_MAX_CPU_ISA": cap}).isa == isa  # oneDNN's older name


def test_a_cap_removes_every_newer_vector_extension_and_nothing_else():
    flags = frozenset(SAPPHIRE_RAPIDS.split()) | {"avx512_bitalg", "sse2", "aes"}
    assert capped_flags(flags, "AVX2") == {"fpu", "avx", "fma", "avx2", "sse2", "aes"}
    assert capped_flags(flags, None) == flags


@pytest.mark.parametrize("variable, value, words", [
    ("ONEDNN_MAX_CPU_ISA", "AVX3", "AVX3"), ("TF_ENABLE_ONEDNN_OPTS", "yes", "'yes'"),
    ("RESIDUAL_KERAS_CPU_SETTINGS", "fast", "'fast'"),
])
def test_a_value_that_would_be_ignored_is_refused_with_the_variable_named(variable, value, words):
    with pytest.raises(ConfigError, match=variable) as refused:
        read_environment({variable: value})
    assert words in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("flags, mode, variables, chosen_by", [
    (ZEN3, None, {ONEDNN_VARIABLE: "1"}, "residual_keras"),  # TensorFlow leaves oneDNN off: on
    (SKYLAKE_X, None, {ONEDNN_VARIABLE: "1"}, "residual_keras"),
    (ZEN4, None, {ONEDNN_VARIABLE: "1"}, "tensorflow"),  # TensorFlow turns it on itself: written out as is
    (SANDY_BRIDGE, None, {ONEDNN_VARIABLE: "0"}, "tensorflow"),  # not measured: TensorFlow's default
    (ZEN3, "tensorflow", {ONEDNN_VARIABLE: "0"}, "tensorflow"),  # the opt-out: TensorFlow's default for AVX2
])
def test_onednn_is_turned_on_where_tensorflow_leaves_it_off_on_avx2_and_avx512(tmp_path, flags, mode, variables,
                                                                               chosen_by):
    environ = {} if mode is None else {"RESIDUAL_KERAS_CPU_SETTINGS": mode}
    settings = apply_cpu_settings(environ, cpuinfo=_cpuinfo(tmp_path, flags))
    assert (settings.variables, settings.chosen_by) == (variables, chosen_by)
    assert {key: environ[key] for key in variables} == variables  # written where TensorFlow will read it


def test_the_users_own_setting_is_kept(tmp_path):
    for value, onednn in (("0", False), ("TRUE", True)):
        environ = {ONEDNN_VARIABLE: value}
        settings = apply_cpu_settings(environ, cpuinfo=_cpuinfo(tmp_path, ZEN3))
        assert (settings.onednn, settings.chosen_by, environ) == (onednn, "environment", {ONEDNN_VARIABLE: value})


def test_too_late_to_change_tensorflow_is_an_error_that_says_when_to_call_it(monkeypatch):
    import tensorflow  # noqa: F401  (loaded, as in a notebook that imported keras first)

    from tracks.common import cpu_settings

    loaded = cpu_settings.tensorflow_onednn_enabled()
    monkeypatch.setenv(ONEDNN_VARIABLE, "0" if loaded else "1")
    with pytest.raises(RuntimeError, match="before importing keras, tensorflow or residual_keras"):
        apply_cpu_settings()
    monkeypatch.setenv(ONEDNN_VARIABLE, "1" if loaded else "0")
    assert apply_cpu_settings().onednn is loaded  # what is loaded already: nothing to change


def test_a_run_records_its_cpu_kind_and_whether_onednn_really_is_on():
    from tracks.common.cpu_settings import tensorflow_onednn_enabled
    from tracks.common.runtime import setup_runtime

    described = setup_runtime("fp32", "off", "none").describe()
    settings = described["cpu_settings"]
    assert settings["onednn"] is tensorflow_onednn_enabled()
    assert settings["cpu"] == cpu_kind().isa
    assert describe_cpu_settings(settings) in described["device"]


EMULATED_PROBE = """
import sys
from tracks.common.cpu_settings import apply_cpu_settings, cpu_kind
settings = apply_cpu_settings()
import keras, numpy as np
import residual_keras as rk
from tensorflow.python.util import _pywrap_util_port
block = rk.BasicBlock(8, data_format="channels_first")
print(cpu_kind().isa, settings.chosen_by, _pywrap_util_port.IsMklEnabled(), tuple(block(np.ones((2, 8, 4, 4), "float32")).shape))
"""


@pytest.mark.slow  # two fresh TensorFlow processes (about 20 s on 2 cores)
def test_an_emulated_avx2_cpu_gets_onednn_and_channels_first_from_the_one_line(tmp_path):
    # As a student's script on an AVX2 laptop: the one line, then residual_keras; TensorFlow's own default
    # there (RESIDUAL_KERAS_CPU_SETTINGS=tensorflow) has no oneDNN and refuses channels_first.
    sys.path.insert(0, str(ROOT))
    from benchmarks.emulate_isa import emulation

    if cpu_kind().isa not in ("avx2", "avx512"):
        pytest.skip(f"no AVX2 to emulate on this CPU ({cpu_kind().isa})")
    base = {key: value for key, value in os.environ.items() if key not in (ONEDNN_VARIABLE,)}
    base.update(PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    outputs = []
    for extra in ({}, {"RESIDUAL_KERAS_CPU_SETTINGS": "tensorflow"}):
        env, _ = emulation("avx2", {**base, **extra})  # CPUID masked where it can be: TensorFlow's own choice too
        finished = subprocess.run([sys.executable, "-c", EMULATED_PROBE], env=env, cwd=tmp_path,
                                  capture_output=True, text=True, timeout=300)
        outputs.append(finished.stdout.strip().splitlines()[-1] if finished.returncode == 0 else finished.stderr)
    assert outputs[0] == "avx2 residual_keras True (2, 8, 4, 4)", outputs[0]
    assert "channels_first" in outputs[1] and "oneDNN" in outputs[1], outputs[1][-500:]
