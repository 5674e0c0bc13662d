"""The global method: one kernel PCA per group of items whose samples have the same
dimension (method 'global', and patch sets under any method), fitted on training
patches sampled from every item of the group (or reused, or given back), then every
item denoised with it at each rank.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .core.kpca import WIDTH_SCALE_IMAGE_PATCHES, WIDTH_SCALE_SAMPLES
from .core.patches import patch_positions
from .core.progress import check_cancel, report
from .estimator import KernelPCA
from .params import DenoiseParams
from .prepare import PreparedItem
from .results import global_ranks, RunContext
from .working import cast_like
from .tiling import denoise_tiled, denoise_with_model, GLOBAL_PATCH_SIZE, training_patches


#: the global method's pre-image iteration cap when ``preimage_iterations`` is None
GLOBAL_PREIMAGE_ITERATIONS = 100


@dataclass
class GlobalGroup:
    """The items one global kernel PCA serves and how their patches are cut.

    The items one global kernel PCA serves (samples of one dimension) and how
    their training patches are cut."""

    key: tuple  # ("patchset", sample size) or ("image", channels): SetResult.models' keys
    items: list[PreparedItem]
    patch_size: int
    stride: int
    ranks: tuple[int, ...]  # the explicit ranks, ascending
    auto: bool  # patch sets: also the rank from the noise level, stored under None

    @property
    def is_patchset(self) -> bool:
        """Whether the group's items are patch sets (not images)."""
        return self.key[0] == "patchset"

    @property
    def step(self) -> int:
        """Pixels between candidate training patches."""
        return max(1, self.stride // 2)

    @property
    def keys(self) -> tuple:
        """The result keys of the group's items."""
        return self.ranks + ((None,) if self.auto else ())

    def candidates(self, item: PreparedItem) -> int:
        """How many training samples an item offers."""
        if item.is_patchset:
            return item.data.shape[0]
        H, W = item.data.shape[:2]
        p, step = self.patch_size, self.step
        return len(patch_positions(H, p, step)) * len(patch_positions(W, p, step))


@dataclass
class GlobalFit:
    """A group's kernel PCA, fitted here or given back.

    A group's kernel PCA: fitted here, with the noise level and the number of
    components it was fitted at, or given back (``fitted_models``), which says both."""

    model: KernelPCA
    noise_sigma: float | None = None
    n_components: int | None = None

    def auto_rank(self) -> int:
        """The rank from the noise level, out of the components fitted."""
        sigma = self.model.noise_sigma if self.noise_sigma is None else self.noise_sigma
        k = self.model.alphas_.shape[1] if self.n_components is None else self.n_components
        return min(self.model.noise_rank(sigma), k)


def global_groups(params: DenoiseParams, items: list[PreparedItem]) -> list[GlobalGroup]:
    """Group the items a global kernel PCA serves by their samples' dimension.

    The items a global kernel PCA serves, by the dimension of their samples, the
    largest group first."""
    members: dict = {}
    for item in items:
        if item.is_patchset:
            members.setdefault(("patchset", item.data.shape[1]), []).append(item)
        elif params.method == "global":
            members.setdefault(("image", item.channels), []).append(item)
    p = params.patch_size or GLOBAL_PATCH_SIZE
    stride = params.stride or max(1, p // 2)
    groups = []
    for key in sorted(members, key=lambda k: -len(members[k])):
        # patch sets: None = the rank from the noise level, chosen after the fit
        auto = members[key][0].is_patchset and None in params.ranks
        ranks = (tuple(sorted({int(r) for r in params.ranks if r is not None})) if auto
                 else global_ranks(params))
        groups.append(GlobalGroup(key, members[key], p, stride, ranks, auto))
    return groups


def run_global(run: RunContext, group: GlobalGroup, *, prior: KernelPCA | None = None,
                given: KernelPCA | None = None, fit_only: bool = False) -> KernelPCA:
    """Fit a group's kernel PCA and, unless ``fit_only``, denoise its items.

    Fit the group's kernel PCA (reusing ``prior`` when it can, or taking ``given``,
    fitted on the whole set) and, unless ``fit_only``, denoise its items with it."""
    if given is not None:
        fit = GlobalFit(given.set_params(progress=run.clock, cancel=run.cancel))
    else:
        fit = _fit_global(run, group, prior)
    auto_rank = None
    if group.auto:
        # the automatic result is keyed None ("auto"), as the grouped method's is
        auto_rank = fit.auto_rank()
        if given is None:
            run.resolved["models"][-1]["auto_rank"] = auto_rank
    if given is None and "gamma" not in run.resolved:
        run.resolved.update(run.resolved["models"][-1])
    if not fit_only:
        _denoise_group(run, group, fit.model, auto_rank)
    return fit.model


def _fit_global(run: RunContext, group: GlobalGroup, prior: KernelPCA | None) -> GlobalFit:
    """The kernel PCA of a group's training patches, sampled from every item in
    proportion to the samples it offers; described in ``run.resolved['models']``."""
    params = run.params
    rng = np.random.default_rng(params.seed)
    counts = [group.candidates(item) for item in group.items]
    total = sum(counts)
    n_train = min(params.n_train, total)
    take = [max(1, round(n_train * n / total)) for n in counts]
    # only the sampled patches are built (bounded memory whatever the image size)
    train = np.concatenate([
        item.data[idx] if item.is_patchset
        else training_patches(item.data, group.patch_size, group.step, idx, item.vst)
        for item, n, t in zip(group.items, counts, take)
        for idx in (rng.choice(n, min(t, n), replace=False),)])
    ranks = group.ranks
    if ranks and max(ranks) > train.shape[0]:
        raise ValueError(
            f"rank {max(ranks)} is more than the {train.shape[0]} training samples; "
            "ask for smaller ranks or more training patches"
        )
    # the automatic rank is chosen among at most half the training samples
    fit_k = max(ranks + ((max(1, train.shape[0] // 2),) if group.auto else ()))
    n_landmarks = params.n_landmarks
    if n_landmarks is not None:
        # a set smaller than asked for: every training patch is a landmark (exact)
        n_landmarks = min(n_landmarks, train.shape[0])
        if n_landmarks < max(ranks, default=1):
            raise ValueError(
                f"n_landmarks={params.n_landmarks} is fewer than rank {max(ranks)}; ask for "
                f"at least {max(ranks)} landmarks or smaller ranks")
        fit_k = min(fit_k, n_landmarks)
    sigma = float(np.median([item.result.noise_sigma for item in group.items]))
    if params.gamma is not None:
        _check_gamma(params.gamma, train)
    reuse = (prior is not None and getattr(prior, "alphas_", None) is not None
             and prior.alphas_.shape[1] >= fit_k and prior.X_fit_.shape == train.shape
             and prior.kernel == params.kernel
             and getattr(prior, "n_landmarks_", None) == n_landmarks)
    if reuse:
        # one eigendecomposition serves every smaller rank: no refit
        model = prior.set_params(progress=run.clock, cancel=run.cancel)
        report(run.clock, "eigensolver", 1, 1, eigenvalues=model.eigenvalues_,
               message="reused the fitted model")
    else:
        model = KernelPCA(
            n_components=fit_k, kernel=params.kernel,
            gamma="noise" if params.gamma is None and params.kernel == "rbf" else params.gamma,
            noise_sigma=sigma, tol=1e-4, gram_dtype="float32",
            width_scale=WIDTH_SCALE_SAMPLES if group.is_patchset else WIDTH_SCALE_IMAGE_PATCHES,
            eigen_solver=params.eigen_solver, preimage_tol=params.preimage_tol,
            preimage_max_iter=params.preimage_iterations or GLOBAL_PREIMAGE_ITERATIONS,
            random_state=params.seed,
            progress=run.clock, cancel=run.cancel, n_landmarks=n_landmarks,
        )
        model.fit(train)
    run.resolved.setdefault("models", []).append(dict(
        items=[item.result.name for item in group.items],
        gamma=getattr(model, "gamma_", None), patch_size=group.patch_size, stride=group.stride,
        n_train=int(train.shape[0]), n_landmarks=n_landmarks,
        solver="reused" if reuse else model.solver_,
        noise_sigma=sigma, eigensolver_iterations=0 if reuse else model.n_iter_,
    ))
    return GlobalFit(model, sigma, fit_k)


def _check_gamma(gamma: float, X: np.ndarray) -> None:
    """Refuse a kernel width that makes the Gram matrix degenerate, before the fit."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, X.shape[0], size=(min(2000, 4 * X.shape[0]), 2))
    d2 = np.sum((X[idx[:, 0]] - X[idx[:, 1]]) ** 2, axis=1)
    d2 = d2[d2 > 0]
    med = float(np.median(d2)) if d2.size else 0.0
    if med == 0.0:
        return
    g = gamma * med
    if g > 50:
        raise ValueError(
            f"gamma={gamma:g} makes the kernel matrix the identity (gamma x median squared patch "
            f"distance = {g:.3g}, every patch unlike every other); use gamma about "
            f"{1 / med:.3g} or omit it for the automatic width")
    if g < 1e-9:
        raise ValueError(
            f"gamma={gamma:g} makes the kernel matrix constant (gamma x median squared patch "
            f"distance = {g:.3g}, every patch alike); use gamma about {1 / med:.3g} or omit it "
            "for the automatic width")


def _denoise_group(run: RunContext, group: GlobalGroup, model: KernelPCA,
                   auto_rank: int | None = None) -> None:
    """Outputs per rank for every item of the group; the ``auto_rank`` result is stored
    under ``None``."""
    ranks = group.ranks
    keys = {r: [r] for r in ranks}
    if auto_rank is not None:
        keys.setdefault(auto_rank, []).append(None)
        ranks = tuple(sorted(keys))
    for k, item in enumerate(group.items):
        check_cancel(run.cancel)
        res = item.result
        t = time.perf_counter()
        if item.is_patchset:
            outs, stats = denoise_with_model(model, item.data, ranks, run.cancel)
            outs = {r: cast_like(O.reshape(item.source.shape), item.source)
                    for r, O in outs.items()}
        else:
            outs, stats = denoise_tiled(item.data, res.noise_sigma, run.params, model=model,
                                        ranks=ranks, vst=item.vst, progress=run.clock,
                                        cancel=run.cancel, tile_map=run.tile_map)
            report(run.clock, "reassembly", 1, 1)
        for r, O in outs.items():
            for j, key in enumerate(keys[r]):
                res.outputs[key] = O if j == 0 else O.copy()
        res.stats["preimage"] = {key: v for r, v in stats.items() for key in keys[r]}
        res.seconds = time.perf_counter() - t
        report(run.clock, "image", k + 1, len(group.items))
