"""What `y.backward(gradient=v)` computes, checked by hand.

    python samples/vjp_by_hand.py

backward(v) adds v^T J to x.grad, where J = dy/dx is the Jacobian: the seed v picks a weighted
sum of J's rows. Here J is built explicitly (one batched backward pass with the rows of the
identity as seeds) and compared with what backward leaves in x.grad.
"""
import numpy as np

import saliency as sl


def main():
    rng = np.random.default_rng(0)
    W = sl.tensor(rng.standard_normal((3, 4)).astype(np.float32))

    def f(x):
        return sl.tanh(x @ W.t())  # y = tanh(x W^T): 4 inputs, 3 outputs

    x = sl.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    y = f(x)
    J = sl.autograd.jacobian(f, x).numpy()  # (3, 4): row k = d y_k / d x
    print(f"y = {y.numpy()}\nJ = dy/dx =\n{J}\n")
    for v in ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], y.numpy().tolist()):
        x.grad = None
        y.backward(sl.tensor(v), retain_graph=True)
        by_hand = np.asarray(v, np.float32) @ J
        print(f"v = {np.round(v, 4)}\n  x.grad  = {x.grad.numpy()}\n  v^T J   = {by_hand}")
        assert np.allclose(x.grad.numpy(), by_hand, rtol=1e-5, atol=1e-6)
    print("\nx.grad equals v^T J for every seed v; with v = y it is the gradient of sum(y * y) / 2.")


if __name__ == "__main__":
    main()
