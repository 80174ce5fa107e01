"""The segment core: offsets and reductions over ``first_idx``."""

import torch


def segment_sum(data: torch.Tensor, first_idx: torch.Tensor) -> torch.Tensor:
    """Sums rows ``[first_idx[b], first_idx[b + 1])`` of ``data`` (N, D...) into row b of (B, D...).

    Differentiable (its backward is :func:`torch_ragged.tile_to_packed`).

    >>> import torch, torch_ragged
    >>> torch_ragged.segment_sum(torch.arange(5.0), torch.tensor([0, 2, 2, 5]))
    tensor([1., 0., 9.])
    """
    return torch.ops.torch_ragged.segment_sum(data, first_idx)
