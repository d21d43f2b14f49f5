"""The local server of `saliency explore`: a JSON and binary API over one model and one image.

The standard library's threading HTTP server: the API is a handful of small requests at a time from
one user's tabs, which threads serve well, and it adds no dependency. Each request is answered
from a `Live` session (the forward pass kept): a gradient map costs one backward pass through the
kept graph, a pixel seed's the cropped one.

Security, as Jupyter's server does it: it listens on 127.0.0.1 unless told otherwise; every
request must carry the random token (`?token=`, an `Authorization: token ...` header, or the
cookie the first request sets); the Host header must name this server (a page of another site
that rebinds its DNS name to 127.0.0.1 sends its own name); and no part of a request reaches the
file system: the image is the one given when the server started.

    GET /                              the page (static/index.html; sets the token's cookie)
    GET /static/NAME                   the page's script and style (files of the package only)
    GET /api/info                      the model's task, input and output shapes, top classes
    GET /api/image.png                 the input image
    GET /api/output.png                a dense output's picture (its class for several channels)
    POST /api/image                    show another image (the bytes of an image file, at most 32 MB;
                                       its pixels bounded as any input's), read as the model takes it
    GET /api/work?seed=...             the backward pass of a seed, node by node (small models)
    GET /api/map?seed=pixel:R,C&method=gradient&format=npy|png&sign=abs&reduce=sum&stream=ID
                                       a map: NPY (the raw map, float32) or PNG (its heatmap); a
                                       method's options as further parameters (steps=32, ...)

An error is HTTP 400 with {"error": "one line"}; a request superseded by a newer one of the same
`stream` (a tab's clicks) while it waited is HTTP 409 with {"superseded": true}.
"""
import hmac
import http.server
import importlib.resources
import io
import json
import secrets
import threading
import urllib.parse

import numpy as np
from PIL import Image

from ..attribution import InputError, Live, ModelError, RuleError, SeedError, registry
from ..attribution import seeds as seeds_module
from ..attribution.receptive import mass_radius
from ..viz.errors import VizError
from ..viz.files import load_image
from ..viz.heatmap import colorize, heatmap, to_rgb
from ..viz.style import SIGNS

COOKIE = "saliency_token"
MAX_UPLOAD = 32 << 20  # bytes of an image dropped on the page (its pixels are bounded as any input's)
# The files the page is made of: the only files a request can read (its path picks one by name)
STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}


class RequestError(ValueError):
    """A request the server cannot answer: the one line it sends back."""


class Explorer:
    """What the server serves: `model` on the image `x` (C, H, W). `read(file) -> (x, note)` reads an
    uploaded image (a binary file object) as the model takes it; by default at x's size and channels."""

    def __init__(self, model, x, read=None):
        self.model = model
        self.x = np.asarray(x)
        self.read = read or (lambda f: load_image(f, size=self.x.shape[1:], channels=self.x.shape[0]))
        self.live = Live(model, self.x)
        self._class_maps = None  # {class: gradient map} of the top classes, from one batched pass
        self._class_lock = threading.Lock()

    def replace(self, data):
        """Show the image in `data` (the bytes of an image file, at most MAX_UPLOAD) from now on; its note."""
        if len(data) > MAX_UPLOAD:
            raise RequestError(f"the image is {len(data):,} bytes; at most {MAX_UPLOAD:,} are taken")
        try:
            x, note = self.read(io.BytesIO(data))
            live = Live(self.model, x)
        except (VizError, InputError, ModelError) as exc:
            raise RequestError(" ".join(str(exc).split())) from None
        with self._class_lock:
            self.x, self.live, self._class_maps = np.asarray(x), live, None
        return note

    def top_classes(self, count=10):
        """The `count` classes of highest score (a classifier's output), best first."""
        return [int(k) for k in np.argsort(-self.live.output[0])[:count]]

    def class_map(self, k):
        """The gradient map of class k's score, for the top classes from one batched backward pass made
        the first time one is asked for (None for another class)."""
        with self._class_lock:
            if self._class_maps is None:
                top = self.top_classes()
                both = self.live.gradient(seeds_module.classes(top))
                self._class_maps = {c: both.map[i] for i, c in enumerate(top)}
            return self._class_maps.get(k)

    def info(self):
        y = self.live.output[0]
        out = {"task": getattr(self.model, "task", None) or ("classification" if y.ndim == 1 else "dense"),
               "input_shape": list(self.x.shape), "output_shape": list(y.shape), "methods": list(registry.METHODS)}
        names = list(getattr(self.model, "classes", None) or [])
        if y.ndim == 1:
            p = np.exp(y - y.max())
            p /= p.sum()
            out["top"] = [{"class": k, "name": names[k] if k < len(names) else str(k), "p": float(p[k])}
                          for k in self.top_classes()]
        return out

    def image_png(self):
        return _png(to_rgb(self.x))

    def output_png(self):
        """A dense output's picture: its one channel's values, or each pixel's top channel, coloured."""
        y = np.asarray(self.live.output[0], np.float64)
        if y.ndim != 3:
            raise RequestError("the model's output is not a map (it has no pixels to show)")
        values = y[0] if len(y) == 1 else y.argmax(axis=0) / max(1, len(y) - 1)
        lo, hi = np.nanmin(values), np.nanmax(values)
        return _png(colorize((values - lo) / (hi - lo) if hi > lo else np.zeros_like(values), cmap="viridis"))

    def work(self, spec):
        """{"graph", "steps"}: the backward pass of the seed `spec` (its command-line form), node by node."""
        try:
            graph, steps = self.live.work(seeds_module.parse(spec) if spec else None)
        except (SeedError, ValueError) as exc:
            raise RequestError(" ".join(str(exc).split())) from None
        return {"graph": graph, "steps": steps}

    def map_of(self, query, stream=None, number=None):
        """The Attribution a /api/map query ({parameter: text}, without format, sign and reduce) asks
        for, or None when `number`, a ticket of `stream`, has been superseded. The gradient without
        options comes from the kept graph; any other method runs on the image."""
        query = dict(query)
        spec = query.pop("seed", None)
        name = query.pop("method", "gradient")
        try:
            seed = seeds_module.parse(spec) if spec else None
            method = registry.get(name)
            options = {method.option(k).name: method.option(k).parse(v) for k, v in query.items()}
            if method.name == "gradient" and not options:
                k = _class_of(spec) if self.live.output.ndim == 2 else None
                known = self.class_map(k) if k is not None else None
                if known is not None:
                    return _Shown(known, 0.0)
                return self.live.gradient(seed, stream=stream, number=number)
            if stream is not None and not self.live.latest(stream, number):
                return None
            return method(self.model, self.x, seed, **options)
        except (InputError, SeedError, RuleError, ModelError, registry.OptionError, ValueError, TypeError) as exc:
            raise RequestError(" ".join(str(exc).split())) from None


class _Shown:
    """A map already computed (the batched class maps): what the handler reads of an Attribution."""

    def __init__(self, amap, seconds):
        self.map, self.seconds = amap, seconds


def _class_of(spec):
    """K of a seed spec "class:K", else None."""
    if spec and spec.startswith("class:") and spec[len("class:"):].isdigit():
        return int(spec[len("class:"):])
    return None


def _radii(amap, spec, output_shape):
    """(centre (row, col), radius50, radius90) in input pixels of a pixel seed's map, for drawing."""
    row, col = (int(v) for v in spec[len("pixel:"):].split("@")[0].split(","))
    h_out, w_out = output_shape[-2:]
    h_in, w_in = amap.shape[-2:]
    centre = ((row + 0.5) * h_in / h_out - 0.5, (col + 0.5) * w_in / w_out - 0.5)
    mass = np.abs(np.asarray(amap, np.float64)).reshape((-1,) + amap.shape[-2:]).sum(axis=0)[None]
    r50, r90 = (float(mass_radius(mass, centre, f)[0]) for f in (0.5, 0.9))
    return centre, (r50 if np.isfinite(r50) else None), (r90 if np.isfinite(r90) else None)


def _static(name):
    """The bytes of one of the page's files (a name of STATIC), from the package."""
    return (importlib.resources.files(__package__) / "static" / name).read_bytes()


def _png(rgb):
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="PNG", compress_level=1)  # speed over size
    return buf.getvalue()


def _npy(a):
    buf = io.BytesIO()
    np.save(buf, np.asarray(a, np.float32), allow_pickle=False)
    return buf.getvalue()


class Server(http.server.ThreadingHTTPServer):
    """The explore server on (host, port) (port 0: a free one), for `explorer`, with `token`."""

    daemon_threads = True

    def __init__(self, explorer, host="127.0.0.1", port=0, token=None):
        super().__init__((host, port), _Handler)
        self.explorer = explorer
        self.token = token or secrets.token_urlsafe(24)
        port = self.server_address[1]
        names = {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host}]"}
        self.hosts = {f"{n}:{port}" for n in names}
        self.thread = None

    @property
    def url(self):
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}/?token={self.token}"

    def start(self):
        """Serve in a daemon thread; returns self."""
        self.thread = threading.Thread(target=self.serve_forever, name="saliency-explore", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "saliency-explore"

    def log_message(self, *args):  # no line per request on the terminal
        pass

    def _send(self, status, body, kind, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status, value):
        self._send(status, json.dumps(value).encode(), "application/json")

    def _allowed(self, query):
        server = self.server
        if self.headers.get("Host", "") not in server.hosts:
            self._json(403, {"error": "this server answers only requests addressed to it (Host header refused)"})
            return False
        given = query.get("token") or ""
        auth = self.headers.get("Authorization", "")
        if auth.startswith("token "):
            given = given or auth[len("token "):]
        for part in self.headers.get("Cookie", "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == COOKIE:
                given = given or value
        if not hmac.compare_digest(given.encode(), server.token.encode()):
            self._json(403, {"error": "a valid token is required (the URL the server printed has it)"})
            return False
        return True

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if not self._allowed(query):
            return
        if url.path != "/api/image":
            return self._json(404, {"error": f"no such page: {url.path}"})
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._json(411, {"error": "an upload needs its Content-Length"})
        if length > MAX_UPLOAD or length < 0:
            self.close_connection = True
            if 0 < length <= 2 * MAX_UPLOAD:  # read and drop it, so that the sender sees the answer
                for done in range(0, length, 1 << 20):
                    self.rfile.read(min(1 << 20, length - done))
            return self._json(413, {"error": f"the image is {length:,} bytes; at most {MAX_UPLOAD:,} are taken"})
        try:
            note = self.server.explorer.replace(self.rfile.read(length))
        except RequestError as exc:
            return self._json(400, {"error": str(exc)})
        return self._json(200, {"note": note, **self.server.explorer.info()})

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if not self._allowed(query):
            return
        query.pop("token", None)
        explorer = self.server.explorer
        try:
            if url.path in ("/", "/index.html"):
                cookie = f"{COOKIE}={self.server.token}; HttpOnly; SameSite=Strict; Path=/"
                return self._send(200, _static("index.html"), STATIC["index.html"], (("Set-Cookie", cookie),))
            if url.path.startswith("/static/") and url.path[len("/static/"):] in STATIC:
                name = url.path[len("/static/"):]
                return self._send(200, _static(name), STATIC[name])
            if url.path == "/api/info":
                return self._json(200, explorer.info())
            if url.path == "/api/image.png":
                return self._send(200, explorer.image_png(), "image/png")
            if url.path == "/api/output.png":
                return self._send(200, explorer.output_png(), "image/png")
            if url.path == "/api/map":
                return self._map(explorer, query)
            if url.path == "/api/work":
                return self._json(200, explorer.work(query.get("seed")))
            return self._json(404, {"error": f"no such page: {url.path}"})
        except RequestError as exc:
            return self._json(400, {"error": str(exc)})

    def _map(self, explorer, query):
        fmt = query.pop("format", "npy")
        sign, reduce = query.pop("sign", "abs"), query.pop("reduce", "sum")
        stream = query.pop("stream", None)
        if fmt not in ("npy", "png"):
            raise RequestError(f"format must be npy or png, got {fmt!r}")
        if sign not in SIGNS or reduce not in ("sum", "max_abs"):
            raise RequestError(f"sign must be one of {', '.join(SIGNS)} and reduce sum or max_abs")
        number = explorer.live.ticket(stream) if stream else None
        attr = explorer.map_of(query, stream, number)
        if attr is None:
            return self._json(409, {"superseded": True})
        extra = [("X-Map-Milliseconds", f"{attr.seconds * 1e3:.3f}")]
        spec = query.get("seed") or ""
        if spec.startswith("pixel:") and np.ndim(attr.map) == 3:
            (cy, cx), r50, r90 = _radii(attr.map, spec, explorer.live.output.shape)
            extra.append(("X-Receptive-Field", json.dumps({"centre": [cy, cx], "radius50": r50, "radius90": r90})))
        if fmt == "npy":
            return self._send(200, _npy(attr.map), "application/octet-stream", extra)
        picture = np.asarray(attr.map)
        if picture.ndim == 4:
            picture = picture[0]
        return self._send(200, _png(heatmap(picture, sign=sign, reduce=reduce)), "image/png", extra)
