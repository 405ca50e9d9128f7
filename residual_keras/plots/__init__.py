"""Figures of the diagnostics: one function per instrument of `diagnostics`.

Each function takes the plain data an instrument returns (one result or a
list of them, e.g. a plain and a residual network), draws it on a
`matplotlib.figure.Figure` and returns the figure; with `path=` it also
saves it (PNG, SVG or PDF by the file's extension). Figures are made
without `pyplot`, so nothing opens a window, no global state is touched, and
everything works headless (on a server, in CI, in a thread).

Every function accepts `banner`, a line put above the title (for example
"SYNTHETIC DATA" when the numbers do not come from the real data set), and
`labels`, one legend label per result (by default each result's `model`
name).

The reference curves are the course's equations: `c^L` for products of L
Jacobians of norm c (`jacobian`), `prod (1 +- eps_l)` for blocks x + f(x)
(`jacobian_blocks`), `sqrt(L)` for a stream that adds L branches of fixed
size (`activation_growth`, on request), `alpha^L` and `(1 + alpha)^L` for
the scalar chain (`scalar_chain`).

Every figure follows one convention (`series_styles`): colour = depth,
line style and marker = variant, one palette (`PALETTE`). A label says its
variant and depth explicitly (`Label("plain-20", "plain", 20)`); plain
strings get one colour each.

Every figure can be read at 800 px wide (a page, a notebook cell): its
smallest text is then at least 8 px high, several panels go in a grid of
at most two columns (never a strip), a panel without data is left out,
and every axis is labelled (tests/library/test_plots_legible.py checks
each function). One numbering and one notation everywhere: block 1 is the
first block, and the stream x_0 enters block 1, x_l leaves block l, x_L
leaves the last block.

One module per kind of figure: `gradients`, `jacobian`, `activations`,
`lesions`, `transformer`, `dynamics`, `landscape`, `training` (learning curves); `_style` holds the palette, the
convention and the figure helpers.
"""

from residual_keras.plots._style import PALETTE, VARIANT_STYLES, Label, series_styles
from residual_keras.plots.activations import activation_growth
from residual_keras.plots.dynamics import dynamics
from residual_keras.plots.gradients import gradient_flow, layer_gradients, scalar_chain
from residual_keras.plots.jacobian import depth_scaling, jacobian, jacobian_blocks
from residual_keras.plots.landscape import loss_landscape
from residual_keras.plots.lesions import block_deletion, lesion, path_gradients
from residual_keras.plots.training import curves
from residual_keras.plots.transformer import logit_lens, stream, sublayer_lesions

__all__ = [
    "Label",
    "PALETTE",
    "VARIANT_STYLES",
    "activation_growth",
    "block_deletion",
    "curves",
    "depth_scaling",
    "dynamics",
    "gradient_flow",
    "jacobian",
    "jacobian_blocks",
    "layer_gradients",
    "lesion",
    "logit_lens",
    "loss_landscape",
    "path_gradients",
    "scalar_chain",
    "series_styles",
    "stream",
    "sublayer_lesions",
]
