"""Interactive explorers (ipywidgets). Each is a function that builds and returns a widget.

The widgets only move numbers around: the computing is done by functions that the tests
check directly (``tiny_chain_step``, ``describe_step``), so what a slider shows is as trustworthy
as what a test asserts. ipywidgets and matplotlib are imported here, on first use.
"""
from __future__ import annotations

from . import style
from .nb01 import tiny_chain_step

style.apply()

WIDE = {"description_width": "initial"}  # show a slider's whole name ("temperature", not "temperat…")


def _show_figure(picture, figsize, draw, description: str) -> None:
    """Replace what the Output widget ``picture`` shows with a new figure, drawn by ``draw(ax)``, and the
    ``description`` in words of what it shows (``style.show_figure``).

    The figure is made without pyplot, so it is not among pyplot's open figures, which the inline
    backend shows and closes when any cell ends. ipykernel can handle a slider's message while a cell
    is running, and an explorer drawing through pyplot then once showed a blank picture."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    draw(fig.subplots())
    picture.clear_output(wait=True)
    with picture:
        style.show_figure(description, fig)


def _named(slider):
    """``slider`` with a box before it that holds the same value and that a screen reader can name.

    ipywidgets gives a slider's handle no accessible name and has no setting for one: its description is
    a label that the handle, a ``div``, cannot be tied to, so a screen reader hears "slider 2". A number
    box's or drop-down's description is a label tied to it, which names it. So the name moves to the box,
    and the box replaces the slider's readout; typing a value in it moves the slider, and the other way.
    The handle itself gets the same name from ``labelled`` (``aria-label``, set in the browser)."""
    import ipywidgets as widgets

    layout = widgets.Layout(width="auto")
    name, slider.description, slider.readout = slider.description, "", False
    if isinstance(slider, widgets.SelectionSlider):
        box = widgets.Dropdown(options=slider.options, value=slider.value, description=name, style=WIDE, layout=layout)
    else:
        kind = widgets.BoundedIntText if isinstance(slider, widgets.IntSlider) else widgets.BoundedFloatText
        box = kind(value=slider.value, min=slider.min, max=slider.max, step=slider.step, description=name, style=WIDE,
                   layout=layout)
    box.add_class(BOX_CLASS)
    widgets.link((slider, "value"), (box, "value"))
    return widgets.HBox([box, slider])


BOX_CLASS = "haaw-slider-box"  # the named box beside a slider (``_named``)

# Run by JupyterLab when an explorer is shown: every slider handle on the page that has no name yet gets
# aria-label = the description of the named box in its row, now and whenever widgets are drawn or redrawn (one
# observer for the page, kept on window). A screen reader then says "w, slider, 2", not "slider, 2". No timer:
# a page in the background runs timers late, and a first version that waited on one left handles unnamed.
NAME_HANDLES_JS = """
(function () {
  function name() {
    document.querySelectorAll('.noUi-handle:not([aria-label])').forEach(function (handle) {
      var row = handle.closest('.widget-hbox');
      var label = row && row.querySelector('.%s .widget-label');
      var text = label ? label.textContent.trim() : '';
      if (text) handle.setAttribute('aria-label', text);
    });
  }
  if (!window.haawNameHandles) {
    window.haawNameHandles = new MutationObserver(name);
    window.haawNameHandles.observe(document.body, {childList: true, subtree: true});
  }
  name();
})();
""" % BOX_CLASS


def labelled(*children):
    """A VBox of ``children`` and, last, an invisible output area whose script names its sliders' handles
    (``NAME_HANDLES_JS``). Outside JupyterLab (a static page, a frontend that runs no script) nothing runs,
    and the named boxes beside the sliders still carry the names."""
    import ipywidgets as widgets
    from IPython.display import Javascript

    script = widgets.Output(layout=widgets.Layout(display="none"))
    script.append_display_data(Javascript(NAME_HANDLES_JS))
    return widgets.VBox([*children, script])


def tangent_explorer(w: float = 2.0, x: float = 3.0, lr: float = 0.01):
    """Sliders for w, x and η: the loss curve, its tangent at w and one gradient step."""
    import ipywidgets as widgets

    from .plots import plot_tangent_step

    sliders = [
        widgets.FloatSlider(style=WIDE, value=w, min=-3.0, max=3.0, step=0.1, description="w"),
        widgets.FloatSlider(style=WIDE, value=x, min=-3.0, max=3.0, step=0.1, description="x"),
        widgets.FloatSlider(style=WIDE, value=lr, min=0.0, max=0.15, step=0.005, readout_format=".3f",
                            description="η"),
    ]
    numbers = widgets.HTML()
    picture = widgets.Output()

    def redraw(_=None):
        w_, x_, lr_ = (s.value for s in sliders)
        numbers.value = "<pre>" + str(tiny_chain_step(w_, x_, lr_)) + "</pre>"
        step = tiny_chain_step(w_, x_, lr_)
        _show_figure(picture, (6, 3.6), lambda ax: plot_tangent_step(w_, x_, lr_, ax=ax),
                     f"the curve L(w) = (w·x)² for x = {x_:g}; its tangent at w = {w_:g}, slope dL/dw = "
                     f"{step.dL_dw:.3g}; an arrow for one step with η = {lr_:g}, to w = {step.w_new:.3g}, "
                     f"where L = {step.loss_new:.3g}.")

    for s in sliders:
        s.observe(redraw, names="value")
    redraw()
    return labelled(widgets.HBox([_named(s) for s in sliders[:2]]), _named(sliders[2]), numbers, picture)


def backward_stepper(root, width: int | None = None):
    """Walk ``root``'s backward pass one node at a time, on its drawn graph."""
    import ipywidgets as widgets

    from ..tools.draw import draw_graph
    from ..tools.stepping import describe_step, grads_at, step_highlights, trace_backward

    start, steps = trace_backward(root)
    slider = widgets.IntSlider(style=WIDE, value=0, min=0, max=len(steps), description="step")
    text = widgets.HTML()
    picture = widgets.HTML()

    def redraw(_=None):
        k = slider.value
        grads = grads_at(start, steps, k)
        highlight, notes = step_highlights(steps, k)
        # the drawing as an <img> whose alt text says the graph and its gradients in words (GraphSVG's HTML form)
        picture.value = draw_graph(root, grads=grads, highlight=highlight, edge_notes=notes)._repr_html_()
        text.value = "<pre>" + describe_step(root, start, steps, k) + "</pre>"

    slider.observe(redraw, names="value")
    redraw()
    return labelled(_named(slider), text, picture)


def matmul_shape_explorer(B: int = 4, n: int = 3, m: int = 2):
    """Sliders for batch size and layer sizes: which matrices meet in each gradient of Y = XW."""
    import ipywidgets as widgets

    from .nb03 import describe_matmul_gradients
    from .plots import plot_matmul_shapes

    sliders = [widgets.IntSlider(style=WIDE, value=v, min=1, max=8, description=d)
               for v, d in ((B, "batch B"), (n, "inputs n"), (m, "outputs m"))]
    text, picture = widgets.HTML(), widgets.Output()

    def redraw(_=None):
        b, n_, m_ = (s.value for s in sliders)
        text.value = "<pre>" + describe_matmul_gradients(b, n_, m_) + "</pre>"
        _show_figure(picture, (8, 3), lambda ax: plot_matmul_shapes(b, n_, m_, ax=ax),
                     f"the three products drawn to scale as blocks: X ({b}×{n_}) @ W ({n_}×{m_}) = Y ({b}×{m_}); "
                     f"Xᵀ ({n_}×{b}) @ G ({b}×{m_}) = dW ({n_}×{m_}); G ({b}×{m_}) @ Wᵀ ({m_}×{n_}) = dX ({b}×{n_}).")

    for s in sliders:
        s.observe(redraw, names="value")
    redraw()
    return labelled(widgets.HBox([_named(s) for s in sliders]), text, picture)


def gradient_flow_explorer(depth: int = 50, init_scale: float = 0.9):
    """Depth, initialisation scale and the residual / LayerNorm switches: the gradient per layer."""
    import ipywidgets as widgets

    from .nb04 import deep_stack_grad_norms
    from .plots import plot_gradient_norms

    depth_slider = widgets.IntSlider(style=WIDE, value=depth, min=2, max=100, description="depth")
    scale_slider = widgets.FloatSlider(style=WIDE, value=init_scale, min=0.5, max=1.5, step=0.05, description="init scale")
    residual = widgets.Checkbox(value=False, description="residual")
    normalise = widgets.Checkbox(value=False, description="LayerNorm")
    text, picture = widgets.HTML(), widgets.Output()

    def redraw(_=None):
        norms = deep_stack_grad_norms(depth_slider.value, init_scale=scale_slider.value,
                                      residual=residual.value, normalise=normalise.value)
        factor = (norms[0] / norms[-1]) ** (1 / max(len(norms) - 1, 1))
        text.value = (f"<pre>first layer / last layer: {norms[0] / norms[-1]:.3g}   "
                      f"average factor per layer: {factor:.3f}</pre>")

        def draw(ax):
            plot_gradient_norms({"this setting": norms}, ax=ax)
            ax.set_ylim(min(1e-4, norms.min() / 2), max(1e4, norms.max() * 2))

        _show_figure(picture, (6, 3.4), draw,
                     f"the gradient norm reaching each of the {len(norms)} layers, on a log scale: "
                     f"{norms[0]:.3g} at the first layer, {norms[-1]:.3g} at the last.")

    for w in (depth_slider, scale_slider, residual, normalise):
        w.observe(redraw, names="value")
    redraw()
    return labelled(widgets.HBox([_named(depth_slider), _named(scale_slider)]), widgets.HBox([residual, normalise]),
                     text, picture)


def attention_scaling_explorer(d_k: int = 64, temperature: float = 1.0):
    """d_k, temperature and the 1/√d_k switch: how peaked the attention gets, how big its gradient."""
    import ipywidgets as widgets

    from .nb05 import attention_row, describe_attention_row
    from .plots import plot_attention_row

    dims = widgets.SelectionSlider(style=WIDE, options=[2**i for i in range(11)], value=d_k, description="d_k")
    temp = widgets.FloatSlider(style=WIDE, value=temperature, min=0.1, max=4.0, step=0.1, description="temperature")
    scaled = widgets.Checkbox(value=True, description="divide by √d_k")
    text, picture = widgets.HTML(), widgets.Output()

    def redraw(_=None):
        text.value = "<pre>" + describe_attention_row(dims.value, scaled.value, temp.value) + "</pre>"
        weights = attention_row(dims.value, scaled.value, temp.value)["weights"]
        _show_figure(picture, (6, 2.6),
                     lambda ax: plot_attention_row(dims.value, scaled.value, temp.value, ax=ax),
                     f"bars: the attention weight one query gives each of {len(weights)} keys; the largest "
                     f"is {max(weights):.2f}, the smallest {min(weights):.2f}.")

    for w in (dims, temp, scaled):
        w.observe(redraw, names="value")
    redraw()
    return labelled(widgets.HBox([_named(dims), _named(temp), scaled]), text, picture)


def checkpoint_explorer(depth: int = 16, measure=None):
    """Checkpoint segments of k blocks: peak memory and recomputed work, as k changes.

    ``measure(segment, depth=...)`` runs the experiment (notebook 06 hands in its own, so that a
    change made there shows here); without one, ``nb06.measure`` does the same experiment."""
    import ipywidgets as widgets

    from . import nb06

    measure = measure or nb06.measure
    baseline = measure(segment=None, depth=depth)
    segment = widgets.IntSlider(style=WIDE, value=min(4, depth), min=1, max=depth, description="segment k")
    text, picture = widgets.HTML(), widgets.Output()

    def redraw(_=None):
        result = measure(segment=segment.value, depth=depth)
        text.value = f"<pre>checkpoint every {segment.value} block(s): {nb06.describe_run(result, baseline)}</pre>"

        def draw(ax):
            ax.plot(baseline["timeline"], label="no checkpointing")
            ax.plot(result["timeline"], label=f"segments of {segment.value}")
            ax.set(xlabel="operation (forward, then backward)", ylabel="bytes kept for backward")
            ax.legend(frameon=False, fontsize=10)

        _show_figure(picture, (6, 2.8), draw,
                     f"bytes kept for backward after each operation, forward then backward: at most "
                     f"{max(baseline['timeline']) / 2**20:.2f} MiB without checkpointing, "
                     f"{max(result['timeline']) / 2**20:.2f} MiB with segments of {segment.value}.")

    segment.observe(redraw, names="value")
    redraw()
    return labelled(_named(segment), text, picture)


def loss_scale_explorer(grads, log2_scale: int = 0, max_log2: int = 30):
    """A loss-scale slider: which share of the gradients ``grads`` underflows (0) or overflows (inf) in fp16."""
    import ipywidgets as widgets

    from ..amp import cast_report
    from .plots import plot_gradient_ranges

    slider = widgets.IntSlider(style=WIDE, value=log2_scale, min=0, max=max_log2, description="log₂ scale")
    text, picture = widgets.HTML(), widgets.Output()

    def redraw(_=None):
        scale = 2.0**slider.value
        r = cast_report(grads, "float16", scale)
        text.value = (f"<pre>loss scale 2^{slider.value} = {scale:,.0f}: in fp16 {r['zero']:.1%} of the gradients "
                      f"become 0, {r['inf']:.1%} overflow to inf, {r['kept']:.1%} survive</pre>")
        _show_figure(picture, (7, 3), lambda ax: plot_gradient_ranges(grads, formats=("float16",), scale=scale, ax=ax),
                     f"a histogram of log₂ |gradient × 2^{slider.value}|, with fp16's smallest subnormal, smallest "
                     f"normal and largest number marked: in fp16 {r['zero']:.1%} of them become 0 and "
                     f"{r['inf']:.1%} overflow to inf.")

    slider.observe(redraw, names="value")
    redraw()
    return labelled(_named(slider), text, picture)


def padding_explorer(max_extra: int = 12):
    """Extra padding per row: the loss and gradient with the mask before vs after the reduction."""
    import ipywidgets as widgets
    import numpy as np

    from .nb08 import gradient, make_model, masked_mean, mean_over_padded, padded_batch

    slider = widgets.IntSlider(style=WIDE, value=0, min=0, max=max_extra, description="extra padding")
    text = widgets.HTML()
    model = make_model()

    def redraw(_=None):
        batch = padded_batch(pad_to=6 + slider.value)
        lines = []
        for name, reduce in (("mask, then reduce", masked_mean), ("mean over padded size (bug)", mean_over_padded)):
            loss, grads = gradient(model, reduce, batch)
            norm = float(np.sqrt(sum(np.sum(g**2) for g in grads)))
            lines.append(f"{name:<24} loss {loss:.4f}   gradient norm {norm:.4f}")
        text.value = f"<pre>{6 + slider.value} positions per row, same 16 real tokens\n" + "\n".join(lines) + "</pre>"

    slider.observe(redraw, names="value")
    redraw()
    return labelled(_named(slider), text)


def workers_explorer(gradient_gb: float = 28.0):
    """Number of workers: bytes each one sends per step, ring all-reduce against naive exchange,
    and a simulated all-reduce of real gradients checked against the big batch."""
    import ipywidgets as widgets
    import numpy as np

    from .nb09 import ring_all_reduce, ring_bytes_per_worker
    from .nb09 import initial_weights, make_data, shard_gradient

    slider = widgets.IntSlider(style=WIDE, value=4, min=1, max=16, description="workers")
    text = widgets.HTML()
    x, y = make_data(64)
    weights = initial_weights()
    big = np.concatenate([g.ravel() for g in shard_gradient(weights, x, y)])

    def redraw(_=None):
        n = slider.value
        shards = np.array_split(np.arange(len(x)), n)
        local = [np.concatenate([g.ravel() for g in shard_gradient(weights, x[s], y[s], total=len(x))])
                 for s in shards]
        summed, sent = ring_all_reduce(local)
        diff = float(np.max(np.abs(summed[0] - big)))
        text.value = (f"<pre>{n} worker(s), {gradient_gb:g} GB of gradients each step:\n"
                      f"  ring all-reduce: each worker sends {ring_bytes_per_worker(n, gradient_gb):.2f} GB\n"
                      f"  everyone sends to everyone: each worker sends {(n - 1) * gradient_gb:.1f} GB\n"
                      f"simulated ring all-reduce of the toy model's gradients ({big.nbytes} bytes): "
                      f"{sent:.0f} bytes sent per worker, max |difference| from the big batch {diff:.1e}</pre>")

    slider.observe(redraw, names="value")
    redraw()
    return labelled(_named(slider), text)


def sampling_explorer(model, tokenizer, prompt: str = "the ", length: int = 120):
    """A temperature slider for text generated by a trained TinyGPT."""
    import ipywidgets as widgets

    from .nb10 import generate

    slider = widgets.FloatSlider(style=WIDE, value=0.8, min=0.1, max=2.0, step=0.1, description="temperature")
    text = widgets.HTML()

    def redraw(_=None):
        sample = generate(model, tokenizer, prompt, length, seed=1, temperature=slider.value)
        text.value = "<pre>" + sample.replace("<", "&lt;") + "</pre>"

    slider.observe(redraw, names="value")
    redraw()
    return labelled(_named(slider), text)
