"""Slow, obviously-correct reference implementations (Python loops over sub-tensors)."""

import math

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


# ---- segment core: loops over segments, rows and columns ----

def segments_of(first_idx):
    bounds = [int(v) for v in first_idx]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def segment_reduce(data, first_idx, op):
    """op in sum / mean: float64 (complex128) sums of each segment's rows, 0 for empty segments."""
    wide = torch.complex128 if data.is_complex() else (torch.float64 if data.is_floating_point() else torch.int64)
    out = torch.zeros((len(first_idx) - 1, *data.shape[1:]), dtype=wide)
    for b, (start, stop) in enumerate(segments_of(first_idx)):
        for row in range(start, stop):
            out[b] += data[row].to(wide)
        if op == "mean" and stop > start:
            out[b] /= stop - start
    return out


def segment_extremum(data, first_idx, largest):
    """(values, arg) by scanning rows in order: the first strictly better value wins, the first NaN beats all."""
    flat = data.reshape(data.shape[0], math.prod(data.shape[1:]))
    values = torch.zeros((len(first_idx) - 1, flat.shape[1]), dtype=data.dtype)
    arg = torch.full((len(first_idx) - 1, flat.shape[1]), -1, dtype=torch.long)
    for b, (start, stop) in enumerate(segments_of(first_idx)):
        for c in range(flat.shape[1]):
            best = None
            for row in range(start, stop):
                v = flat[row, c].item()
                if best is None or (v != v and best == best) or (
                        v == v and best == best and (v > best if largest else v < best)):
                    best, arg[b, c] = v, row
            if best is not None:
                values[b, c] = best
    return values.reshape(len(first_idx) - 1, *data.shape[1:]), arg.reshape(len(first_idx) - 1, *data.shape[1:])


def segment_softmax(data, first_idx, log=False):
    """torch.softmax of each segment's rows along dim 0, in float64."""
    out = torch.empty(data.shape, dtype=torch.float64)
    for start, stop in segments_of(first_idx):
        piece = data[start:stop].double()
        out[start:stop] = torch.log_softmax(piece, 0) if log else torch.softmax(piece, 0)
    return out


def segment_scan(data, first_idx, op, reverse=False, exclusive=False):
    """torch.cumsum / cumprod / logcumsumexp of each segment's rows along dim 0, one segment at a time, in float64
    (complex128 for complex data; integers in int64); reverse: the flipped rows scanned and flipped back; exclusive:
    each row gets the scan of the rows before it (0 / 1 on the first row)."""
    wide = torch.complex128 if data.is_complex() else torch.float64 if data.is_floating_point() else torch.long
    out = torch.empty(data.shape, dtype=wide)
    scan = {"cumsum": torch.cumsum, "cumprod": torch.cumprod, "logcumsumexp": torch.logcumsumexp}[op]
    for start, stop in segments_of(first_idx):
        piece = data[start:stop].to(wide)
        if reverse:
            piece = piece.flip(0)
        result = scan(piece, 0)
        if exclusive:
            identity = torch.full_like(result[:1], 0 if op == "cumsum" else 1)
            result = torch.cat([identity, result[:-1]])
        out[start:stop] = result.flip(0) if reverse else result
    return out


def segment_cum_extremum(data, first_idx, largest, reverse=False):
    """(values, arg) of torch.cummax / cummin per segment; arg as a packed row (reverse: of the flipped rows)."""
    values, arg = torch.empty_like(data), torch.empty(data.shape, dtype=torch.long)
    for start, stop in segments_of(first_idx):
        if stop == start:
            continue
        piece = data[start:stop].flip(0) if reverse else data[start:stop]
        v, i = torch.cummax(piece, 0) if largest else torch.cummin(piece, 0)
        rows = (stop - 1 - i) if reverse else (start + i)
        values[start:stop] = v.flip(0) if reverse else v
        arg[start:stop] = rows.flip(0) if reverse else rows
    return values, arg


def segment_scan_differentiable(data, first_idx, op, reverse=False, exclusive=False):
    """segment_scan through torch's own differentiable scans (for gradients): segment by segment, no float64 copy."""
    scan = {"cumsum": torch.cumsum, "cumprod": torch.cumprod, "logcumsumexp": torch.logcumsumexp}[op]
    pieces = []
    for start, stop in segments_of(first_idx):
        piece = data[start:stop].flip(0) if reverse else data[start:stop]
        result = scan(piece, 0)
        if exclusive:
            result = torch.cat([torch.full_like(result[:1], 0 if op == "cumsum" else 1), result[:-1]])
        pieces.append(result.flip(0) if reverse else result)
    return torch.cat(pieces)


def segment_cum_extremum_differentiable(data, first_idx, largest, reverse=False):
    """The values of torch.cummax / cummin per segment, through torch's autograd."""
    pieces = []
    for start, stop in segments_of(first_idx):
        piece = data[start:stop].flip(0) if reverse else data[start:stop]
        values = (torch.cummax(piece, 0) if largest else torch.cummin(piece, 0)).values
        pieces.append(values.flip(0) if reverse else values)
    return torch.cat(pieces)


def segment_arange(first_idx):
    return torch.tensor([row - start for start, stop in segments_of(first_idx) for row in range(start, stop)],
                        dtype=torch.long)


def segment_expand(values, first_idx):
    rows = [values[b] for b, (start, stop) in enumerate(segments_of(first_idx)) for _ in range(start, stop)]
    return torch.stack(rows) if rows else values.new_empty((0, *values.shape[1:]))


def segment_ids(first_idx):
    return torch.tensor([b for b, (start, stop) in enumerate(segments_of(first_idx)) for _ in range(start, stop)],
                        dtype=torch.long)


def random_first_idx(generator, segments, max_len, allow_empty=True):
    low = 0 if allow_empty else 1
    lengths = torch.randint(low, max_len + 1, (segments,), generator=generator)
    return torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
