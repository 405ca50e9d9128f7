"""The public API is type-hinted: every parameter and every return of what `residual_keras` and its plots export."""

import inspect
import typing

import pytest

import residual_keras as rk


pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model: no per-test Keras reset


PUBLIC = [getattr(module, name) for module in (rk, rk.plots) for name in module.__all__
          if inspect.isfunction(getattr(module, name)) or inspect.isclass(getattr(module, name))]


def _own_functions(obj):
    """A function itself, or every `__init__` / `__new__` a public class defines or inherits from this package,
    and the methods a layer is used through: `call`, the residual protocol's `residual_steps`, `check_steps`."""
    if inspect.isfunction(obj):
        return [obj]
    return [getattr(vars(cls)[name], "__func__", vars(cls)[name])  # __new__ is a staticmethod
            for cls in obj.__mro__ for name in ("__init__", "__new__", "call", "residual_steps", "check_steps")
            if name in vars(cls) and cls.__module__.startswith("residual_keras")]


@pytest.mark.parametrize("obj", PUBLIC, ids=lambda obj: obj.__name__)
def test_every_parameter_and_return_is_annotated(obj):
    functions = _own_functions(obj)
    assert functions, f"{obj.__name__}: nothing to check"
    for function in functions:
        hints = typing.get_type_hints(function)  # also fails on a name that does not resolve
        parameters = inspect.signature(function).parameters.values()
        missing = [p.name for p in parameters
                   if p.name not in ("self", "cls", "args", "kwargs") and p.name not in hints]
        assert not missing, f"{function.__qualname__}: no annotation for {missing}"
        assert "return" in hints, f"{function.__qualname__}: no return annotation"
