"""The local server of `saliency explore`: a JSON and binary API over one model and one image, and
a store of maps made by `saliency batch`.

The standard library's threading HTTP server: the API is a handful of small requests at a time from
one user's tabs, which threads serve well, and it adds no dependency. Each request is answered
from a `Live` session (the forward pass kept): a gradient map costs one backward pass through the
kept graph, a pixel seed's the cropped one.

Security, as Jupyter's server does it: it listens on 127.0.0.1 unless told otherwise; every
request must carry the random token (`?token=`, an `Authorization: token ...` header, or the
cookie the first request sets); the Host header must name this server (a page of another site
that rebinds its DNS name to 127.0.0.1 sends its own name); and no part of a request reaches the
file system: the images are the one given when the server started and those its store lists,
named by their number in it.

    GET /                              the page (static/index.html; sets the token's cookie)
    GET /static/NAME                   the page's script and style (files of the package only)
    GET /api/info                      the image shown: the model's task, input and output shapes,
                                       top classes (and every class's name); the store's summary
    GET /api/image.png                 the input image
    GET /api/output.png                a dense output's picture (its class for several channels)
    POST /api/image                    show another image (the bytes of an image file, at most 32 MB;
                                       its pixels bounded as any input's), read as the model takes it
    GET /api/work?seed=...             the backward pass of a seed, node by node (small models)
    GET /api/map?seed=pixel:R,C&method=gradient&format=npy|png|rgba&sign=abs&reduce=sum&stream=ID
                                       a map: NPY (the raw map, float32) or PNG (its heatmap; rgba:
                                       the heatmap's raw pixels, its size in X-Map-Size, WxH); a
                                       method's options as further parameters (steps=32, ...)
    GET /api/store                     the store: its summary and a row per image (file, predicted
                                       class, error, deletion and insertion areas)
    GET /api/store/map?index=N&format=npy|png|rgba&sign=&reduce=
                                       the stored map of image N
    GET /api/store/image.png?index=N   image N as the model saw it
    POST /api/open?index=N             show image N of the store live from now on

An error is HTTP 400 with {"error": "one line"}; a request superseded by a newer one of the same
`stream` (a tab's clicks) while it waited is HTTP 409 with {"superseded": true}.
"""
from __future__ import annotations

import hmac
import http.server
import importlib.resources
import io
import json
import secrets
import threading
import urllib.parse
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol, Union, cast

import numpy as np
from PIL import Image

from ..attribution import InputError, Live, ModelError, RuleError, SeedError, registry
from ..attribution import seeds as seeds_module
from ..attribution.receptive import mass_radius
from ..attribution.store_files import StoreError
from ..viz.errors import VizError
from ..viz.files import load_image
from ..viz.heatmap import colorize, heatmap, to_rgb
from ..viz.style import SIGNS

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import Float32
    from ..attribution._core import Model
    from ..attribution.result import Attribution
    from ..autograd.tensor import TensorLike
    from .browse import StoreView

    class _Showing(Protocol):
        """An Explorer while an image is shown live (what `Explorer._shown` returns)."""

        x: NDArray[Any]
        live: Live
        name: str
        index: Optional[int]

    # reads an uploaded image file as the model takes it: (x, note)
    Reader = Callable[[IO[bytes]], tuple[Float32, Optional[str]]]
    # what `Explorer.map_of` answers with: a map the page draws (None: superseded)
    Answer = Union[Attribution, "_Shown"]

COOKIE = "saliency_token"
TOP = 10  # the classes a classifier's page lists, their maps from one batched pass
MAX_UPLOAD = 32 << 20  # bytes of an image dropped on the page (its pixels are bounded as any input's)
# The files the page is made of: the only files a request can read (its path picks one by name)
STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}


class RequestError(ValueError):
    """A request the server cannot answer: the one line it sends back."""


class Explorer:
    """What the server serves: `model` on the image `x` (C, H, W), its graph kept (`Live`).

    `read(file) -> (x, note)` reads an uploaded image (a binary file object) as the model takes it
    (default: at x's size and channels); `picture(x)` is the picture of an input to show (default:
    x itself, as an image in [0, 1]; a normalised input needs its preprocessing's `denormalize`).
    With `store` (a `browse.StoreView`), the page browses the store too and shows any of its
    images live; `x` may then be None (the store's first image with a map is shown). `model` None
    (a store whose model is not named): the store is browsed only, and `why` says why. `name`:
    what the page calls x (its file's name)."""

    def __init__(self, model: Optional[Model], x: Optional[TensorLike] = None, read: Optional[Reader] = None,
                 picture: Optional[Callable[[NDArray[Any]], ArrayLike]] = None, store: Optional[StoreView] = None,
                 why: Optional[str] = None, name: str = "image") -> None:
        self.model, self.store = model, store
        self.why = why or "no model to run: give --model"
        self.read: Reader = read or (lambda f: load_image(f, size=self._shown().x.shape[1:],
                                                          channels=self._shown().x.shape[0]))
        self.picture: Callable[[NDArray[Any]], ArrayLike] = picture or (lambda image: image)
        self.x: Optional[NDArray[Any]] = None
        self.live: Optional[Live] = None
        self.name: Optional[str] = None
        self.index: Optional[int] = None
        # (live, {class: gradient map}) of the top classes, from one batched pass
        self._class_maps: Optional[tuple[Live, dict[int, NDArray[Any]]]] = None
        self._class_lock = threading.Lock()
        self._unopened = "no image is open: pick one of the store's"
        if model is not None and x is not None:
            self._show(np.asarray(x), name)
        elif model is not None and store is not None:
            first = store.first_done()
            try:
                if first is not None:
                    self.open(str(first))
            except RequestError as exc:  # its file moved since the run, say: the table still shows
                self._unopened = f"the store's first image could not be opened ({exc}); pick another"

    def _shown(self) -> _Showing:
        """Self, when an image is shown live; else the RequestError saying why none is."""
        if self.live is None:
            raise RequestError(self.why if self.model is None else self._unopened)
        return cast("_Showing", self)  # x, live and name are set together (`_show`)

    def _show(self, x: NDArray[Any], name: str, index: Optional[int] = None) -> None:
        """Show the input `x` live from now on: `name` says what it is, `index` its place in the store."""
        assert self.model is not None  # the callers checked it
        live = Live(self.model, x)
        with self._class_lock:
            self.x, self.live, self.name, self.index, self._class_maps = x, live, name, index, None

    def replace(self, data: bytes) -> Optional[str]:
        """Show the image in `data` (the bytes of an image file, at most MAX_UPLOAD) from now on; its note."""
        if self.model is None:
            raise RequestError(self.why)
        if len(data) > MAX_UPLOAD:
            raise RequestError(f"the image is {len(data):,} bytes; at most {MAX_UPLOAD:,} are taken")
        try:
            x, note = self.read(io.BytesIO(data))
            self._show(np.asarray(x), "uploaded image")
        except (VizError, InputError, ModelError) as exc:
            raise RequestError(_one_line(exc)) from None
        return note

    def open(self, index: Optional[str]) -> None:
        """Show image `index` of the store (its text, as a request gives it) from now on."""
        store = self._stored()
        if self.model is None:
            raise RequestError(self.why)
        try:
            number = store.index(index)
            self._show(store.input(self.model, number), store.store.files[number], number)
        except (StoreError, InputError, ModelError) as exc:
            raise RequestError(_one_line(exc)) from None

    def top_classes(self) -> list[int]:
        """The TOP classes of highest score (a classifier's output), best first."""
        return [int(k) for k in np.argsort(-self._shown().live.output[0])[:TOP]]

    def class_map(self, k: int, live: Live) -> Optional[NDArray[Any]]:
        """The gradient map of class k's score on `live` (the image shown), for the top classes from
        one batched backward pass made the first time one is asked for (None for another class)."""
        with self._class_lock:
            if self._class_maps is None or self._class_maps[0] is not live:
                top = [int(c) for c in np.argsort(-live.output[0])[:TOP]]
                both = live.gradient(seeds_module.classes(top))
                assert both is not None  # (None only for a superseded request of a stream)
                self._class_maps = (live, {c: both.map[i] for i, c in enumerate(top)})
            return self._class_maps[1].get(k)

    def info(self) -> dict[str, Any]:
        """What the page shows: the store's summary (with one), and the image shown live (without a
        model or before an image is opened: "live" false and "why")."""
        out: dict[str, Any] = {"methods": list(registry.METHODS),
                               "store": self.store.summary() if self.store else None, "model": self.model is not None}
        if self.live is None:
            return {**out, "live": False, "why": self._why_not()}
        live = self.live
        x = np.asarray(live.x)
        y = live.output[0]
        out.update(live=True, image=self.name, index=self.index, input_shape=list(x.shape),
                   output_shape=list(y.shape),
                   task=getattr(self.model, "task", None) or ("classification" if y.ndim == 1 else "dense"))
        names = list(getattr(self.model, "classes", None) or [])
        if y.ndim == 1:
            p = np.exp(y - y.max())
            p /= p.sum()
            out["top"] = [{"class": k, "name": names[k] if k < len(names) else str(k), "p": float(p[k])}
                          for k in self.top_classes()]
            out["classes"] = [names[k] if k < len(names) else str(k) for k in range(len(y))]
        return out

    def _why_not(self) -> Optional[str]:
        try:
            self._shown()
        except RequestError as exc:
            return str(exc)
        return None

    def image_png(self) -> bytes:
        """The image shown, a PNG."""
        return _png(to_rgb(self.picture(self._shown().x)))

    def output_png(self) -> bytes:
        """A dense output's picture: its one channel's values, or each pixel's top channel, coloured."""
        y = np.asarray(self._shown().live.output[0], np.float64)
        if y.ndim != 3:
            raise RequestError("the model's output is not a map (it has no pixels to show)")
        values = y[0] if len(y) == 1 else y.argmax(axis=0) / max(1, len(y) - 1)
        lo, hi = np.nanmin(values), np.nanmax(values)
        return _png(colorize((values - lo) / (hi - lo) if hi > lo else np.zeros_like(values), cmap="viridis"))

    def work(self, spec: Optional[str]) -> dict[str, str]:
        """{"graph", "steps"}: the backward pass of the seed `spec` (its command-line form), node by node."""
        live = self._shown().live
        try:
            graph, steps = live.work(seeds_module.parse(spec) if spec else None)
        except (SeedError, ValueError) as exc:
            raise RequestError(_one_line(exc)) from None
        return {"graph": graph, "steps": steps}

    def map_of(self, query: Mapping[str, str], stream: Optional[str] = None) -> Optional[Answer]:
        """The Attribution a /api/map query ({parameter: text}, without format, sign and reduce) asks
        for, or None when a newer request of `stream` (one tab's clicks) superseded it while it
        waited. The gradient without options comes from the kept graph; any other method runs on
        the image."""
        query = dict(query)
        spec = query.pop("seed", None)
        name = query.pop("method", "gradient")
        live = self._shown().live  # the image shown now, whatever an upload does meanwhile
        number = live.ticket(stream) if stream else None
        try:
            seed = seeds_module.parse(spec) if spec else None
            method = registry.get(name)
            options = {method.option(k).name: method.option(k).parse(v) for k, v in query.items()}
            if method.name == "gradient" and not options:
                k = _class_of(spec) if live.output.ndim == 2 else None
                known = self.class_map(k, live) if k is not None else None
                if known is not None:
                    return _Shown(known, 0.0, live.output)
                return live.gradient(seed, stream=stream, number=number)
            # number is None for the stream "", which has no ticket: latest compares None as any number
            if stream is not None and not live.latest(stream, number):  # type: ignore[arg-type]
                return None
            return method(self.model, live.x, seed, **options)
        except (InputError, SeedError, RuleError, ModelError, registry.OptionError, ValueError, TypeError) as exc:
            raise RequestError(_one_line(exc)) from None

    def _stored(self) -> StoreView:
        """The StoreView, or the RequestError of a page of one image."""
        if self.store is None:
            raise RequestError("no store is open: start the page with saliency explore STORE")
        return self.store

    def table(self) -> dict[str, Any]:
        """The store's summary and its rows (GET /api/store)."""
        store = self._stored()
        return {**store.summary(), "rows": store.rows()}

    def stored_map(self, index: Optional[str]) -> NDArray[Any]:
        """The store's map of image `index` (its text, as a request gives it)."""
        store = self._stored()
        try:
            return store.map(store.index(index))
        except StoreError as exc:
            raise RequestError(_one_line(exc)) from None

    def stored_picture(self, index: Optional[str]) -> bytes:
        """Image `index` of the store as the model saw it, a PNG."""
        store = self._stored()
        try:
            return _png(to_rgb(store.picture(store.index(index))))
        except StoreError as exc:
            raise RequestError(_one_line(exc)) from None


def _one_line(exc: BaseException) -> str:
    """An exception's message as one line (the page's error line)."""
    return " ".join(str(exc).split())


class _Shown:
    """A map already computed (the batched class maps): what the handler reads of an Attribution."""

    def __init__(self, amap: NDArray[Any], seconds: float, output: NDArray[Any]) -> None:
        self.map, self.seconds, self.output = amap, seconds, output


def _class_of(spec: Optional[str]) -> Optional[int]:
    """K of a seed spec "class:K", else None."""
    if spec and spec.startswith("class:") and spec[len("class:"):].isdigit():
        return int(spec[len("class:"):])
    return None


def _radii(amap: NDArray[Any], spec: str,
           output_shape: tuple[int, ...]) -> tuple[tuple[float, float], Optional[float], Optional[float]]:
    """(centre (row, col), radius50, radius90) in input pixels of a pixel seed's map, for drawing."""
    row, col = (int(v) for v in spec[len("pixel:"):].split("@")[0].split(","))
    h_out, w_out = output_shape[-2:]
    h_in, w_in = amap.shape[-2:]
    centre = ((row + 0.5) * h_in / h_out - 0.5, (col + 0.5) * w_in / w_out - 0.5)
    mass = np.abs(np.asarray(amap, np.float64)).reshape((-1,) + amap.shape[-2:]).sum(axis=0)[None]
    r50, r90 = (float(mass_radius(mass, centre, f)[0]) for f in (0.5, 0.9))
    return centre, (r50 if np.isfinite(r50) else None), (r90 if np.isfinite(r90) else None)


def _static(name: str) -> bytes:
    """The bytes of one of the page's files (a name of STATIC), from the package."""
    return (importlib.resources.files(__package__) / "static" / name).read_bytes()


def _png(rgb: NDArray[np.uint8], fmt: str = "png") -> bytes:
    """An RGB picture (H, W, 3) as a PNG file's bytes, or its raw RGBA pixels, row by row (fmt="rgba":
    nothing to encode or decode; the page draws maps so)."""
    if fmt == "rgba":
        rgba = np.empty(rgb.shape[:2] + (4,), np.uint8)
        rgba[..., :3], rgba[..., 3] = rgb, 255
        return rgba.tobytes()
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _npy(a: ArrayLike) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(a, np.float32), allow_pickle=False)
    return buf.getvalue()


class Server(http.server.ThreadingHTTPServer):
    """The explore server on (host, port) (port 0: a free one), for `explorer`, with `token`."""

    daemon_threads = True

    def __init__(self, explorer: Explorer, host: str = "127.0.0.1", port: int = 0,
                 token: Optional[str] = None) -> None:
        super().__init__((host, port), _Handler)
        self.explorer = explorer
        self.token = token or secrets.token_urlsafe(24)
        port = self.server_address[1]
        names = {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host}]"}
        self.hosts = {f"{n}:{port}" for n in names}
        self.thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host, port = cast("tuple[str, int]", self.server_address[:2])  # an AF_INET(6) server's
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}/?token={self.token}"

    def start(self) -> Server:
        """Serve in a daemon thread; returns self."""
        self.thread = threading.Thread(target=self.serve_forever, name="saliency-explore", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "saliency-explore"
    protocol_version = "HTTP/1.1"  # a tab's clicks reuse one connection (a new one costs milliseconds)
    timeout = 120  # seconds an idle connection is kept
    disable_nagle_algorithm = True  # the body right behind the headers, not after the client's delayed ACK
    server: Server  # (the stdlib says a BaseServer)

    def log_message(self, *args: Any) -> None:  # no line per request on the terminal
        pass

    def _send(self, status: int, body: bytes, kind: str, extra: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: object) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _allowed(self, query: dict[str, str]) -> bool:
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

    def do_POST(self) -> None:
        self.close_connection = True  # whatever of its body is not read cannot start the next request
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if not self._allowed(query):
            return
        if url.path == "/api/open":
            try:
                self.server.explorer.open(query.get("index"))
            except RequestError as exc:
                return self._json(400, {"error": str(exc)})
            return self._json(200, self.server.explorer.info())
        if url.path != "/api/image":
            return self._json(404, {"error": f"no such page: {url.path}"})
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._json(411, {"error": "an upload needs its Content-Length"})
        if length > MAX_UPLOAD or length < 0:
            if 0 < length <= 2 * MAX_UPLOAD:  # read and drop it, so that the sender sees the answer
                for done in range(0, length, 1 << 20):
                    self.rfile.read(min(1 << 20, length - done))
            return self._json(413, {"error": f"the image is {length:,} bytes; at most {MAX_UPLOAD:,} are taken"})
        try:
            note = self.server.explorer.replace(self.rfile.read(length))
        except RequestError as exc:
            return self._json(400, {"error": str(exc)})
        return self._json(200, {"note": note, **self.server.explorer.info()})

    def do_GET(self) -> None:
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
            if url.path == "/api/store":
                return self._json(200, explorer.table())
            if url.path == "/api/store/map":
                return self._picture(explorer.stored_map(query.get("index")), query, None, [])
            if url.path == "/api/store/image.png":
                return self._send(200, explorer.stored_picture(query.get("index")), "image/png")
            if url.path == "/api/work":
                return self._json(200, explorer.work(query.get("seed")))
            return self._json(404, {"error": f"no such page: {url.path}"})
        except RequestError as exc:
            return self._json(400, {"error": str(exc)})

    def _map(self, explorer: Explorer, query: dict[str, str]) -> None:
        stream = query.pop("stream", None)
        fmt, sign, reduce = _picture_options(query)
        attr = explorer.map_of({k: v for k, v in query.items() if k not in ("format", "sign", "reduce")}, stream)
        if attr is None:
            return self._json(409, {"superseded": True})
        extra = [("X-Map-Milliseconds", f"{attr.seconds * 1e3:.3f}")]
        spec = query.get("seed") or ""
        if spec.startswith("pixel:") and np.ndim(attr.map) == 3:
            assert attr.output is not None  # (None only for a map read from a store)
            (cy, cx), r50, r90 = _radii(attr.map, spec, np.shape(attr.output))
            extra.append(("X-Receptive-Field", json.dumps({"centre": [cy, cx], "radius50": r50, "radius90": r90})))
        return self._picture(attr.map, query, (fmt, sign, reduce), extra)

    def _picture(self, amap: ArrayLike, query: dict[str, str], options: Optional[tuple[str, str, str]],
                 extra: list[tuple[str, str]]) -> None:
        """Send a map as its query asks (format, sign, reduce; `options` when already read from it)."""
        fmt, sign, reduce = options or _picture_options(query)
        if fmt == "npy":
            return self._send(200, _npy(amap), "application/octet-stream", extra)
        picture = np.asarray(amap)
        if picture.ndim == 4:
            picture = picture[0]
        rgb = heatmap(picture, sign=sign, reduce=reduce)
        if fmt == "rgba":
            extra = extra + [("X-Map-Size", f"{rgb.shape[1]}x{rgb.shape[0]}")]
        return self._send(200, _png(rgb, fmt), "image/png" if fmt == "png" else "application/octet-stream", extra)


def _picture_options(query: dict[str, str]) -> tuple[str, str, str]:
    """(format, sign, reduce) of a map request, checked (RequestError)."""
    fmt, sign, reduce = query.get("format", "npy"), query.get("sign", "abs"), query.get("reduce", "sum")
    if fmt not in ("npy", "png", "rgba"):
        raise RequestError(f"format must be npy, png or rgba, got {fmt!r}")
    if sign not in SIGNS or reduce not in ("sum", "max_abs"):
        raise RequestError(f"sign must be one of {', '.join(SIGNS)} and reduce sum or max_abs")
    return fmt, sign, reduce
