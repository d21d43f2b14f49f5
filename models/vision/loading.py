"""Loading a torchvision architecture by name: built here, its weights read from the `.pth` (or
`.npz`, `.safetensors`) file given, strict, in eval mode, with the attributes the tool reads:
`.name`, `.task`, `.classes`, `.input_shape`, `.metrics`."""
from . import ARCHITECTURES


def load(name, weights=None, **kwargs):
    """The architecture `name` built with torchvision's keyword arguments, with `weights` loaded
    (strict; a file that does not fit is a ZooError naming the keys), in eval mode."""
    from .. import zoo

    arch = ARCHITECTURES[name]
    model = arch.build(**kwargs)
    if weights is not None:
        if not zoo._is_file(weights, "the weights file"):
            raise zoo.ZooError(f"no weights file {zoo._shown(weights)}")
        zoo._load_weights(model, weights, f"the {name!r} architecture")
    model.name, model.task, model.classes, model.metrics = name, arch.task, [], {}
    model.input_shape = None
    return model.eval()
