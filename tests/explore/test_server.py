"""The explore server's API and its security: maps equal the methods', requests without the token or
for another Host refused, bad requests one line and the server still serving."""
import io
import json
import urllib.error
import urllib.request

import numpy as np
import pytest
from PIL import Image

from saliency import explore, nn
from saliency.attribution import gradient, seeds


def _model():
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1))
    for p in model.parameters():
        p.data = (0.5 * rng.standard_normal(p.shape)).astype(np.float32)
    return model.eval()


@pytest.fixture(scope="module")
def served():
    model = _model()
    x = np.random.default_rng(1).uniform(0, 1, (3, 24, 24)).astype(np.float32)
    server = explore.serve(model, x)
    yield server, model, x
    server.stop()


def _get(server, path, token=True, host=None, headers=()):
    base = server.url.split("/?")[0]
    sep = "&" if "?" in path else "?"
    url = base + path + (f"{sep}token={server.token}" if token is True else "")
    request = urllib.request.Request(url, headers=dict(headers))
    if host is not None:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_a_pixel_map_is_the_gradient_the_method_computes(served):
    server, model, x = served
    for r, c, ch in ((3, 4, 0), (20, 11, 1)):
        status, headers, body = _get(server, f"/api/map?seed=pixel:{r},{c}@{ch}&format=npy")
        assert status == 200 and float(headers["X-Map-Milliseconds"]) >= 0
        got = np.load(io.BytesIO(body))
        np.testing.assert_allclose(got, gradient(model, x, seeds.pixel(r, c, channel=ch)).map, rtol=1e-6, atol=1e-7)
    status, headers, body = _get(server, "/api/map?seed=pixel:5,5&format=png&sign=all")
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert Image.open(io.BytesIO(body)).size == (24, 24)
    status, headers, raw = _get(server, "/api/map?seed=pixel:5,5&format=rgba&sign=all")  # the page's format
    assert status == 200 and headers["X-Map-Size"] == "24x24"
    rgba = np.frombuffer(raw, np.uint8).reshape(24, 24, 4)
    np.testing.assert_array_equal(rgba[..., :3], np.asarray(Image.open(io.BytesIO(body)).convert("RGB")))
    assert (rgba[..., 3] == 255).all()


def test_info_image_and_another_method(served):
    server, model, x = served
    status, _, body = _get(server, "/api/info")
    info = json.loads(body)
    assert status == 200 and info["output_shape"] == [2, 24, 24] and "lrp" in info["methods"]
    status, _, body = _get(server, "/api/image.png")
    assert status == 200 and Image.open(io.BytesIO(body)).size == (24, 24)
    status, _, body = _get(server, "/api/map?seed=pixel:6,7&method=integrated_gradients&steps=4&format=npy")
    assert status == 200
    from saliency.attribution import integrated_gradients

    want = integrated_gradients(model, x, seeds.pixel(6, 7), steps=4).map
    np.testing.assert_allclose(np.load(io.BytesIO(body)), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("path, message", [
    ("/api/map?seed=pixel:300,4", "outside"),
    ("/api/map?seed=klass:3", "klass:3"),
    ("/api/map?method=lime", "unknown method 'lime'"),
    ("/api/map?seed=pixel:3,3&steps=4", "gradient has no option 'steps'"),
    ("/api/map?seed=pixel:3,3&format=gif", "format must be npy, png or rgba"),
    ("/etc/passwd", "no such page"),
])
def test_a_bad_request_is_one_line_and_the_server_keeps_serving(served, path, message):
    server, _, _ = served
    status, _, body = _get(server, path)
    assert status in (400, 404)
    error = json.loads(body)["error"]
    assert message in error and "\n" not in error
    assert _get(server, "/api/info")[0] == 200


def test_requests_without_the_token_or_for_another_host_are_refused(served):
    server, _, _ = served
    status, _, body = _get(server, "/api/info", token=False)
    assert status == 403 and "token" in json.loads(body)["error"]
    status, _, _ = _get(server, "/api/info?token=wrong" + "x" * 20, token=False)
    assert status == 403
    port = server.server_address[1]
    status, _, body = _get(server, "/api/info", host=f"evil.example:{port}")
    assert status == 403 and "Host" in json.loads(body)["error"]
    assert _get(server, "/api/info", token=False, headers=[("Authorization", f"token {server.token}")])[0] == 200
    assert _get(server, "/api/info", token=False, headers=[("Cookie", f"saliency_token={server.token}")])[0] == 200
    assert server.server_address[0] == "127.0.0.1"


def _post(server, path, body):
    base = server.url.split("/?")[0]
    sep = "&" if "?" in path else "?"
    request = urllib.request.Request(f"{base}{path}{sep}token={server.token}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_an_uploaded_image_replaces_the_shown_one_and_a_bad_one_is_one_line():
    model = _model()
    x = np.random.default_rng(4).uniform(0, 1, (3, 24, 24)).astype(np.float32)
    server = explore.serve(model, x)
    try:
        picture = (np.random.default_rng(5).uniform(0, 1, (40, 30, 3)) * 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(picture).save(buf, format="PNG")
        status, info = _post(server, "/api/image", buf.getvalue())
        assert status == 200 and "resized 30x40 -> 24x24" in info["note"]
        from saliency.viz import load_image

        shown, _ = load_image(io.BytesIO(buf.getvalue()), size=(24, 24))
        status, _, body = _get(server, "/api/map?seed=pixel:3,4&format=npy")
        np.testing.assert_allclose(np.load(io.BytesIO(body)), gradient(model, shown, seeds.pixel(3, 4)).map,
                                   rtol=1e-6, atol=1e-7)
        status, info = _post(server, "/api/image", b"%PDF-1.4 not an image")
        assert status == 400 and "cannot read image" in info["error"] and "\n" not in info["error"]
        status, info = _post(server, "/api/image", b"x" * (explore.server.MAX_UPLOAD + 1))
        assert status in (400, 413) and "at most" in info["error"]
        assert _get(server, "/api/info")[0] == 200
    finally:
        server.stop()
