"""Exploring maps interactively: a local server answering map requests for one model and one image.

    server = saliency.explore.serve(model, x)    # started in a thread; server.url has the token
    ...                                          # GET {url}/api/map?seed=pixel:100,40&format=npy
    server.stop()

See `server` for the API and its security (token, Host check, localhost by default).
"""
from .server import Explorer, RequestError, Server


def serve(model, x, host="127.0.0.1", port=0, token=None):
    """A started Server for `model` on the image `x` ((C, H, W), as the methods take it)."""
    return Server(Explorer(model, x), host=host, port=port, token=token).start()


__all__ = ["Explorer", "RequestError", "Server", "serve"]
