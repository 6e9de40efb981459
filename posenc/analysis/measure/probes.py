"""Probes of Wang & Chen, "What Do Position Embeddings Learn?" (EMNLP 2020), for any table.

* Absolute position regression: a linear (ridge) map from PE(p) to p, k-fold over *positions*
  (each fold holds out a random set of positions; the model never saw their rows). Mean absolute
  error in positions, next to the chance level of predicting the training positions' mean.
* Relative order classification: logistic regression on the concatenation [PE(i); PE(j)],
  label i < j. Trained on pairs of training positions, tested on pairs of held-out positions.
  Error rate; chance is 0.5.

Why held-out positions: with D >= N a random table lets a linear classifier give every position
its own score, so a random split of *pairs* (whose positions all occur in training) is separated
almost perfectly by a table that holds no position information at all. That number is reported
too (``random_pair_split_error``) as the caution it is.
"""

import numpy as np
import torch


def position_folds(n: int, folds: int, seed: int = 0) -> list:
    """``folds`` disjoint random sets of positions covering 0..n-1."""
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=gen)
    return [chunk.sort().values for chunk in torch.tensor_split(perm, folds)]


def _ridge_loo(x: torch.Tensor, y: torch.Tensor):
    """Ridge regression with an intercept; the penalty chosen from a grid by exact leave-one-out
    error on the training rows. Returns ``(predict, alpha)``."""
    x_mean, y_mean = x.mean(0), y.mean()
    xc, yc = x - x_mean, y - y_mean
    u, s, vh = torch.linalg.svd(xc, full_matrices=False)
    keep = s > s.max() * 1e-12
    u, s, vh = u[:, keep], s[keep], vh[keep]
    uty = u.T @ yc
    n = x.size(0)
    best = None
    for alpha in (s.max() ** 2) * torch.logspace(-12, 0, 13, dtype=torch.float64):
        shrink = s**2 / (s**2 + alpha)
        fitted = u @ (shrink * uty)
        h = (u**2 @ shrink) + 1.0 / n
        loo = ((yc - fitted) / (1 - h).clamp_min(1e-12)) ** 2
        err = float(loo.mean())
        if np.isfinite(err) and (best is None or err < best[0]):
            best = (err, float(alpha))
    alpha = best[1]
    coef = vh.T @ ((s / (s**2 + alpha)) * uty)

    def predict(z):
        return (z - x_mean) @ coef + y_mean

    return predict, alpha


def absolute_position_probe(table: torch.Tensor, folds: int = 5, seed: int = 0) -> dict:
    n = table.size(0)
    t = table.to(torch.float64)
    pos = torch.arange(n, dtype=torch.float64)
    abs_err, chance_err, alphas = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64), []
    for held in position_folds(n, folds, seed):
        train = torch.ones(n, dtype=torch.bool)
        train[held] = False
        predict, alpha = _ridge_loo(t[train], pos[train])
        alphas.append(alpha)
        abs_err[held] = (predict(t[held]) - pos[held]).abs()
        chance_err[held] = (pos[train].mean() - pos[held]).abs()
    mae, chance = float(abs_err.mean()), float(chance_err.mean())
    return {"folds": folds, "mae": mae, "chance_mae": chance,
            "mae_over_chance": mae / chance if chance else float("nan"),
            "ridge_alphas": alphas}


def _fit_logistic(x: torch.Tensor, y: torch.Tensor, l2: float = 1e-4, max_iter: int = 200):
    """L2-penalised logistic regression (intercept unpenalised); returns a predictor of y = 1.

    The objective is strictly convex, so both solvers reach the same optimum: damped Newton in
    float64 for up to 256 features (fast, few steps), L-BFGS beyond that (a Newton step would
    need a features x features Hessian per iteration)."""
    if x.size(1) <= 256:
        return _fit_logistic_newton(x.to(torch.float64), y.to(torch.float64), l2)
    w = torch.zeros(x.size(1), dtype=x.dtype, requires_grad=True)
    b = torch.zeros((), dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe", tolerance_grad=1e-9)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y) + l2 * (w @ w)
        loss.backward()
        return loss

    opt.step(closure)
    w, b = w.detach(), b.detach()
    return lambda z: (z.to(x.dtype) @ w + b) > 0


def _fit_logistic_newton(x: torch.Tensor, y: torch.Tensor, l2: float, max_iter: int = 50):
    n, f = x.shape
    xb = torch.cat([x, torch.ones(n, 1, dtype=x.dtype)], dim=1)
    penalty = torch.full((f + 1,), 2 * l2, dtype=x.dtype)
    penalty[-1] = 0.0
    theta = torch.zeros(f + 1, dtype=x.dtype)

    def loss(t):
        return float(torch.nn.functional.binary_cross_entropy_with_logits(xb @ t, y)) + l2 * float(t[:-1] @ t[:-1])

    current = loss(theta)
    for _ in range(max_iter):
        prob = torch.sigmoid(xb @ theta)
        grad = xb.T @ (prob - y) / n + penalty * theta
        hess = (xb * (prob * (1 - prob))[:, None]).T @ xb / n + torch.diag(penalty)
        hess += 1e-10 * torch.eye(f + 1, dtype=x.dtype)
        step = torch.linalg.solve(hess, grad)
        scale = 1.0
        while scale > 1e-6:
            candidate = theta - scale * step
            value = loss(candidate)
            if value <= current:
                break
            scale /= 2
        theta, improvement, current = candidate, current - value, value
        if improvement < 1e-12:
            break
    w, b = theta[:-1], theta[-1]
    return lambda z: (z.to(x.dtype) @ w + b) > 0


def _sample_pairs(positions: torch.Tensor, count: int, gen: torch.Generator):
    m = positions.numel()
    if m * (m - 1) <= count:
        i, j = torch.meshgrid(torch.arange(m), torch.arange(m), indexing="ij")
        keep = i != j
        order = torch.randperm(int(keep.sum()), generator=gen)  # shuffled: callers split by order
        return positions[i[keep][order]], positions[j[keep][order]]
    a = torch.randint(0, m, (count,), generator=gen)
    b = torch.randint(0, m - 1, (count,), generator=gen)
    b = b + (b >= a).long()  # uniform over ordered pairs with a != b
    return positions[a], positions[b]


def relative_order_probe(table: torch.Tensor, folds: int = 5, seed: int = 0, train_pairs: int = 8000,
                         test_pairs: int = 4000) -> dict:
    n = table.size(0)
    t = table.to(torch.float32)
    gen = torch.Generator().manual_seed(seed + 1)

    def features(tab, i, j):
        return torch.cat([tab[i], tab[j]], dim=1)

    def run(train_i, train_j, test_i, test_j, train_positions):
        mean = t[train_positions].mean(0)
        std = t[train_positions].std(0).clamp_min(1e-6)
        z = (t - mean) / std
        predict = _fit_logistic(features(z, train_i, train_j), (train_i < train_j).float())
        wrong = predict(features(z, test_i, test_j)) != (test_i < test_j)
        return wrong.float().sum().item(), wrong.numel()

    errors = total = 0
    for held in position_folds(n, folds, seed):
        train_mask = torch.ones(n, dtype=torch.bool)
        train_mask[held] = False
        train_pos = torch.nonzero(train_mask).flatten()
        if held.numel() < 2 or train_pos.numel() < 2:
            continue
        tri, trj = _sample_pairs(train_pos, train_pairs, gen)
        tei, tej = _sample_pairs(held, test_pairs, gen)
        e, c = run(tri, trj, tei, tej, train_pos)
        errors, total = errors + e, total + c

    # The misleading split, for contrast: random pairs over all positions, 80/20.
    all_pos = torch.arange(n)
    pi, pj = _sample_pairs(all_pos, train_pairs + test_pairs, gen)
    cut = int(0.8 * pi.numel())
    e_rand, c_rand = run(pi[:cut], pj[:cut], pi[cut:], pj[cut:], all_pos)
    return {"folds": folds, "error": errors / total if total else float("nan"), "chance_error": 0.5,
            "test_pairs": total, "random_pair_split_error": e_rand / c_rand}


def probes(table: torch.Tensor, folds: int = 5, seed: int = 0) -> dict:
    return {"absolute_position": absolute_position_probe(table, folds, seed),
            "relative_order": relative_order_probe(table, folds, seed)}


__all__ = ["absolute_position_probe", "position_folds", "probes", "relative_order_probe"]
