"""A gallery of attribution maps from the three zoo models: PNG figures and an index.html.

    python samples/gallery.py [--out DIR]       (default: gallery/ under the current folder)

Every map is x.grad = v^T dy/dx for a seed v (the gradient of sum(v * y)): one class score of
a classifier, one depth pixel, a region or all depths of the depth model. The figures: the shape
classifier on each class and every class on one image (one batched backward pass); test digits;
a scene's predicted and true depth and the maps of four seeds; receptive fields; how far each
depth pixel looks (look distance); per-channel (R, G, B) maps; every method side by side; the rule-based
methods (LRP, DeepLift, GradientShap); the randomisation sanity check; and a photo the
models never saw. The images come from the data generators with fixed seeds, so every run draws
the same pictures. The script prints each file it writes and the total time, then checks its
own output with assertions (files written and linked, batched seeds equal to single seeds,
receptive fields inside their boxes, look distances equal to receptive fields' radii, weights put
back after the sanity check).
"""
import argparse
import html
import importlib.util
import time
from pathlib import Path

import numpy as np
from matplotlib import cbook
from matplotlib.patches import Circle, Rectangle

import saliency as sl
from saliency import attribution as A
from saliency import viz
from saliency._write import write_text
from saliency.attribution import seeds
from saliency.attribution.gradcam import default_layer
from saliency.models import data, zoo

SHAPES_SEED, SCENES_SEED = 11, 3        # generator seeds of the images shown
MARK = {"marker": "+", "color": "cyan", "markersize": 10, "markeredgewidth": 1.5}


def softmax(logits):
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def mark(ax, points):
    for row, col in points:
        ax.plot([col], [row], **MARK)


def outline(ax, mask):
    ax.contour(mask.astype(float), levels=[0.5], colors="cyan", linewidths=1)


def same_maps(a, b):
    """Two maps equal up to float32 summation order."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.allclose(a, b, rtol=1e-4, atol=1e-5 * max(np.abs(b).max(), 1e-30))


# ---------------------------------------------------------------- the figures
# Each returns a list of (file name, title, caption, Figure); facts for the self-check go in `checks`.

def shapes_figures(model, checks):
    images, labels = data.shapes(64, seed=SHAPES_SEED)
    with sl.no_grad():
        probs = softmax(model(sl.tensor(images)).numpy())
    names = model.classes
    # one image per class: the first one the model gets right (else the first one of that class)
    picks = []
    for k in range(len(names)):
        of_k = np.flatnonzero(labels == k)
        right = [i for i in of_k if probs[i].argmax() == k]
        picks.append((right or list(of_k))[0])
    x = images[picks]
    attr = A.gradient(model, x)                        # predicted class of each image, one pass
    ig = A.integrated_gradients(model, x, attr.seed, steps=32)
    p = softmax(attr.output)
    pred = p.argmax(axis=1)
    titles = [[f"gradient: {names[k]} {100 * p[i, k]:.1f}%", "integrated gradients"] for i, k in enumerate(pred)]
    fig = viz.grid([[attr.map[i], ig.map[i]] for i in range(len(x))], images=list(x), titles=titles,
                   row_titles=[f"true: {n}" for n in names], colorbar=False, panel_size=1.8)
    one = (
        "shapes_per_image.png", "Shape classifier: one image per class",
        ("Each row is a held-out image of one class, the gradient of its predicted class score (|v^T dy/dx| "
         "summed over R, G, B; all eight images in one batched pass; the title gives the predicted class and its "
         "softmax probability) and, for comparison, integrated gradients of the same score (32 path points from a "
         "black image). Notice that the plain gradient is speckled: its large values are scattered over the "
         "shape and its surroundings, textured background included, because it measures how sensitive the score "
         "is to each pixel, not how much each pixel contributes. Integrated gradients, which weighs that "
         "sensitivity by the pixel's difference from the baseline along the whole path, traces the outlines "
         "of the shapes much more clearly."), fig)

    xi = x[list(names).index("star")]
    per_class = A.gradient(model, xi, seeds.classes(list(range(len(names)))))   # K = 8 maps, one backward pass
    singles = [A.gradient(model, xi, seeds.one_hot(k)).map for k in range(len(names))]
    checks["per-class batch equals single maps"] = all(same_maps(per_class.map[k], s) for k, s in enumerate(singles))
    pc = softmax(per_class.output)
    fig = viz.panels(list(per_class.map), image=xi, sign="all", shared_scale=True, colorbar=False, panel_size=1.9,
                     titles=[f"{n} ({100 * pc[k]:.1f}%)" for k, n in enumerate(names)])
    two = (
        "shapes_per_class.png", "Shape classifier: every class score of one image",
        ("The gradient of each of the eight class scores for the same star, from ONE backward pass with a "
         "batched seed (seeds.classes: v has shape (8, 1, 8), one one-hot row per class), signed (red: brighter "
         "would raise that score, blue: lower it) and on one shared scale, so the panels compare; the titles give "
         "each class's probability. Notice that the maps differ although the image is the same, and that classes "
         "the model rules out still have full maps: a gradient says how a score would change, not whether the "
         "class is there. The self-check confirms that each batched map equals the map of its own backward pass."),
        fig)
    return [one, two], xi, attr.map[list(names).index("star")]


def digits_figures(model, checks):
    if importlib.util.find_spec("sklearn") is None:
        print("note: scikit-learn is not installed, so the digits figure is skipped (it holds the digit images)")
        return []
    images, labels = data.digits("test")
    picks = [int(np.flatnonzero(labels == d)[0]) for d in (0, 2, 3, 4, 7, 9)]
    x = images[picks]
    attr = A.gradient(model, x)                        # six images, six predicted classes, one pass
    ig = A.integrated_gradients(model, x, attr.seed, steps=32)
    # A batch's maps need not equal single-image maps bit for bit here: the digits' flat regions give max-pool
    # windows exact ties, and the last-bit differences of a batched convolution can move the winner. The
    # outputs agree to float32 precision.
    alone = np.stack([A.gradient(model, xi).output for xi in x])
    checks["digits batch outputs equal single outputs"] = np.allclose(attr.output, alone, rtol=1e-4, atol=1e-4)
    gap = np.abs(ig.completeness_error).max()          # sum(map) - (f(x) - f(black)) per image
    p = softmax(attr.output)
    titles = [[f"gradient: {k} {100 * p[i, k]:.1f}%", "integrated gradients"] for i, k in enumerate(p.argmax(axis=1))]
    fig = viz.grid([[a, b] for a, b in zip(attr.map, ig.map)], images=list(x), titles=titles, sign="all",
                   row_titles=[f"true: {labels[i]}" for i in picks], colorbar=False, panel_size=1.7)
    return [("digits.png", "Digit classifier: test digits",
             ("Six held-out digits (scikit-learn's 8x8 digits, upsampled to 32x32), the signed gradient of the "
              "predicted digit's score (one batched pass; red: brighter would raise the score, blue: lower it), and "
              "integrated gradients of the same score from a black baseline (32 path points). Notice that the "
              "gradient alternates in sign from pixel to pixel and is as strong on the empty background as on the "
              "ink, while integrated gradients is zero off the ink (it multiplies by x - baseline) and each of its "
              "maps sums to the score's change from the black image (largest deviation here "
              f"{gap:.2f} in logits, from the 32-point quadrature)."), fig)]


def pick_scene():
    """(image, true depth, object mask, ground pixel, object pixel) of a fixed generated scene."""
    images, depths, masks = data.scenes(4, seed=SCENES_SEED)
    sizes = masks.sum(axis=(2, 3))
    s, k = np.unravel_index(np.argmax(sizes), sizes.shape)     # the scene with the largest visible object
    mask = masks[s, k]
    rows, cols = np.nonzero(mask)
    d2 = (rows - rows.mean()) ** 2 + (cols - cols.mean()) ** 2
    obj = (int(rows[np.argmin(d2)]), int(cols[np.argmin(d2)]))
    ground = ~masks[s].any(axis=0) & (depths[s, 0] < data.MAX_DEPTH)
    gr, gc = np.nonzero(ground[96:120])                          # near the bottom: close ground
    j = np.argmin(np.abs(gc - (127 - obj[1])))                  # on the other side from the object
    return images[s], depths[s], mask, (int(gr[j]) + 96, int(gc[j])), obj


def mass_share(amap, where):
    """The share of |map| (summed over channels) that lies where the boolean (H, W) `where` is True."""
    mass = np.abs(np.asarray(amap, np.float64)).reshape(-1, *where.shape).sum(axis=0)
    return float(mass[where].sum() / mass.sum())


def horizon_band(depth, half_width=4):
    """Pixels within `half_width` rows of the horizon (the first non-sky row of each column)."""
    horizon = (depth >= data.MAX_DEPTH).sum(axis=0)                 # sky rows above the ground, per column
    rows = np.arange(depth.shape[0])[:, None]
    return np.abs(rows - horizon[None]) <= half_width


def depth_figures(model, scene, checks):
    x, depth, mask, ground, obj = scene
    ones = A.gradient(model, x)                                  # default seed for a dense output: ones()
    both = A.gradient(model, x, seeds.pixels([ground, obj]))    # two pixel seeds, one backward pass
    region = A.gradient(model, x, seeds.region(mask))
    single = A.gradient(model, x, seeds.pixel(*obj))
    checks["pixel batch equals single map"] = same_maps(both.map[1], single.map)
    pred, true = ones.output[0], depth[0]
    sky = true >= data.MAX_DEPTH
    top = float(np.percentile(true[~sky], 98))
    err = float(np.abs(pred - true)[~sky].mean())
    fig = viz.panels([pred, true], image=x, vmax=top, panel_size=3.0,
                     titles=[f"predicted depth (m), clipped at {top:.0f}", "true depth (m)"])
    first = ("depth_prediction.png", "Depth model: a scene and its depth",
             (f"A generated scene (left), the depth the model predicts and the true depth, in metres on one scale "
              f"clipped at {top:.0f} m (the sky is {data.MAX_DEPTH:.0f} m). Mean absolute error on the non-sky "
              f"pixels: {err:.2f} m. The ground's checkered 1 m tiles are the cue to metric scale."), fig)

    def at(p):
        return f"{pred[p]:.1f} m (true {true[p]:.1f})"

    maps = [ones.map, both.map[0], both.map[1], region.map]
    titles = ["seed ones (sum of all depths)", f"ground pixel {ground}\n{at(ground)}",
              f"object pixel {obj}\n{at(obj)}", f"region: the object's mask\n({int(mask.sum())} px)"]
    fig = viz.panels(maps, image=x, titles=titles, panel_size=2.8)
    ax = fig.panel_axes[0]
    for a in (ax[0], ax[2]):
        mark(a, [ground])
    for a in (ax[0], ax[3]):
        mark(a, [obj])
    outline(ax[4], mask)
    band = horizon_band(true)
    share = [mass_share(m, band) for m in maps]
    shares = ", ".join(f"{name} {v:.0%}" for name, v in zip(("ones", "ground pixel", "object pixel", "region"), share))
    if min(share) > 2 * band.mean():
        horizon = ("Notice how much of each map lies far from its seed, near the horizon: the rows within 4 px of it "
                   f"hold {band.mean():.0%} of the image but this share of each map's mass: {shares}. The horizon's "
                   "height in the image gives the camera's pitch, and a pixel's distance below it its depth, so the "
                   "network presumably reads every depth partly from there.")
    else:
        horizon = (f"The rows within 4 px of the horizon hold {band.mean():.0%} of the image and this share of each "
                   f"map's mass: {shares}.")
    second = ("depth_seeds.png", "Depth model: four seeds on the same scene",
              "The same scene with four seeds v. All ones: the gradient of the sum of every predicted depth. A "
              "ground pixel and an object pixel (the + marks; both maps come from ONE backward pass with "
              "seeds.pixels, titles give the predicted and true depth there). The region seed is v = 1 on the "
              "object's mask (cyan outline): the gradient of the object's summed depth, of which "
              f"{mass_share(region.map, mask):.0%} lies on the object itself. " + horizon, fig)
    return [first, second], both.map[1]


def receptive_figure(model, scene, checks):
    x, _, _, ground, obj = scene
    points = [(64, 64), (8, 8), ground, obj]
    fields = [A.receptive_field(model, x, p) for p in points]
    inside = True
    for rf in fields:
        box = rf.extras["box"]
        assert box is not None, "receptive_field returned no box"
        outside = np.ones(x.shape[1:], bool)
        outside[box.r0:box.r1, box.c0:box.c1] = False
        inside &= bool(np.all(rf.map[:, outside] == 0))
        inside &= rf.extras["radius50"] <= rf.extras["radius90"]
    checks["receptive field zero outside its box"] = inside
    titles = [f"pixel {p}: r50 {rf.extras['radius50']:.0f}, r90 {rf.extras['radius90']:.0f} px\n"
              f"box {rf.extras['theoretical_size'][0]}x{rf.extras['theoretical_size'][1]} px"
              for p, rf in zip(points, fields)]
    fig = viz.panels([rf.map for rf in fields], titles=titles, colorbar=False, panel_size=2.8)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + 0.3)         # panels() leaves room for one line of title; these have two
    for ax, rf in zip(fig.panel_axes[0], fields):
        (cy, cx), box = rf.extras["centre"], rf.extras["box"]
        ax.plot([cx], [cy], **MARK)
        for r, style in ((rf.extras["radius50"], "-"), (rf.extras["radius90"], "--")):
            ax.add_patch(Circle((cx, cy), r, fill=False, color="cyan", linestyle=style, linewidth=1))
        ax.add_patch(Rectangle((box.c0 - 0.5, box.r0 - 0.5), box.c1 - box.c0, box.r1 - box.r0, fill=False,
                               color="white", linestyle=":", linewidth=1))
        for patch in ax.patches:
            patch.set_in_layout(False)                   # circles may reach past the picture: not the layout's business
        ax.set_xlim(-0.5, x.shape[-1] - 0.5)
        ax.set_ylim(x.shape[-2] - 0.5, -0.5)
    return [("receptive_fields.png", "Depth model: receptive fields",
             ("The gradient map of single output pixels (+) of the depth network on the same scene: where each "
              "predicted depth looks. The solid circle holds 50% of the gradient mass (|map| summed over channels), "
              "the dashed one 90% (radii r50 and r90 in the titles); the dotted box is the theoretical receptive "
              "field read off the recorded graph (its size in the titles), and the map is exactly zero outside it "
              "(checked). Compare the circles with the boxes: the gradient is concentrated near its pixel, although "
              "the network could look much further, and for the corner pixel the box is cut off by the image "
              "border. Mass far from a pixel (here along the horizon) is context its depth depends on."), fig)]


def look_figure(model, checks):
    """The look distance of the depth model on samples/images/scene.png, beside its predicted depth."""
    x, _ = viz.load_image(Path(__file__).parent / "images" / "scene.png", size=model.input_shape[1:])
    look = A.look_distance(model, x, stride=8)         # every 8th pixel: 256 seeds, under a second
    pred = look.output[0]
    at = pred[np.ix_(look.rows, look.cols)]            # predicted depth at the grid pixels
    r50, r90 = look.radius50, look.radius90
    row, col = int(look.rows[len(look.rows) * 3 // 4]), int(look.cols[len(look.cols) // 2])
    rf = A.receptive_field(model, x, (row, col)).extras
    i, j = list(look.rows).index(row), list(look.cols).index(col)
    # the same radius as receptive_field's, up to the float32 rounding of a batched pass
    checks["look distance equals receptive_field's radii"] = (abs(rf["radius50"] - r50[i, j]) < 0.5
                                                              and abs(rf["radius90"] - r90[i, j]) < 0.5)
    checks["50% radius within the 90% radius"] = bool(np.all(r50 <= r90))
    sky = at >= 0.8 * data.MAX_DEPTH
    near = ~sky & (at < 5)
    far = ~sky & (at >= 10)

    def med(r, where):
        return f"{np.median(r[where]):.0f}" if where.any() else "-"

    ground = (f"For the sky (predicted deeper than {0.8 * data.MAX_DEPTH:.0f} m, {int(sky.sum())} grid pixels) half "
              f"the gradient lies within a median {med(r50, sky)} px and 90% within {med(r90, sky)} px; for ground "
              f"nearer than 5 m ({int(near.sum())} pixels) within {med(r50, near)} and {med(r90, near)} px; for "
              f"whatever lies beyond 10 m below the sky ({int(far.sum())} pixels) within {med(r50, far)} and "
              f"{med(r90, far)} px. ")
    if near.any() and sky.any() and np.median(r50[near]) > 3 * np.median(r50[sky]):
        ground += ("Notice that the sky is settled by its immediate surroundings, while a ground pixel's depth draws "
                   "on a wide region, far beyond the tile it lies on")
        if far.any() and np.median(r50[near]) > np.median(r50[far]):
            ground += (": the nearer the ground, the further it looks, presumably up to the horizon, whose height "
                       "gives the camera's pitch")
        ground += ". "
    lo, hi = np.nanpercentile(r90 / np.where(r50 > 0, r50, np.nan), [10, 90])
    ground += (f"r90 is {lo:.1f} to {hi:.1f} times r50 (10th to 90th percentile over the grid): the gradient has a "
               "long tail of context far from the pixel.")
    top = float(np.percentile(pred[pred < 0.8 * data.MAX_DEPTH], 98))
    reach = float(np.nanmax(r90))
    fig = viz.value_panels([pred, r50, r90], image=x, alpha=0.75, extents=[None, look.extent, look.extent],
                           vmax=[top, reach, reach], panel_size=2.8,
                           titles=[f"predicted depth (m), clipped at {top:.0f}", "r50: radius holding 50%",
                                   "r90: radius holding 90%"],
                           labels=["depth (m)", "radius (input px)", "radius (input px)"])
    return [("look_distance.png", "Depth model: how far each pixel looks",
             ("samples/images/scene.png, the depth the model predicts, and its look distance: for every 8th output "
              f"pixel ({len(look.rows)}x{len(look.cols)} pixel seeds, batched; {look.seconds:.1f} s), the radius "
              "around the pixel within which the input pixels hold 50% (r50) and 90% (r90) of the gradient mass "
              "|d depth / dx| summed over R, G, B; each block starts at its pixel, and r50 and r90 share one scale. "
              + ground + f" The self-check recomputes pixel ({row}, {col}) with receptive_field and finds the same "
              "radii."), fig)]


def channel_shares(amap):
    mass = np.abs(np.asarray(amap, np.float64)).sum(axis=(-2, -1))
    return ", ".join(f"{c} {m / mass.sum():.0%}" for c, m in zip("RGB", mass))


def channel_figures(shapes_x, shapes_map, scene, scene_map):
    first = viz.channel_panels(shapes_x, shapes_map, title="shape classifier, predicted class", panel_size=2.2)
    second = viz.channel_panels(scene[0], scene_map, title=f"depth model, pixel {scene[4]}", panel_size=2.2)
    return [("channels_shapes.png", "R, G, B channels: shape classifier",
             ("The predicted-class gradient of the star split by input channel (R, G and B on one shared scale) and "
              "|R + G + B| (own scale). Shares of the gradient mass |map|: "
              f"{channel_shares(shapes_map)}. A map summed over channels can hide channels that cancel: where the "
              "sum is dark but a channel is bright, the model responds to a change of colour rather than of "
              "brightness."), first),
            ("channels_scene.png", "R, G, B channels: depth model",
             ("The gradient of the object pixel's depth split into R, G and B on one scale, and their sum. Shares of "
              f"the gradient mass: {channel_shares(scene_map)}."), second)]


def methods_figure(shapes_model, shapes_x, depth_model, scene):
    x, _, _, _, obj = scene
    rng = np.random.default_rng(0)

    def every_method(model, image, seed, smooth_n, ig_steps, window, stride):
        return [A.gradient(model, image, seed), A.input_x_gradient(model, image, seed),
                A.smoothgrad(model, image, seed, n=smooth_n, rng=rng),
                A.integrated_gradients(model, image, seed, steps=ig_steps),
                A.guided_backprop(model, image, seed),
                A.gradcam(model, image, seed, layer=default_layer(model)[1]),
                A.occlusion(model, image, seed, window=window, stride=stride)]

    top = every_method(shapes_model, shapes_x, None, 32, 32, 8, 4)
    bottom = every_method(depth_model, x, seeds.pixel(*obj), 8, 16, 16, 16)
    names = ["gradient", "input x gradient", "smoothgrad", "integrated gradients", "guided backprop",
             "Grad-CAM", "occlusion"]
    titles = [[f"{n}\n{a.seconds:.2f} s" for n, a in zip(names, row)] for row in (top, bottom)]
    fig = viz.grid([[a.map for a in top], [a.map for a in bottom]], images=[shapes_x, x], titles=titles,
                   row_titles=["shapes: predicted class", f"depth: pixel {obj}"], colorbar=False, panel_size=2.0)
    for ax in fig.panel_axes[1]:
        mark(ax, [obj])
    layers = [default_layer(m)[0] for m in (shapes_model, depth_model)]
    return [("methods.png", "Every method on the same inputs",
             ("Top: the star and its predicted class; bottom: the scene and the object pixel's depth (+). Gradient; "
              "input x gradient; SmoothGrad (32 and 8 noisy copies at 15% of the image's range); integrated gradients "
              "(32 and 16 path points from a black image); guided backprop; Grad-CAM (on the last multi-channel "
              f"convolution, {layers[0]} and {layers[1]}); occlusion (a black window of 8 px every 4 px, and of 16 px "
              "every 16 px). Each map has its own scale; the titles give each method's time. Occlusion needs no "
              "gradient at all: it runs one forward pass per window. Grad-CAM weights each "
              "channel by its mean gradient over the whole map, so on a dense output with a one-pixel seed it shows "
              "where those channels are active anywhere in the image, not what that pixel looks at."), fig)]


def rules_figure(shapes_model, shapes_x, depth_model, scene, checks):
    """The rule-based methods: LRP under three of Zennit's composites, DeepLift, DeepLiftShap and
    GradientShap, on the star's predicted class and on the object pixel's depth."""
    x, _, _, _, obj = scene
    background = A.baselines.Uniform(8)

    def every_rule(model, image, seed):
        return [A.lrp(model, image, seed), A.lrp(model, image, seed, composite="epsilon_gamma_box"),
                A.lrp(model, image, seed, composite="epsilon_alpha2_beta1"), A.deeplift(model, image, seed),
                A.deeplift_shap(model, image, seed, baselines=background),
                A.gradient_shap(model, image, seed, baselines=background, samples=16, rng=0)]

    top = every_rule(shapes_model, shapes_x, None)
    bottom = every_rule(depth_model, x, seeds.pixel(*obj))
    for row in (top, bottom):
        c = row[0].extras["conservation"]
        parts = c["input"] + c["biases"] + c["dropped"] + c["stabilisers"]
        checks["LRP's account adds up to the seeded score"] = bool(np.allclose(parts, c["score"], rtol=1e-4))
        checks["DeepLift is complete"] = bool(np.abs(row[3].extras["completeness_error"]).max()
                                              <= 1e-3 * max(1.0, np.abs(row[3].extras["delta"]).max()))
    star, pixel = top[0].extras["conservation"], bottom[0].extras["conservation"]
    names = ["LRP epsilon_plus_flat", "LRP epsilon_gamma_box", "LRP epsilon_alpha2_beta1", "DeepLift",
             "DeepLiftShap", "GradientShap"]
    titles = [[f"{n}\n{a.seconds:.2f} s" for n, a in zip(names, row)] for row in (top, bottom)]
    fig = viz.grid([[a.map for a in top], [a.map for a in bottom]], images=[shapes_x, x], titles=titles,
                   row_titles=["shapes: predicted class", f"depth: pixel {obj}"], sign="all", colorbar=False,
                   panel_size=2.0)
    for ax in fig.panel_axes[1]:
        mark(ax, [obj])
    return [("rule_based.png", "Rule-based methods: relevance and DeepLift",
             ("The same inputs as above, signed (red: relevance for the output, blue: against it). LRP passes "
              "v * y down op by op with each op's rule: Zennit's composites epsilon_plus_flat (z+ on "
              "convolutions, Flat on the first), epsilon_gamma_box (Gamma, and z-box for an input in [0, 1]) and "
              "epsilon_alpha2_beta1. Its maps add up to the seeded score up to what the biases absorb: for the "
              f"star the score {float(star['score']):.2f} became {float(star['input']):.2f} on the input and "
              f"{float(star['biases']):.2f} in the biases; for the depth pixel {float(pixel['score']):.2f} m "
              f"became {float(pixel['input']):.2f} and {float(pixel['biases']):.2f} (extras['conservation']). "
              "DeepLift (from a black image) sums exactly to the score's change from the baseline; DeepLiftShap "
              "averages it over 8 noise images, GradientShap samples gradients between the image and those images "
              "(16 draws). The depth row's pixel maps stay cropped to the pixel's receptive field, as the gradient's "
              "do."), fig)]


def sanity_figure(model, x, checks):
    before = A.gradient(model, x).output
    check = A.randomisation_check(model, x, A.gradient)
    checks["weights put back after the sanity check"] = np.array_equal(A.gradient(model, x).output, before)
    maps = [check.original.map] + list(check.maps)
    titles = ["original model"] + [f"+ {name}\nSpearman {float(c):.2f}" for name, c in zip(check.layers,
                                                                                            check.correlations)]
    half = (len(maps) + 1) // 2
    fig = viz.grid([maps[:half], maps[half:]], images=[x, None], titles=[titles[:half], titles[half:]],
                   colorbar=False, panel_size=1.9)
    rho = np.asarray(check.correlations, np.float64).ravel()
    return [("sanity_check.png", "Sanity check: cascading randomisation",
             ("The gradient map of the star's predicted class while the classifier's layers are re-drawn at random "
              f"one by one, from the output layer ({check.layers[0]}) down to the first ({check.layers[-1]}) "
              "(Adebayo et al. 2018); each title gives the Spearman rank correlation of |map| with the original map. "
              "A map that explains the model must change when the model does; one that stayed the same would be "
              f"showing the image, not the network. Here the correlation goes from {rho[0]:.2f} after the first "
              f"step to {rho[-1]:.2f} once every layer is random."), fig)]


def photo_figure(shapes_model, digits_model):
    with cbook.get_sample_data("grace_hopper.jpg") as f:
        colour, note = viz.load_image(f, size=shapes_model.input_shape[1:])
    with cbook.get_sample_data("grace_hopper.jpg") as f:
        grey, grey_note = viz.load_image(f, size=digits_model.input_shape[1:], channels=1)
    rows, titles = [], []
    for model, image in ((shapes_model, colour), (digits_model, grey)):
        attr = A.gradient(model, image)
        p = softmax(attr.output)
        top = np.argsort(-p)[:2]
        rows.append([attr.map])
        titles.append(["; ".join(f"{model.classes[k]} {100 * p[k]:.0f}%" for k in top)])
    fig = viz.grid(rows, images=[colour, grey], titles=titles, sign="all",
                   row_titles=["shapes (64x64 RGB)", "digits (32x32 grey)"], panel_size=2.6)
    return [("photo.png", "A photo the models never saw",
             (f"Matplotlib's sample photo of Grace Hopper through the shape classifier ({note}) and the digit "
              f"classifier ({grey_note}), with the signed gradient of each model's top class (the top two guesses "
              "and their probabilities in the title). These models never saw a photo: they were trained only on "
              "generated shapes and on handwritten digits, so a confident probability means nothing here, and the "
              "maps show what drives an out-of-distribution guess: look for which edges and contrasts each model "
              "picks up, rather than for anything about a face."), fig)]


# ---------------------------------------------------------------- the page and the checks

INTRO = ("Every map on this page is what lands in x.grad after y.backward(gradient=v): the vector-Jacobian "
         "product v<sup>T</sup> dy/dx, the gradient of sum(v * y) with respect to the input image x. The seed v "
         "chooses what is explained: a one-hot v picks one class score of a classifier or one depth pixel, v = all "
         "ones the sum of a dense output, v = 1 on a mask the summed depth of a region. Unless a caption says "
         "otherwise, a map shows |v<sup>T</sup> dy/dx| summed over the colour channels, on its own scale "
         "(bright = large); signed maps use red for positive and blue for negative. The models are the three "
         "small CNNs shipped with this project (shapes, digits, depth), trained with its own autograd engine; the "
         "images are drawn from its data generators with fixed seeds. Made by samples/gallery.py.")


def write_index(out, entries):
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>saliency gallery</title>',
             ("<style>body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em;line-height:1.4}"
              "img{max-width:100%;border:1px solid #ccc}figure{margin:2.5em 0}figcaption{margin-top:.5em}</style>"),
             "</head><body>", "<h1>saliency gallery</h1>", f"<p>{INTRO}</p>"]
    for name, title, caption, _ in entries:
        parts += [f'<figure id="{html.escape(Path(name).stem)}">', f"<h2>{html.escape(title)}</h2>",
                  f'<img src="{html.escape(name)}" alt="{html.escape(title)}">',
                  f"<figcaption>{html.escape(caption)}</figcaption>", "</figure>"]
    parts.append("</body></html>")
    return write_text(out / "index.html", "\n".join(parts) + "\n")   # whole or not at all, as viz.save


def self_check(out, entries, checks):
    page = (out / "index.html").read_text(encoding="utf-8")
    for name, _, caption, _ in entries:
        png = out / name
        assert png.is_file() and png.stat().st_size > 0, f"{png} is missing or empty"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
        assert f'src="{name}"' in page, f"index.html does not show {name}"
        assert html.escape(caption) in page, f"index.html lacks the caption of {name}"
    linked = {p.split('"')[0] for p in page.split('src="')[1:]}
    assert linked == {name for name, *_ in entries}, f"index.html links {sorted(linked)}"
    assert len(page.split("<figcaption>")) - 1 == len(entries), "one caption per figure"
    for what, ok in checks.items():
        assert ok, f"self-check failed: {what}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gallery", help="folder for the PNGs and index.html (default: gallery/)")
    out = Path(parser.parse_args(argv).out)
    started = time.perf_counter()
    shapes, digits, depth = zoo.load("shapes"), zoo.load("digits"), zoo.load("depth")
    checks, entries = {}, []

    def emit(new):
        for name, _, _, fig in new:
            print(f"wrote {viz.save(fig, out / name, dpi=100)}", flush=True)
        entries.extend(new)

    new, shapes_x, shapes_map = shapes_figures(shapes, checks)
    emit(new)
    emit(digits_figures(digits, checks))
    scene = pick_scene()
    scene_x_before = scene[0].copy()
    new, object_map = depth_figures(depth, scene, checks)
    emit(new)
    emit(receptive_figure(depth, scene, checks))
    emit(look_figure(depth, checks))
    emit(channel_figures(shapes_x, shapes_map, scene, object_map))
    emit(methods_figure(shapes, shapes_x, depth, scene))
    emit(rules_figure(shapes, shapes_x, depth, scene, checks))
    emit(sanity_figure(shapes, shapes_x, checks))
    emit(photo_figure(shapes, digits))
    checks["methods leave the input alone"] = np.array_equal(scene[0], scene_x_before)
    print(f"wrote {write_index(out, entries)}")
    self_check(out, entries, checks)
    print(f"{len(entries)} figures and index.html in {time.perf_counter() - started:.1f} s; "
          f"self-check passed ({len(checks)} checks on the maps, every file written and linked)")


if __name__ == "__main__":
    main()
