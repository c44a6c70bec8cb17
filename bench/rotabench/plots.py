# plots.py - SVG plots without dependencies: busy fraction over time, latency CDFs.
import math
import os

from rotabench.metrics import pct


# ---- SVG --------------------------------------------------------------------------------------------------
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
SERIES_COLOR = {"solo": "#000000", "exclusive": "#1f77b4", "shared": "#d62728", "rota": "#2ca02c",
                "rota-fair": "#ff7f0e", "rota-quantum": "#9467bd"}  # the same policy has the same colour in every plot


def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=mag * 10)
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi + step * 1e-9:
        out.append(round(t, 10))
        t += step
    return out


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_panels(path, panels, width=820, ph=300):
    """panels: dicts with title, xlabel, ylabel, series [(label, [(x, y)])], xlog (bool), ylim (lo, hi)."""
    ml, mr, mt, mb = 64, 230, 34, 46
    H = ph * len(panels)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (width, H), '<rect width="100%" height="100%" fill="white"/>']
    for pi, p in enumerate(panels):
        oy = pi * ph
        x0, x1, y0, y1 = ml, width - mr, oy + mt, oy + ph - mb
        pts = [pt for _, s in p["series"] for pt in s]
        xlog = p.get("xlog", False)
        tx = (lambda v: math.log10(max(v, 1e-12))) if xlog else (lambda v: v)
        if pts:
            xs = [tx(x) for x, _ in pts]
            xa, xb = min(xs), max(xs)
        else:
            xa, xb = 0, 1
        if xlog:
            xa, xb = math.floor(xa), math.ceil(xb)
        if xb <= xa:
            xb = xa + 1
        ya, yb = p.get("ylim", (0, 1))

        def X(v):
            return x0 + (tx(v) - xa) / (xb - xa) * (x1 - x0)

        def Y(v):
            return y1 - (v - ya) / (yb - ya) * (y1 - y0)
        out.append('<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>' % (x0, oy + 20, esc(p["title"])))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>' % (
            x0, y0, x1 - x0, y1 - y0))
        for t in nice_ticks(ya, yb):
            out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, x1, Y(t), Y(t)))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (x0 - 6, Y(t) + 4, t))
        xt = [10 ** e for e in range(int(xa), int(xb) + 1)] if xlog else nice_ticks(xa, xb)
        for t in xt:
            out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>' % (X(t), X(t), y0, y1))
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (X(t), y1 + 16, t))
        out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((x0 + x1) // 2, y1 + 34, esc(p["xlabel"])))
        out.append('<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">%s</text>' % (
            16, (y0 + y1) // 2, esc(p["ylabel"])))
        for si, (label, s) in enumerate(p["series"]):
            c = SERIES_COLOR.get(label.split(" ")[0], COLORS[si % len(COLORS)])
            if s:
                d = " ".join("%.1f,%.1f" % (X(x), Y(min(max(y, ya), yb))) for x, y in s)
                out.append('<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>' % (c, d))
            ly = y0 + 14 + 18 * si
            out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>' % (
                x1 + 12, x1 + 32, ly - 4, ly - 4, c))
            out.append('<text x="%d" y="%d">%s</text>' % (x1 + 38, ly, esc(label)))
        if not p["series"]:
            out.append('<text x="%d" y="%d" fill="#888">no data</text>' % (x0 + 10, (y0 + y1) // 2))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def busy_series(m, gpus, window=0.5, step=0.1):
    s = m["samples"]
    if len(s) < 2:
        return []
    tot = [(t, sum(b)) for t, b in s]

    def at(t):
        if t <= tot[0][0]:
            return tot[0][1]
        for i in range(1, len(tot)):
            if t <= tot[i][0]:
                (a, va), (b, vb) = tot[i - 1], tot[i]
                return va + (vb - va) * (t - a) / max(1e-9, b - a)
        return tot[-1][1]
    out, t, end = [], tot[0][0] + window, tot[-1][0]
    w = min(window, max(step, end - tot[0][0]))
    t = tot[0][0] + w
    while t <= end + 1e-9:
        out.append((round(t, 3), (at(t) - at(t - w)) / (w * 1e9 * gpus)))
        t += step
    return out


def write_plots(ctx, results):
    busy, lat = [], []
    for res in results:
        mix = res["mix"]
        avail = [m for m in res["rows"] if m["available"]]
        span = max([m["makespan_s"] for m in avail] + [1.0])
        w = min(0.5, max(0.1, round(span / 20, 1)))
        series = [(m["policy"], busy_series(m, mix["gpus"], window=w, step=w / 5)) for m in avail]
        busy.append({"title": "mix %s: device busy fraction (%g s window, all GPUs)" % (mix["name"], w),
                     "xlabel": "time since first arrival (s)", "ylabel": "busy fraction", "series": series,
                     "ylim": (0, 1.05)})
        if mix["hp"]:
            ls = []
            base = res["solo"][mix["hp"]]["rec"]["latency_ns"]
            for label, v in [("solo", base)] + [(m["policy"], res["runs"][m["policy"]].records[mix["hp"]]
                                                 ["latency_ns"] if res["runs"][m["policy"]].records.get(mix["hp"])
                                                 else []) for m in res["rows"] if m["available"]]:
                v = sorted(v)
                ls.append(("%s (p99 %.2f ms)" % (label, pct(v, 99) / 1e6) if v else label + " (none)",
                           [(x / 1e6, (i + 1) / len(v)) for i, x in enumerate(v)]))
            lat.append({"title": "mix %s: %s request latency CDF" % (mix["name"], mix["hp"]),
                        "xlabel": "latency (ms, log scale)", "ylabel": "fraction of requests", "series": ls,
                        "xlog": True, "ylim": (0, 1.0)})
    svg_panels(os.path.join(ctx.out, "busy.svg"), busy)
    if not lat:
        lat = [{"title": "no high-priority job in these mixes", "xlabel": "latency (ms)", "ylabel": "fraction",
                "series": []}]
    svg_panels(os.path.join(ctx.out, "latency-cdf.svg"), lat)
