"""The figures of the documentation site, drawn with the package's own API at build time.

`draw_all(root)` returns {name: PNG bytes}; docs/hooks.py puts each into the site as
figures/NAME.png. They are a few of samples/gallery.py's subjects, on the sample images of
samples/images, chosen to take seconds rather than the gallery's minute: every gradient-based
method and the rule-based ones on the shapes classifier, the per-class maps of one image, the depth
model's seeds, receptive fields and look distance.
"""
import numpy as np
from matplotlib.patches import Circle

from saliency import attribution as A
from saliency import viz
from saliency.attribution import seeds
from saliency.models import zoo

MARK = {"marker": "+", "color": "cyan", "markersize": 10, "markeredgewidth": 1.5}
OBJECT_PIXEL, GROUND_PIXEL = (70, 40), (110, 90)       # on samples/images/scene.png


def _image(root, name, model):
    x, _ = viz.load_image(root / "samples" / "images" / name, size=model.input_shape[1:])
    return x


def gradient_methods(shapes, star):
    """Every gradient-based method (and occlusion) on the star's predicted class."""
    rng = np.random.default_rng(0)
    attrs = [A.gradient(shapes, star), A.input_x_gradient(shapes, star), A.guided_backprop(shapes, star),
             A.smoothgrad(shapes, star, n=16, rng=rng), A.vargrad(shapes, star, n=16, rng=rng),
             A.integrated_gradients(shapes, star, steps=32), A.gradcam(shapes, star),
             A.occlusion(shapes, star, window=8, stride=4)]
    names = ["gradient", "input_x_gradient", "guided_backprop", "smoothgrad", "vargrad", "integrated_gradients",
             "gradcam", "occlusion"]
    return viz.panels([a.map for a in attrs], image=star, titles=names, colorbar=False,
                      panel_size=1.9)


def rule_methods(shapes, star):
    """LRP under three composites, DeepLift, DeepLiftShap and GradientShap, signed."""
    background = A.baselines.Uniform(8)
    attrs = [A.lrp(shapes, star), A.lrp(shapes, star, composite="epsilon_gamma_box"),
             A.lrp(shapes, star, composite="epsilon_alpha2_beta1"), A.deeplift(shapes, star),
             A.deeplift_shap(shapes, star, baselines=background),
             A.gradient_shap(shapes, star, baselines=background, samples=16, rng=0)]
    names = ["lrp", "lrp epsilon_gamma_box", "lrp epsilon_alpha2_beta1", "deeplift", "deeplift_shap",
             "gradient_shap"]
    return viz.panels([a.map for a in attrs], image=star, titles=names, sign="all",
                      colorbar=False, panel_size=1.9)


def per_class(shapes, star):
    """The gradient of each of the eight class scores of one image, from one batched backward pass."""
    a = A.gradient(shapes, star, seeds.classes(range(len(shapes.classes))))
    logits = np.asarray(a.output, np.float64).reshape(-1)        # the image's K class scores
    p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    titles = [f"{name} {100 * p[k]:.1f}%" for k, name in enumerate(shapes.classes)]
    return viz.panels(list(a.map), image=star, titles=titles, colorbar=False, panel_size=1.7)


def depth_seeds(depth, scene):
    """All ones, two pixels (one batched pass) and a region on the depth model."""
    ones = A.gradient(depth, scene)
    both = A.gradient(depth, scene, seeds.pixels([OBJECT_PIXEL, GROUND_PIXEL]))
    box = (60, 25, 80, 55)
    region = A.gradient(depth, scene, seeds.region(box))
    fig = viz.panels([ones.map, both.map[0], both.map[1], region.map], image=scene, panel_size=2.6,
                     titles=["ones: the sum of all depths", f"pixel {OBJECT_PIXEL}", f"pixel {GROUND_PIXEL}",
                             f"region {box}"])
    axes = fig.panel_axes[0]
    axes[2].plot([OBJECT_PIXEL[1]], [OBJECT_PIXEL[0]], **MARK)
    axes[3].plot([GROUND_PIXEL[1]], [GROUND_PIXEL[0]], **MARK)
    r0, c0, r1, c1 = box
    axes[4].plot([c0, c1, c1, c0, c0], [r0, r0, r1, r1, r0], color="cyan", linewidth=1)
    return fig


def receptive_fields(depth, scene):
    """The maps of three output pixels with the radii holding 50% and 90% of their gradient."""
    points = [(64, 64), OBJECT_PIXEL, GROUND_PIXEL]
    fields = [A.receptive_field(depth, scene, p) for p in points]
    titles = [f"pixel {p}: r50 {rf.extras['radius50']:.0f} px, r90 {rf.extras['radius90']:.0f} px"
              for p, rf in zip(points, fields)]
    fig = viz.panels([rf.map for rf in fields], titles=titles, colorbar=False, panel_size=2.8)
    for ax, rf in zip(fig.panel_axes[0], fields):
        cy, cx = rf.extras["centre"]
        ax.plot([cx], [cy], **MARK)
        for radius, style in ((rf.extras["radius50"], "-"), (rf.extras["radius90"], "--")):
            circle = Circle((cx, cy), radius, fill=False, color="cyan", linestyle=style, linewidth=1)
            circle.set_in_layout(False)
            ax.add_patch(circle)
        ax.set_xlim(-0.5, scene.shape[-1] - 0.5)
        ax.set_ylim(scene.shape[-2] - 0.5, -0.5)
    return fig


def look_distance(depth, scene):
    """The predicted depth and, for every 16th output pixel, the radii holding 50% and 90% of its gradient."""
    look = A.look_distance(depth, scene, stride=16)
    pred = look.output[0]
    reach = float(np.nanmax(look.radius90))
    return viz.value_panels([pred, look.radius50, look.radius90], image=scene, alpha=0.75,
                            extents=[None, look.extent, look.extent], vmax=[None, reach, reach], panel_size=2.8,
                            titles=["predicted depth (m)", "r50: radius holding 50%", "r90: radius holding 90%"],
                            labels=["depth (m)", "radius (input px)", "radius (input px)"])


def draw_all(root):
    """{name: PNG bytes} of every figure."""
    shapes, depth = zoo.load("shapes"), zoo.load("depth")
    star, scene = _image(root, "star.png", shapes), _image(root, "scene.png", depth)
    figures = {"gradient_methods": gradient_methods(shapes, star), "rule_methods": rule_methods(shapes, star),
               "per_class": per_class(shapes, star), "depth_seeds": depth_seeds(depth, scene),
               "receptive_fields": receptive_fields(depth, scene), "look_distance": look_distance(depth, scene)}
    return {name: viz.png_bytes(fig, dpi=100) for name, fig in figures.items()}
