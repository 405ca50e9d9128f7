"""Running a whole model while watching (and replacing) its blocks' calls.

The instruments see a model through its blocks: the stream points are

    x_0 = the first block's input,  x_l = block l+1's input (l < L),
    x_L = the last block's output,

numbered in the order the forward pass calls the blocks. `Forward.run`
calls the whole model, whatever its shape (functional with one or several
outputs, a skip around the blocks, blocks inside nested stages, Sequential,
subclassed), and intercepts each block's `call`: it records the stream
points, and on request

- `replace={l: function}` computes block l as `function(its input,
  *call_args, **call_kwargs)`, with the other arguments the block's call
  received (masks; not `training`): a lesion, a swap, or the block's
  recorded output to skip recomputing it;
- `edit=function(point, tensor)` changes a stream point before the rest of
  the model sees it (a zero perturbation to differentiate at, or the point
  a Jacobian starts from);
- `stop_at=point` ends the forward pass as soon as that point is known.

So "the rest of the model after block l, with block l's output replaced"
is the model itself, run with a replacement: nothing is cut out of it, and
the layers that are not blocks (stems, skips, heads, several outputs) run
exactly as they do in the model. The interception sets an instance
attribute `call` on each block for the duration of one run and removes it
afterwards. A model that has never been called (a subclassed model builds
its layers in its first call) is called once first, so that the run sees
each block called once.
"""

import contextlib

import keras
from keras import ops

from residual_keras.diagnostics._autodiff import trace
from residual_keras.diagnostics._block_search import resolve_blocks


class _Stop(BaseException):
    """Ends a forward pass early (a BaseException, so Keras does not rewrap it)."""


class _Refused(BaseException):
    """A model shape the instruments cannot measure; becomes a ValueError."""


class Trace:
    """What one run saw: the stream points, each block's input and output, the model output."""

    def __init__(self):
        self.points = []  # x_0 .. x_L (as edited)
        self.inputs = []  # what each block received (x_{l-1})
        self.outputs = []  # what each block returned
        self.calls = []  # each block's other call arguments: (args, kwargs without `training`)
        self.model_outputs = None  # None when the run stopped early
        self.order = []  # index into Forward.blocks of each call


class Forward:
    """A model and its blocks, run as a whole with the blocks' calls intercepted.

    Args:
        model: a keras.Model (functional, Sequential or subclassed).
        blocks: None (every layer that implements the residual protocol,
            see `residual_keras.diagnostics.blocks`) or a list of layers or
            layer names.
        compile_blocks: bool. On TensorFlow, run each block that is not
            replaced, in inference mode, as a `tf.function` traced once and
            reused by every later run: for the studies that run the model
            dozens of times (lesions, deletions, swaps), whose time it cuts
            by about a third on a ResNet-32 (benchmarks/NOTES.md, issue 67).
            The same operations, so the results agree to float rounding.
            Other backends: ignored. Default False.

    After the first `run`, `blocks` and `names` are in the order the
    forward pass calls the blocks.
    """

    def __init__(self, model, blocks=None, *, compile_blocks=False):
        self.model = model
        self.model_name = model.name if isinstance(model, keras.Model) else None
        self.blocks, self.names = resolve_blocks(model, blocks)
        self._ordered = False
        self._run = None  # the state of the run in progress
        # id(block) -> (block, its call traced): kept for this Forward's life
        self._traced = {} if compile_blocks and keras.backend.backend() == "tensorflow" else None

    def __len__(self):
        return len(self.blocks)

    def run(self, x, *, training=False, replace=None, edit=None, stop_at=None):
        """Runs the model on `x`; returns the `Trace`.

        Args:
            x: model inputs (arrays or tensors, or a list/dict of them).
            training: bool. Passed to the model.
            replace: {block position: function(input, *call_args, **call_kwargs) -> output}.
            edit: function(point, tensor) -> tensor, applied to x_0..x_L.
            stop_at: a point number; the run ends once it is computed
                (`model_outputs` is then None).
        """
        trace = Trace()
        self._run = {
            "trace": trace, "replace": replace or {}, "edit": edit, "stop_at": stop_at,
            "inside": False,
        }
        inputs = _model_inputs(self.model, x)
        if not self.model.built:
            self.model(inputs, training=False)  # builds a subclassed model's layers, unwatched
        try:
            with self._intercepted():
                try:
                    trace.model_outputs = self.model(inputs, training=training)
                except _Stop:
                    pass
        except _Refused as refused:
            raise ValueError(str(refused)) from None
        finally:
            self._run = None
        if stop_at is None:
            self._check_calls(trace)
        return trace

    def _check_calls(self, trace):
        missing = [self.names[index] for index in range(len(self.blocks)) if index not in trace.order]
        if missing:
            raise ValueError(
                f"Block(s) {', '.join(missing)} of model {self.model_name!r} did not run when the "
                "model was called: unused layers, or a call the instruments cannot see (a "
                "`tf.function`/`jax.jit` around the model's call, a block run through its "
                "`call()` method instead of calling the layer). Pass blocks= with the blocks "
                "the forward pass calls, or call the blocks as layers."
            )
        if not self._ordered:
            self.blocks = [self.blocks[index] for index in trace.order]
            self.names = [self.names[index] for index in trace.order]
            self._ordered = True
        elif trace.order != list(range(len(self.blocks))):
            raise ValueError(
                f"The blocks of model {self.model_name!r} ran in a different order "
                "from one call to the next; the instruments need one fixed order."
            )

    @contextlib.contextmanager
    def _intercepted(self):
        patched = []
        try:
            for index, block in enumerate(self.blocks):
                own = block.__dict__.get("call")  # an instance attribute already there
                original = block.call

                def hooked(*args, _index=index, _original=original, **kwargs):
                    return self._hook(_index, _original, args, kwargs)

                object.__setattr__(block, "call", hooked)  # not tracked by Keras
                patched.append((block, own))
            yield
        finally:
            for block, own in patched:
                if own is None:
                    object.__delattr__(block, "call")
                else:
                    object.__setattr__(block, "call", own)

    def _point(self, number, tensor):
        run = self._run
        if run["edit"] is not None:
            tensor = run["edit"](number, tensor)
        run["trace"].points.append(tensor)
        if run["stop_at"] == number:
            raise _Stop()
        return tensor

    def _hook(self, index, original, args, kwargs):
        run = self._run
        if run is None or run["inside"]:
            # Called by another block or by a replacement: the block as it is.
            return original(*args, **kwargs)
        trace = run["trace"]
        name = self.names[index]
        if index in trace.order:
            raise _Refused(
                f"Block {name!r} of model {self.model_name!r} is called more than once in one "
                "forward pass (shared weights or a loop), so it is not one step of the "
                "stream. Measure a model that calls each block once, or pass blocks= "
                "without it."
            )
        if not args or not keras.ops.is_tensor(args[0]):
            raise _Refused(
                f"Block {name!r} of model {self.model_name!r} was called without a tensor as "
                "its first argument; the instruments follow one stream tensor through the "
                "blocks. Pass blocks= with layers that take the stream as their input."
            )
        position = len(trace.order)
        trace.order.append(index)
        stream = self._point(position, args[0])
        trace.inputs.append(stream)
        call_args = args[1:]
        call_kwargs = {key: value for key, value in kwargs.items() if key != "training"}
        trace.calls.append((call_args, call_kwargs))
        run["inside"] = True
        try:
            if position in run["replace"]:
                output = run["replace"][position](stream, *call_args, **call_kwargs)
            else:
                output = self._block_call(index, original, kwargs)(stream, *args[1:], **kwargs)
        finally:
            run["inside"] = False
        trace.outputs.append(output)
        if position == len(self.blocks) - 1:
            output = self._point(position + 1, output)
        return output

    def _block_call(self, index, original, kwargs):
        """The block's own call, or (with `compile_blocks`, eager inference) that call traced once."""
        if self._traced is None or kwargs.get("training"):
            return original
        import tensorflow as tf  # only here: the backend is TensorFlow

        if not tf.executing_eagerly():
            return original  # already inside a traced function: the call is part of its graph
        block = self.blocks[index]
        if id(block) not in self._traced:
            self._traced[id(block)] = (block, _traced(original))
        return self._traced[id(block)][1]

    # Runs the instruments use ---------------------------------------------------

    def replay(self, x, first, *, start, replace=None, edit=None, stop_at=None, training=False):
        """A run that reuses `first`'s outputs for the blocks before `start`.

        The blocks before `start` return what they returned in `first` (a
        run on the same `x`, in inference mode) instead of computing it
        again; the layers between them still run.
        """
        cached = {
            position: (lambda *_, output=first.outputs[position], **__: output)
            for position in range(start)
        }
        cached.update(replace or {})
        return self.run(x, training=training, replace=cached, edit=edit, stop_at=stop_at)

    def segment(self, x, first, start, stop):
        """The function x_start -> x_stop (inference mode), as the model computes it."""

        def function(z):
            trace = self.replay(
                x, first, start=start, stop_at=stop,
                edit=lambda point, tensor: z if point == start else tensor,
            )
            return trace.points[stop]

        return function

    def directly_chained(self, trace):
        """None if every block's input is the previous block's output, else the first pair that is not."""
        for position in range(1, len(self.blocks)):
            before, after = trace.outputs[position - 1], trace.inputs[position]
            if before is after:
                continue
            same = tuple(before.shape) == tuple(after.shape) and bool(
                ops.all(ops.equal(before, after))
            )
            if not same:
                return self.names[position - 1], self.names[position]
        return None


def _traced(original):
    """`original` traced (`_autodiff.trace`); op by op from the first call that cannot be traced.

    A block whose call TensorFlow cannot trace (Python that reads a tensor's
    value, say) runs as it is, and raises its own error if it has one.
    """
    traced = trace(original)
    works = [True]

    def call(*args, **kwargs):
        if works[0]:
            try:
                return traced(*args, **kwargs)
            except Exception:  # noqa: BLE001 (the call below raises the block's own error, if any)
                works[0] = False
        return original(*args, **kwargs)

    return call


def as_tensors(x):
    return keras.tree.map_structure(ops.convert_to_tensor, x)


def _model_inputs(model, x):
    """`x` as tensors, in a one-element list where a functional model was built with one."""
    x = as_tensors(x)
    try:
        declared = model.input
    except (AttributeError, ValueError):  # subclassed models have no declared inputs
        return x
    if isinstance(declared, list) and len(declared) == 1 and not isinstance(x, (list, tuple, dict)):
        return [x]
    return x
