"""Slow, obviously-correct reference implementations (Python loops over sub-tensors)."""

import torch


def shapes_of(tensor_list):
    return [tuple(t.shape[:-1]) for t in tensor_list]


def max_shape_of(shapes, rank, max_shape=None):
    out = []
    for j in range(rank):
        largest = max((s[j] for s in shapes), default=0)
        requested = None if max_shape is None else max_shape[j]
        out.append(largest if requested in (None, -1) else requested)
    return out


def region(shape, max_shape, side):
    """The slices of a padded item that hold a sub-tensor of `shape`."""
    if side == "right":
        return tuple(slice(0, s) for s in shape)
    return tuple(slice(m - s, m) for s, m in zip(shape, max_shape, strict=True))


def list_to_padded(tensor_list, padding_value, max_shape=None, side="right"):
    shapes = shapes_of(tensor_list)
    rank = tensor_list[0].dim() - 1
    dims = max_shape_of(shapes, rank, max_shape)
    out = torch.full((len(tensor_list), *dims, tensor_list[0].shape[-1]), padding_value,
                     dtype=tensor_list[0].dtype)
    for i, t in enumerate(tensor_list):
        out[(i, *region(t.shape[:-1], dims, side))] = t
    return out, torch.tensor(shapes, dtype=torch.long).reshape(len(tensor_list), rank)


def list_to_packed(tensor_list):
    rows = [t.reshape(-1, t.shape[-1]) for t in tensor_list]
    return torch.cat(rows), torch.tensor(shapes_of(tensor_list), dtype=torch.long).reshape(len(tensor_list), -1)


def first_idx_of(shape_per_tensor):
    counts = [1] * shape_per_tensor.shape[0]
    for i, shape in enumerate(shape_per_tensor.tolist()):
        for s in shape:
            counts[i] *= s
    out = [0]
    for c in counts:
        out.append(out[-1] + c)
    return torch.tensor(out, dtype=torch.long)


def packed_to_list(packed, shape_per_tensor, first_idx):
    out = []
    for i, shape in enumerate(shape_per_tensor.tolist()):
        start, stop = int(first_idx[i]), int(first_idx[i + 1])
        out.append(packed[start:stop].reshape(*shape, packed.shape[-1]))
    return out


def padded_to_list(padded, shape_per_tensor, side="right"):
    dims = list(padded.shape[1:-1])
    return [padded[(i, *region(shape, dims, side))] for i, shape in enumerate(shape_per_tensor.tolist())]


def tile_to_packed(values, numel_per_tensor):
    rows = []
    for i, n in enumerate(numel_per_tensor.tolist()):
        rows += [values[i]] * n
    trailing = values.shape[1:] if values.dim() > 1 else (1,)
    if not rows:
        return values.new_empty((0, *trailing))
    return torch.stack(rows).reshape(len(rows), *trailing)


def random_batch(generator, batch, rank, elem, dtype, max_size=5, allow_empty=True):
    """A list of `batch` random tensors of shape (random sizes..., elem)."""
    low = 0 if allow_empty else 1
    tensors = []
    for _ in range(batch):
        shape = [int(torch.randint(low, max_size + 1, (1,), generator=generator)) for _ in range(rank)]
        data = torch.randint(-50, 50, (*shape, elem), generator=generator)
        tensors.append(data.to(dtype) if dtype != torch.bool else data > 0)
    return tensors
