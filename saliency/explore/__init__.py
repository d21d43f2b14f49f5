"""Exploring maps interactively: a local server answering map requests for one model and one image,
and browsing a store of maps made by `saliency batch`.

    server = saliency.explore.serve(model, x)    # started in a thread; server.url has the token
    ...                                          # GET {url}/api/map?seed=pixel:100,40&format=npy
    server.stop()

    view = StoreView(attribution.open_store("out/maps"))
    server = saliency.explore.serve(model, store=view)   # its images, opened live by number

See `server` for the API and its security (token, Host check, localhost by default).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .browse import ScoresError, StoreView, read_scores
from .server import Explorer, RequestError, Server

if TYPE_CHECKING:
    from ..attribution._core import Model
    from ..autograd.tensor import TensorLike


def serve(model: Model, x: Optional[TensorLike] = None, store: Optional[StoreView] = None, host: str = "127.0.0.1",
          port: int = 0, token: Optional[str] = None) -> Server:
    """A started Server for `model` on the image `x` ((C, H, W), as the methods take it), or on the
    images of `store` (a StoreView; the first with a map shown)."""
    return Server(Explorer(model, x, store=store), host=host, port=port, token=token).start()


__all__ = ["Explorer", "RequestError", "ScoresError", "Server", "StoreView", "read_scores", "serve"]
