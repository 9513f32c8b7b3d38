"""The graph drawer: well-formed SVG, one shape per node, deterministic, and nothing overlaps."""
import math
import random
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from haaw import Value
from haaw.tools.draw import _describe, draw_graph

SVG = "{http://www.w3.org/2000/svg}"


def tiny():
    """w=2, x=3, y=w*x, L=y**2, after backward: the chain of notebook 01."""
    w, x = Value(2.0, label="w"), Value(3.0, label="x")
    y = w * x
    y.label = "y"
    L = y**2
    L.label = "L"
    L.backward()
    return w, x, y, L


def mlp():
    """A 2-4-1 MLP with tanh, built from scalar Values, and a squared error."""
    rng = random.Random(0)
    xs = [Value(0.5, label="x0"), Value(-1.5, label="x1")]
    hidden = []
    for j in range(4):
        ws = [Value(rng.uniform(-1, 1), label=f"w{j}{i}") for i in range(2)]
        hidden.append(sum((w * x for w, x in zip(ws, xs)), Value(0.1 * j, label=f"b{j}")).tanh())
    vs = [Value(rng.uniform(-1, 1), label=f"v{j}") for j in range(4)]
    out = sum((v * h for v, h in zip(vs, hidden)), Value(0.2, label="c")).tanh()
    loss = (out - 1.0) ** 2
    loss.backward()
    return loss


def chain(n=30, constants=False):
    """n values in a line, each computed from the one before (and a constant 1.01, if asked)."""
    v = Value(0.5, label="v")
    for i in range(n - 1):
        v = v.tanh() if i % 2 else (v * 1.01 if constants else v**2)
    return v


def parse(drawing):
    return ET.fromstring(drawing.svg)


def shapes(root, tag, cls):
    return [e for e in root.iter(SVG + tag) if e.get("class") == cls]


def texts(root):
    return [e.text for e in root.iter(SVG + "text")]


def bbox(e):
    """(left, top, right, bottom) of a value box or an operation circle."""
    if e.tag == SVG + "rect":
        x, y, w, h = (float(e.get(k)) for k in ("x", "y", "width", "height"))
        return x, y, x + w, y + h
    cx, cy, r = (float(e.get(k)) for k in ("cx", "cy", "r"))
    return cx - r, cy - r, cx + r, cy + r


def path_points(d, samples=12):
    """Points along a path made of M, L and C commands (absolute), as the drawer writes them."""
    tokens = re.findall(r"[MLC]|-?[\d.]+(?:e[-+]?\d+)?", d)
    points, pen, i = [], None, 0
    while i < len(tokens):
        cmd = tokens[i]
        n = {"M": 2, "L": 2, "C": 6}[cmd]
        xy = [float(t) for t in tokens[i + 1 : i + 1 + n]]
        i += 1 + n
        if cmd == "C":
            (x1, y1, x2, y2, x3, y3), (x0, y0) = xy, pen
            for t in np.linspace(0, 1, samples):
                s = 1 - t
                points.append((s**3 * x0 + 3 * s * s * t * x1 + 3 * s * t * t * x2 + t**3 * x3,
                               s**3 * y0 + 3 * s * s * t * y1 + 3 * s * t * t * y2 + t**3 * y3))
        elif cmd == "L":
            points += [(pen[0] + t * (xy[0] - pen[0]), pen[1] + t * (xy[1] - pen[1])) for t in np.linspace(0, 1, samples)]
        pen = (xy[-2], xy[-1])
        points.append(pen)
    return points


def assert_tidy(drawing):
    """No two boxes or circles overlap, and no edge runs through a box or a circle."""
    root = parse(drawing)
    boxes = [bbox(e) for e in shapes(root, "rect", "value") + shapes(root, "circle", "op")]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    circles = [(float(e.get("cx")), float(e.get("cy")), float(e.get("r"))) for e in shapes(root, "circle", "op")]
    rects = [bbox(e) for e in shapes(root, "rect", "value")]
    for path in root.iter(SVG + "path"):
        if path.get("marker-end") is None:
            continue  # the arrowhead itself
        for x, y in path_points(path.get("d")):
            assert not any(left + 1 < x < r - 1 and t + 1 < y < b - 1 for left, t, r, b in rects), (x, y)
            assert not any(math.hypot(x - cx, y - cy) < r - 1 for cx, cy, r in circles), (x, y)


def test_the_tiny_graph_is_well_formed_svg_with_one_shape_per_node():
    *_, L = tiny()
    drawing = draw_graph(L)
    root = parse(drawing)
    assert root.tag == SVG + "svg"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert "sans-serif" in root.get("font-family")
    assert {e.tag.removeprefix(SVG) for e in root.iter()} <= {
        "svg", "title", "defs", "marker", "path", "rect", "circle", "text", "g"}
    assert len(shapes(root, "rect", "value")) == 4
    assert len(shapes(root, "circle", "op")) == 2
    assert {"*", "**2"} <= set(texts(root))
    assert {"data 36", "grad 1", "data 6", "grad 12", "grad 36", "grad 24"} <= set(texts(root))
    assert drawing._repr_svg_() == drawing.svg


def test_the_layout_reads_left_to_right_like_the_forward_pass():
    *_, L = tiny()
    root = parse(draw_graph(L))
    left = {}
    for group in root.iter(SVG + "g"):
        rect = group.find(SVG + "rect")
        if rect is not None:
            left[group.findall(SVG + "text")[0].text] = float(rect.get("x"))
    assert left["w"] == left["x"] < left["y"] < left["L"]


def test_the_same_graph_draws_to_the_same_bytes():
    *_, L = tiny()
    assert draw_graph(L).svg == draw_graph(L).svg
    assert draw_graph(tiny()[-1]).svg == draw_graph(tiny()[-1]).svg == draw_graph(L).svg
    assert draw_graph(mlp()).svg == draw_graph(mlp()).svg


def test_the_repr_is_a_summary_without_an_address():
    *_, L = tiny()
    assert repr(draw_graph(L)) == "<computation graph: 4 values, 2 operations>"
    assert repr(draw_graph(Value(1.0))) == "<computation graph: 1 value, 0 operations>"
    assert "0x" not in repr(draw_graph(mlp())) and "0x" not in draw_graph(mlp()).svg


def test_a_value_used_twice_gets_two_distinct_edges():
    x = Value(3.0, label="x")
    y = x * x
    root = parse(draw_graph(y))
    (circle,) = shapes(root, "circle", "op")
    cx, cy, r = (float(circle.get(k)) for k in ("cx", "cy", "r"))
    into_op = [p.get("d") for p in root.iter(SVG + "path") if p.get("marker-end")
               and math.isclose(math.dist(path_points(p.get("d"))[-1], (cx, cy)), r, abs_tol=0.2)]
    assert len(into_op) == 2 and into_op[0] != into_op[1]


def test_big_graphs_have_no_overlaps_and_no_edge_crosses_a_box():
    assert repr(draw_graph(chain(30))) == "<computation graph: 30 values, 29 operations>"
    for graph in (tiny()[-1], chain(30), chain(30, constants=True), mlp()):
        assert_tidy(draw_graph(graph))


def test_leaves_far_from_the_start_still_route_around_boxes():
    a, b = Value(1.0, label="a"), Value(2.0, label="b")
    out = a
    for _ in range(6):
        out = (out * b).tanh()
    out = out + a  # a is used at the start and again at the very end
    assert_tidy(draw_graph(out))


def test_highlights_colour_their_boxes():
    w, x, y, L = tiny()
    root = parse(draw_graph(L, highlight={id(y): "orange", id(w): "#2ca02c"}))
    fills = [e.get("fill") for e in shapes(root, "rect", "value")]
    assert fills.count("orange") == 1 and fills.count("#2ca02c") == 1
    assert [e.get("stroke") for e in shapes(root, "rect", "value")].count("orange") == 1


def test_grads_snapshots_and_edge_notes_are_shown():
    w, x, y, L = tiny()
    notes = {(id(w), id(y), 0): "+= 36", (id(y), id(L), 0): "+= 12"}
    root = parse(draw_graph(L, grads={id(w): 99.0}, edge_notes=notes, title="step 2"))
    shown = texts(root)
    assert "grad 99" in shown and "grad 36" not in shown
    assert {"+= 36", "+= 12", "step 2"} <= set(shown)
    assert not any(t.startswith("grad") for t in texts(parse(draw_graph(L, show_grad=False))))


def test_text_is_escaped():
    a = Value(1.0, label='<a & "b">')
    b = a + 1.0
    root = parse(draw_graph(b, title="x < y"))
    assert '<a & "b">' in texts(root)
    assert root.find(SVG + "title").text == "x < y"


class _ArrayNode:
    """Just enough of a node to stand in for the NumPy Tensor to come."""

    def __init__(self, data, parents=(), op="", label=""):
        self.data, self.grad, self._parents, self._op, self.label = data, None, parents, op, label


def test_arrays_are_described_by_their_shape():
    assert _describe(np.zeros((3, 4))) == "shape (3, 4)"
    assert _describe(np.float64(2.5)) == "2.5" and _describe(np.array(7.0)) == "7"
    assert _describe(1 / 3) == "0.3333" and _describe(None) == "None"
    a = _ArrayNode(np.ones((3, 4)), label="A")
    s = _ArrayNode(np.ones(()), (a,), "sum")
    shown = texts(parse(draw_graph(s)))
    assert {"data shape (3, 4)", "grad None", "data 1", "sum"} <= set(shown)


@pytest.mark.parametrize("n", [1, 2])
def test_single_values_and_tiny_graphs_draw(n):
    root = parse(draw_graph(chain(n, constants=True)))
    assert len(shapes(root, "rect", "value")) == (1 if n == 1 else 3)


def test_the_html_form_gives_the_drawing_its_description_as_alt_text():
    """JupyterLab and the website show the HTML form: the same SVG in an <img> whose alt says the graph in words."""
    import base64
    import html
    import re

    *_, L = tiny()
    drawing = draw_graph(L)
    page = drawing._repr_html_()
    alt = html.unescape(re.search(r'\balt="([^"]*)"', page).group(1))
    assert alt == drawing.description
    assert "L = **2(y) = 36 (grad 1)" in alt and "y = *(w, x) = 6 (grad 12)" in alt, alt
    assert "w = 2 (grad 36)" in alt and "x = 3 (grad 24)" in alt, alt
    src = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(src).decode() == drawing.svg
