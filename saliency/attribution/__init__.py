"""Attribution: seeds (which v goes into backward(v)) and the methods built on them.

Every method is `method(model, x, seed=None, *, options)`: `model` is any callable from a Tensor
(N, C, H, W) to a Tensor (N, ...) (a saliency.nn.Module or a function), `x` an ndarray or Tensor
of shape (N, C, H, W) or (C, H, W), `seed` an object from `seeds` (default: `seeds.predicted()`
for an output (N, K), `seeds.segment()` for a model whose `task` is "segmentation", `seeds.ones()`
otherwise). Each returns an `Attribution` whose `.map` has the input's shape (with a leading K
for K batched seeds; Grad-CAM: one channel) and the dtype of the model's parameters (x is cast to
it; a function model keeps x's float dtype). Methods leave no trace: `.grad` of the parameters and x
stay as they were, and the model's mode is not changed (call `model.eval()` yourself; the copies a
method batches assume images independent).
"""
from . import baselines, registry, seeds
# the methods, in the order the command line lists them (they register as they are imported)
from .gradient import gradient, guided_backprop, input_x_gradient  # noqa: I100
from .smoothgrad import smoothgrad  # noqa: I100
from .vargrad import vargrad  # noqa: I100
from .integrated_gradients import integrated_gradients  # noqa: I100
from .gradcam import gradcam  # noqa: I100
from .occlusion import occlusion  # noqa: I100
from .lrp import AlphaBeta, Epsilon, Flat, Gamma, Norm, Pass, WSquare, ZBox, ZPlus, lrp  # noqa: I100
from .deeplift import deeplift, deeplift_shap  # noqa: I100
from .gradient_shap import gradient_shap  # noqa: I100
from ._core import InputError, ModelError
from .evaluation import (
           DeletionInsertion,
           RandomisationCheck,
           deletion_insertion,
           randomisation_check,
)
from .live import Live
from .look import LookDistance, jacobian_rows, look_distance
from .receptive import receptive_field
from .result import Attribution
from .seeds import SeedError
from ..autograd.rules import RuleError  # noqa: I100
from .naming import output_names
from .pipeline import BatchMaps, batch  # noqa: I100 (after the methods)
from .run import Run
from .store import MapStore, StoreError, open_store
from .store_evaluation import StoreEvaluation
from .store_evaluation import evaluate as evaluate_store

# name -> method function, for every method declared (`registry.method`)
METHODS = {name: record.function for name, record in registry.METHODS.items()}

__all__ = ["Attribution", "InputError", "ModelError", "SeedError", "baselines", "gradcam", "gradient",
           "guided_backprop", "input_x_gradient", "integrated_gradients", "occlusion", "registry", "seeds",
           "smoothgrad", "vargrad"]
__all__ += ["RuleError", "deeplift", "deeplift_shap", "gradient_shap", "lrp"]
__all__ += ["AlphaBeta", "Epsilon", "Flat", "Gamma", "Norm", "Pass", "WSquare", "ZBox", "ZPlus"]  # LRP's rules
__all__ += ["receptive_field"]
__all__ += ["Live", "LookDistance", "jacobian_rows", "look_distance"]
__all__ += ["DeletionInsertion", "RandomisationCheck", "deletion_insertion", "randomisation_check"]
__all__ += ["METHODS", "BatchMaps", "MapStore", "Run", "StoreError", "StoreEvaluation", "batch", "evaluate_store",
            "open_store", "output_names"]
