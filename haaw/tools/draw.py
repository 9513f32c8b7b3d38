"""Draw a computation graph as an SVG string, with no system binary.

Drawers that call Graphviz's ``dot`` break wherever the binary is missing (Binder, a fresh
laptop), so this one lays the graph out itself, in the classic layered (Sugiyama) way, read
left to right like the forward pass:

1. ranks: an operation one right of its rightmost input, its result one further; a leaf just
   left of the first operation that uses it, so that a weight or a constant sits beside its use;
2. an edge that skips ranks passes one invisible *dummy* slot per rank, so it runs between
   boxes, never across one;
3. barycenter sweeps order each rank (a slot moves to the mean position of its neighbours),
   keeping the order with the fewest crossings;
4. heights: each slot is pulled towards its neighbours, as close as the spacing allows (an
   exact isotonic regression); leaves give way, so the main line of computation runs straight.

A value is a rounded box (label, data, grad), an operation a small circle between its inputs
and its result; an input used twice (``x * x``) gets two edges, bent apart. The output depends
only on the graph, never on ids, addresses or set order: the same graph gives the same bytes.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from itertools import accumulate

from ..engine.autograd import topological_order
from ..engine.graph import operation, parents

FONT, LINE, PAD = 12, 15, 6  # font size, line height and padding inside a value box (px)
CHAR = 0.62  # mean width of a sans-serif character in em: there are no font metrics here
GAP_X, GAP_Y, MARGIN, DUMMY_H = 36, 14, 14, 4
INK, EDGE, NOTE = "#333", "#777", "#b03a2e"
ARROW = f'fill="none" stroke="{EDGE}" stroke-width="1.2" marker-end="url(#haaw-arrow)"'


@dataclass(repr=False)
class GraphSVG:
    """An SVG drawing that Jupyter (and code hosts) show inline; ``.svg`` is the markup, ``.description`` the
    graph in words, which the HTML form gives the picture as its alt text (JupyterLab draws a bare SVG output as
    an <img> with none, so it and the website show the HTML form)."""

    svg: str
    n_values: int
    n_ops: int
    description: str = ""

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        from base64 import b64encode

        data = b64encode(self.svg.encode()).decode("ascii")
        return (f'<img class="haaw-figure" src="data:image/svg+xml;base64,{data}" '
                f'alt="{html.escape(self.description or repr(self), quote=True)}">')

    def __repr__(self) -> str:
        values, ops = self.n_values, self.n_ops
        return f"<computation graph: {values} value{'s' * (values != 1)}, {ops} operation{'s' * (ops != 1)}>"


def _describe(value) -> str:
    """A number as ``:.4g``; an array by its shape, since its entries would not fit in a box."""
    if value is None:
        return "None"
    shape = getattr(value, "shape", ())
    return f"shape {tuple(shape)}" if len(shape) > 0 else f"{float(value):.4g}"


def describe_graph(order, grads=None, show_grad=True, title=None) -> str:
    """The graph in words, in the order it was computed: "a computation graph, left to right: x = 1.5 (grad 0);
    a = w * x = -1.2 (grad 1); ...", each value with its data (and grad) as its box shows them."""
    def name(node):
        return str(node.label) if node.label else "an unnamed value"

    parts = []
    for node in order:
        text = name(node)
        if parents(node):
            text += f" = {operation(node)}({', '.join(name(p) for p in parents(node))})"
        text += f" = {_describe(node.data)}"
        if show_grad:
            text += f" (grad {_describe((grads or {}).get(id(node), node.grad))})"
        parts.append(text)
    head = f"{title}: " if title else ""
    return f"{head}a computation graph, left to right, {len(order)} values: " + "; ".join(parts) + "."


def _width(text: str, size: float = FONT) -> float:
    return len(text) * size * CHAR


def _n(x: float) -> str:
    return f"{round(x, 1) + 0.0:g}"  # + 0.0 turns -0.0 into 0.0


class _Slot:
    """One place in the layout: a value box, an operation circle, or a dummy an edge passes."""

    def __init__(self, kind, rank, node=None, w=0.0, h=DUMMY_H):
        self.kind, self.rank, self.node, self.w, self.h = kind, rank, node, w, h
        self.preds, self.succs, self.pos, self.x, self.y, self.lines = [], [], 0, 0.0, 0.0, []
        self.weight = 0.05 if kind == "value" and not parents(node) else 1.0  # leaves give way


def _build(order, grads, show_grad):
    """Slots for every value, operation and dummy, and each input edge's chain of slots."""
    rank = {}  # a value's rank; its operation sits one rank to its left
    for node in order:
        rank[id(node)] = 2 + max((rank[id(p)] for p in parents(node)), default=-2)
    first_use = {}
    for node in order:
        for p in parents(node):
            if not parents(p):
                first_use[id(p)] = min(first_use.get(id(p), rank[id(node)]), rank[id(node)])
    rank.update({key: r - 2 for key, r in first_use.items()})
    slots, boxes, ops, edges = [], {}, {}, []

    def new(kind, r, node=None, w=0.0, h=DUMMY_H):
        slots.append(_Slot(kind, r, node, w, h))
        return slots[-1]

    def link(chain):
        for a, b in zip(chain, chain[1:]):
            a.succs.append(b)
            b.preds.append(a)

    for node in order:
        lines = [str(node.label)] if node.label else []
        lines.append(f"data {_describe(node.data)}")
        if show_grad:
            lines.append(f"grad {_describe((grads or {}).get(id(node), node.grad))}")
        box = new("value", rank[id(node)], node, max(map(_width, lines)) + 2 * PAD, len(lines) * LINE + 2 * PAD)
        boxes[id(node)], box.lines = box, lines
        if parents(node):
            r = max(FONT + 1, _width(operation(node), FONT - 1) / 2 + 5)
            op = ops[id(node)] = new("op", box.rank - 1, node, 2 * r, 2 * r)
            link([op, box])
            for k, parent in enumerate(parents(node)):
                start = boxes[id(parent)]
                chain = [start] + [new("dummy", q) for q in range(start.rank + 1, op.rank)] + [op]
                link(chain)
                edges.append((parent, node, k, chain))
    ranks = [[] for _ in range(max(s.rank for s in slots) + 1)]
    for s in slots:
        s.pos = len(ranks[s.rank])
        ranks[s.rank].append(s)
    return ranks, boxes, ops, edges


def _crossings(ranks) -> int:
    total = 0
    for layer in ranks:
        segs = [(a.pos, b.pos) for a in layer for b in a.succs]
        total += sum((a - c) * (b - d) < 0 for i, (a, b) in enumerate(segs) for c, d in segs[i + 1 :])
    return total


def _order(ranks, sweeps=8) -> None:
    """Barycenter sweeps, alternately rightwards and leftwards; keep the order with fewest crossings."""
    best, fewest = [list(layer) for layer in ranks], _crossings(ranks)
    for sweep in range(sweeps):
        rightwards = sweep % 2 == 0
        for layer in ranks[1:] if rightwards else ranks[-2::-1]:
            keys = {}
            for s in layer:
                near = s.preds if rightwards else s.succs
                keys[id(s)] = (sum(n.pos for n in near) / len(near) if near else s.pos, s.pos)
            layer.sort(key=lambda s: keys[id(s)])
            for i, s in enumerate(layer):
                s.pos = i
        crossings = _crossings(ranks)
        if crossings < fewest:
            best, fewest = [list(layer) for layer in ranks], crossings
    for layer, kept in zip(ranks, best):
        layer[:] = kept
        for i, s in enumerate(layer):
            s.pos = i


def _settle(layer, wanted) -> None:
    """Centres as close as possible to ``wanted``, in order and never closer than the spacing.

    Take from each centre its least possible distance below the first, and the spacing
    rule becomes "stay in order": an isotonic regression, solved exactly by pooling adjacent
    violators (weighted, so that light slots move most).
    """
    offsets = list(accumulate([0.0] + [(a.h + b.h) / 2 + GAP_Y for a, b in zip(layer, layer[1:])]))
    blocks = []  # [mean, weight, count] of each pooled run
    for s, want, off in zip(layer, wanted, offsets):
        blocks.append([want - off, s.weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, w1, n1), (m2, w2, n2) = blocks[-2], blocks.pop()
            blocks[-1] = [(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2]
    fitted = [mean for mean, _, count in blocks for _ in range(count)]
    for s, z, off in zip(layer, fitted, offsets):
        s.y = z + off


def _place(ranks, gap_x) -> None:
    """Columns left to right; then heights, pulled towards neighbours in alternate sweeps."""
    x = MARGIN
    for layer in ranks:
        width = max(10.0, max(s.w for s in layer))
        for s in layer:
            s.x = x + width / 2
            if s.kind != "op":  # boxes share their column's width, dummies run across it
                s.w = width
        x += width + gap_x
        _settle(layer, [0.0] * len(layer))
    for sweep in range(12):
        rightwards = sweep % 2 == 0
        for layer in ranks if rightwards else ranks[::-1]:
            wanted = []
            for s in layer:
                near = s.preds if rightwards else s.succs
                wanted.append(sum(n.weight * n.y for n in near) / sum(n.weight for n in near) if near else s.y)
            _settle(layer, wanted)
    top = min(s.y - s.h / 2 for layer in ranks for s in layer)
    for layer in ranks:
        for s in layer:
            s.y += MARGIN - top


def _curve(x0, y0, x1, y1, bend=0.0) -> str:
    """A cubic that leaves and arrives horizontally, its middle pushed ``bend`` px down."""
    mid = (x1 - x0) / 2
    return f"C{_n(x0 + mid)},{_n(y0 + bend)} {_n(x1 - mid)},{_n(y1 + bend)} {_n(x1)},{_n(y1)}"


def _edges(edges):
    """The input edges' paths, and where each edge's note goes: near its parent."""
    paths, anchors, by_child = [], {}, {}
    for edge in edges:
        by_child.setdefault(id(edge[1]), []).append(edge)
    for group in by_child.values():
        op, step = group[0][3][-1], min(0.5, 1.2 / max(len(group) - 1, 1))  # radians between ports
        # ports on the circle in the order the edges come from, so that they do not cross
        for i, (parent, child, k, chain) in enumerate(sorted(group, key=lambda e: (e[3][-2].y, e[2]))):
            angle = (i - (len(group) - 1) / 2) * step
            uses = [q for q, p in enumerate(parents(child)) if p is parent]
            bend = (uses.index(k) - (len(uses) - 1) / 2) * 24 if len(chain) == 2 else 0.0
            points = [(chain[0].x + chain[0].w / 2, chain[0].y)]
            for d in chain[1:-1]:
                points += [(d.x - d.w / 2, d.y), (d.x + d.w / 2, d.y)]
            points.append((op.x - op.w / 2 * math.cos(angle), op.y + op.w / 2 * math.sin(angle)))
            d = f"M{_n(points[0][0])},{_n(points[0][1])}"
            for j, ((x0, y0), (x1, y1)) in enumerate(zip(points, points[1:])):
                d += " " + (_curve(x0, y0, x1, y1, bend) if j % 2 == 0 else f"L{_n(x1)},{_n(y1)}")
            paths.append(f'<path d="{d}" {ARROW}/>')
            (x0, y0), (x1, y1) = points[:2]
            anchors[(id(parent), id(child), k)] = ((x0 + x1) / 2, (y0 + y1) / 2 + 0.75 * bend)
    return paths, anchors


def _box(box, colour) -> list:
    paint = f'fill="#f4f7fb" stroke="{INK}"'
    if colour is not None:  # tinted inside, outlined strongly, so that the numbers stay legible
        paint = f'fill="{colour}" fill-opacity="0.3" stroke="{colour}" stroke-width="2.5"'
    top = box.y - box.h / 2
    out = [
        f'<g class="value"><rect class="value" x="{_n(box.x - box.w / 2)}" y="{_n(top)}"'
        f' width="{_n(box.w)}" height="{_n(box.h)}" rx="6" {paint}/>'
    ]
    for i, line in enumerate(box.lines):
        bold = ' font-weight="bold"' if i == 0 and box.node.label else ""
        y = _n(top + PAD + i * LINE + 11.5)
        out.append(f'<text x="{_n(box.x)}" y="{y}" text-anchor="middle"{bold}>{html.escape(line)}</text>')
    return out + ["</g>"]


def draw_graph(root, *, grads=None, highlight=None, edge_notes=None, show_grad=True, title=None) -> GraphSVG:
    """Draw the graph that computed ``root``, left to right, as an inline SVG.

    ``grads`` (id(node) -> grad) is shown instead of ``.grad``, for snapshots taken mid-pass.
    ``highlight`` (id(node) -> css colour) tints and outlines a value's box (not its operation).
    ``edge_notes`` ((id(parent), id(child), k) -> text) writes a short note on the edge from
    ``parent`` into ``child``'s operation, k being the parent's index in ``parents(child)``;
    it sits near the parent, where a gradient contribution arrives ("+= 36").
    """
    order = topological_order(root)
    highlight = {key: html.escape(str(colour)) for key, colour in (highlight or {}).items()}
    notes = {key: str(text) for key, text in (edge_notes or {}).items()}
    ranks, boxes, ops, edges = _build(order, grads, show_grad)
    _order(ranks)
    _place(ranks, max([GAP_X] + [_width(t, FONT - 1) + 16 for t in notes.values()]))
    paths, anchors = _edges(edges)
    out = list(paths)  # edges first, so that boxes and circles cover their ends
    for op in ops.values():
        r, box, x, y = op.w / 2, boxes[id(op.node)], _n(op.x), _n(op.y)
        out += [
            f'<path d="M{_n(op.x + r)},{y} {_curve(op.x + r, op.y, box.x - box.w / 2, box.y)}" {ARROW}/>',
            f'<g class="op"><circle class="op" cx="{x}" cy="{y}" r="{_n(r)}" fill="white" stroke="{INK}"/>',
            f'<text x="{x}" y="{_n(op.y + 4)}" text-anchor="middle" font-size="{FONT - 1}">'
            f"{html.escape(operation(op.node))}</text></g>",
        ]
    for node in order:
        out += _box(boxes[id(node)], highlight.get(id(node)))
    for key, (x, y) in anchors.items():  # notes last, over everything, on a white patch
        if key in notes:
            w, text = _width(notes[key], FONT - 1) + 6, html.escape(notes[key])
            out += [
                f'<rect class="note" x="{_n(x - w / 2)}" y="{_n(y - 7.5)}" width="{_n(w)}" height="15"'
                ' fill="white" fill-opacity="0.85"/>',
                f'<text x="{_n(x)}" y="{_n(y + 4)}" text-anchor="middle" font-size="{FONT - 1}" fill="{NOTE}">{text}</text>',
            ]
    slots = [s for layer in ranks for s in layer]
    head = 28 if title else 0
    w = _n(max([s.x + s.w / 2 + MARGIN for s in slots] + [_width(title or "", FONT + 2) + 2 * MARGIN]))
    h = _n(max(s.y + s.h / 2 for s in slots) + MARGIN + head)
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}"'
        # shrink to fit a narrow output area instead of being cut off
        ' style="max-width:100%;height:auto"'
        f' font-family="sans-serif" font-size="{FONT}" fill="{INK}">',
        f"<title>{html.escape(title or 'computation graph')}</title>",
        # a fixed id: several drawings on one page share one identical arrowhead
        '<defs><marker id="haaw-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7"'
        f' markerUnits="userSpaceOnUse" orient="auto"><path d="M0,1 L10,5 L0,9 z" fill="{EDGE}"/></marker></defs>',
        f'<rect width="{w}" height="{h}" fill="white"/>',
    ]
    if title:
        svg.append(f'<text x="{MARGIN}" y="{MARGIN + 12}" font-size="{FONT + 2}" font-weight="bold">'
                   f"{html.escape(title)}</text>")
    svg += [f'<g transform="translate(0,{head})">', *out, "</g>", "</svg>"]
    return GraphSVG("\n".join(svg) + "\n", len(boxes), len(ops), describe_graph(order, grads, show_grad, title))
