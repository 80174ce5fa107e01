"""Random calls of the segment, sparse, tiles and container families, each with the outcome an independent
reference gives (test_fuzz_bad_input.py runs them in child processes). A call is a small JSON-able spec drawn from
legal and illegal forms; `outcome(family, spec)` runs it through torch_ragged and through the reference (loops,
torch.sparse with its invariant checks, numpy tile loops) and reports both: the reference raising means the call is
illegal, and ours must then raise a clear error; the reference returning means ours must return the same result."""

import numpy as np

BAD_OFFSET_LISTS = ["start_1", "falling", "short_end", "long_end", "float", "bool", "negative", "huge", "empty"]


# ---- drawing calls ----

def draw_segment_call(rng):
    rows_per_segment = [int(v) for v in rng.integers(0, 5, int(rng.integers(0, 6)))]
    first_idx = [0, *np.cumsum(rows_per_segment).tolist()]
    width = int(rng.choice([1, 3]))
    damage = None if rng.random() < 0.6 else str(rng.choice(BAD_OFFSET_LISTS))
    op = str(rng.choice(["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_softmax",
                         "segment_log_softmax", "segment_expand", "segment_ids", "segment_cumsum",
                         "segment_cumprod", "segment_cummax", "segment_logcumsumexp", "segment_arange"]))
    return {"op": op, "first_idx": damaged_offsets(first_idx, damage), "rows": first_idx[-1], "width": width,
            "seed": int(rng.integers(1 << 30)), "damage": damage}


def damaged_offsets(first_idx, damage):
    offsets = list(first_idx)
    if damage == "start_1":
        offsets[0] = 1
    elif damage == "falling" and len(offsets) > 2:
        offsets[1], offsets[2] = offsets[2] + 1, offsets[1]
    elif damage == "short_end":
        offsets[-1] -= 1
    elif damage == "long_end":
        offsets[-1] += 1
    elif damage == "float":
        offsets[-1] = offsets[-1] + 0.5
    elif damage == "bool":
        offsets = [bool(v % 2) for v in offsets]
    elif damage == "negative" and len(offsets) > 1:
        offsets[1] = -1
    elif damage == "huge":
        offsets[-1] = 2**62
    elif damage == "empty":
        offsets = []
    return offsets


def draw_sparse_call(rng):
    sparse_sizes = [int(v) for v in rng.integers(1, 5, int(rng.integers(1, 4)))]
    dense_sizes = [] if rng.random() < 0.7 else [2]
    nnz = int(rng.integers(0, 12))
    indices = [[int(v) for v in rng.integers(0, size, nnz)] for size in sparse_sizes]
    if nnz and rng.random() < 0.3:  # an index out of range, in any sparse dim
        dim, entry = int(rng.integers(len(sparse_sizes))), int(rng.integers(nnz))
        indices[dim][entry] = int(rng.choice([-1, sparse_sizes[dim], 2**40]))
    ndim = len(sparse_sizes) + len(dense_sizes)
    op = str(rng.choice(["coalesce", "sum", "to_dense", "index_select", "softmax", "log_softmax", "mm"]))
    spec = {"op": op, "indices": indices, "sizes": sparse_sizes + dense_sizes, "nnz": nnz,
            "seed": int(rng.integers(1 << 30)), "dim": int(rng.integers(-ndim, ndim))}
    if op == "sum":
        spec["dims"] = None if rng.random() < 0.3 else sorted({int(d) for d in rng.integers(0, ndim, 2)})
    if op == "index_select":
        size = spec["sizes"][spec["dim"]]
        spec["index"] = [int(v) for v in rng.integers(-size - 1, size + 1, int(rng.integers(0, 4)))]
    if op == "mm":
        spec["k"] = int(rng.integers(1, 3))
    return spec


def draw_tiles_call(rng):
    dims = int(rng.integers(1, 3))
    tile = [int(v) for v in rng.integers(1, 4, dims)]
    lo = [int(v) for v in rng.integers(-3, 3, dims)]
    hi = [a + int(v) for a, v in zip(lo, rng.integers(1, 8, dims), strict=True)]
    if rng.random() < 0.1:
        hi[0] = lo[0]  # an empty bound: illegal
    count = int(rng.integers(0, 5))
    origins = [[int(v) for v in rng.integers(-4, 8, dims)] for _ in range(count)]
    if count and rng.random() < 0.2:  # far outside the bound, or at the edge of int64
        origins[0][0] = int(rng.choice([-2**40, 2**40, -2**63, 2**63 - 2]))
    op = str(rng.choice(["tiles_to_dense", "tiles_to_dense_sum", "dense_to_tiles", "dense_to_tiles_owned",
                         "tiles_box_filter"]))
    index = str(rng.choice(["none", "none", "right", "other_origins", "other_bound"]))
    return {"op": op, "tile": tile, "lo": lo, "hi": hi, "origins": origins, "index": index,
            "seed": int(rng.integers(1 << 30))}


def draw_container_call(rng):
    lengths = [int(v) for v in rng.integers(0, 4, int(rng.integers(1, 5)))]
    op = str(rng.choice(["sum", "mean", "amax", "padded", "mask", "index", "softmax", "from_padded"]))
    damages = {"from_padded": ["float_length", "bool_lengths"], "mask": ["mask_extra"],
               "index": ["index_out_of_range", "index_float"]}.get(op, [])
    damage = str(rng.choice(damages)) if damages and rng.random() < 0.4 else None
    return {"op": op, "lengths": lengths, "damage": damage, "seed": int(rng.integers(1 << 30)),
            "index": [int(v) for v in rng.integers(-len(lengths), len(lengths), 2)]}


DRAW = {"segment": draw_segment_call, "sparse": draw_sparse_call, "tiles": draw_tiles_call,
        "container": draw_container_call}


# ---- references and our calls ----

def _data(seed, shape):
    import torch

    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def segment_pair(spec):
    """(ours, reference) thunks for a segment call."""
    import reference as ref
    import torch_ragged

    offsets, op = spec["first_idx"], spec["op"]
    data = _data(spec["seed"], (spec["rows"], spec["width"]))
    values = _data(spec["seed"], (max(len(offsets) - 1, 0), spec["width"]))

    def checked_offsets(rows):
        ok = (len(offsets) >= 1 and all(isinstance(v, int) and not isinstance(v, bool) for v in offsets)
              and offsets[0] == 0 and all(a <= b for a, b in zip(offsets, offsets[1:], strict=False))
              and (rows is None or offsets[-1] == rows))
        if not ok:
            raise ValueError("illegal first_idx")
        if offsets[-1] >= 2**40:  # the loops below would run for ever; no output of 2^40 rows can be allocated
            raise ValueError("an output of 2^40 rows or more")
        return offsets

    def reference():
        if op == "segment_ids":
            return ref.segment_ids(checked_offsets(None))
        if op == "segment_arange":
            return ref.segment_arange(checked_offsets(None))
        if op in ("segment_cumsum", "segment_cumprod", "segment_logcumsumexp"):
            return ref.segment_scan(data, checked_offsets(spec["rows"]), op.split("_")[1])
        if op == "segment_cummax":
            return ref.segment_cum_extremum(data, checked_offsets(spec["rows"]), True)
        if op == "segment_expand":
            return ref.segment_expand(values, checked_offsets(None))
        fi = checked_offsets(spec["rows"])
        if op in ("segment_sum", "segment_mean"):
            return ref.segment_reduce(data, fi, op.split("_")[1])
        if op in ("segment_max", "segment_min"):
            return ref.segment_extremum(data, fi, op == "segment_max")
        return ref.segment_softmax(data, fi, log=op == "segment_log_softmax")

    def ours():
        fn = getattr(torch_ragged, op)
        if op in ("segment_ids", "segment_arange"):
            return fn(offsets)
        if op == "segment_expand":
            return fn(values, offsets)
        result = fn(data, offsets)
        return tuple(result) if op in ("segment_max", "segment_min", "segment_cummax") else result

    return ours, reference


def sparse_pair(spec):
    import torch
    import torch_ragged

    sizes, nnz = spec["sizes"], spec["nnz"]
    indices = torch.tensor(spec["indices"], dtype=torch.long).reshape(len(spec["indices"]), nnz)
    sparse_dim = indices.shape[0]
    values = _data(spec["seed"], (nnz, *sizes[sparse_dim:]))
    op, dim = spec["op"], spec["dim"]
    dense = _data(spec["seed"] + 1, (sizes[-1], spec.get("k", 1)))

    def tensor(checked):
        return torch.sparse_coo_tensor(indices, values, sizes, check_invariants=checked)

    def reference():
        s = tensor(True)  # torch's invariant check raises for an index out of range
        if op == "coalesce":
            return s.coalesce()
        if op == "sum":
            return torch.sparse.sum(s) if spec["dims"] is None else torch.sparse.sum(s, spec["dims"])
        if op == "to_dense":
            return s.to_dense()
        if op == "index_select":
            index = torch.tensor(spec["index"], dtype=torch.long)
            if index.numel() and not (-sizes[dim] <= int(index.min()) and int(index.max()) < sizes[dim]):
                raise IndexError("index out of range")
            return s.index_select(dim, index)
        if op in ("softmax", "log_softmax"):
            return getattr(torch.sparse, op)(s, dim)
        if s.dim() != 2 or s.dense_dim():
            raise ValueError("mm needs a 2-D sparse matrix")
        return torch.sparse.mm(s, dense)

    def ours():
        s = tensor(False)
        if op == "coalesce":
            return torch_ragged.sparse.coalesce(s)
        if op == "sum":
            return torch_ragged.sparse.sum(s, spec["dims"])
        if op == "to_dense":
            return torch_ragged.sparse.to_dense(s)
        if op == "index_select":
            return torch_ragged.sparse.index_select(s, dim, spec["index"])
        if op in ("softmax", "log_softmax"):
            return getattr(torch_ragged.sparse, op)(s, dim)
        return torch_ragged.sparse.mm(s, dense)

    return ours, reference


def tiles_pair(spec):
    import torch
    from test_tiles import ref_correlate, ref_to_dense, ref_to_tiles
    from torch_ragged import tiles

    tile, lo, hi, op = spec["tile"], spec["lo"], spec["hi"], spec["op"]
    dims, count = len(tile), len(spec["origins"])
    origins = torch.tensor(spec["origins"], dtype=torch.long).reshape(count, dims)
    pages = _data(spec["seed"], (count, *tile))
    extent = [max(b - a, 0) for a, b in zip(lo, hi, strict=True)]
    dense = _data(spec["seed"] + 1, extent)
    index = {"none": None, "right": lambda: tiles.tiles_index(origins, tile, lo, hi),
             "other_origins": lambda: tiles.tiles_index(origins + 1, tile, lo, hi),
             "other_bound": lambda: tiles.tiles_index(origins, tile, lo, [b + 1 for b in hi])}[spec["index"]]
    wrong_index = spec["index"] in ("other_origins", "other_bound")

    def reference():
        if any(a >= b for a, b in zip(lo, hi, strict=True)):
            raise ValueError("empty bound")
        if wrong_index and not (spec["index"] == "other_origins" and count == 0):
            raise ValueError("an index built for other tiles")
        radius = 1 if op == "tiles_box_filter" else 0
        if any(o - radius < -2**63 or o + t + radius > 2**63 - 1
               for origin in spec["origins"] for o, t in zip(origin, tile, strict=True)):
            raise ValueError("a tile's (or halo's) box outside int64")
        extreme = any(abs(o) >= 2**62 for origin in spec["origins"] for o in origin)
        far = any(abs(o) >= 2**30 for origin in spec["origins"] for o in origin)
        if extreme or (far and op == "tiles_box_filter"):  # beyond the loop references' int64 arithmetic, or
            return "a result"  # a canvas spanning the far tile (ref_correlate): only the outcome kind is compared
        if op.startswith("tiles_to_dense"):
            return torch.from_numpy(ref_to_dense(pages.numpy(), spec["origins"], lo, hi, -1.0,
                                                 "sum" if op.endswith("sum") else "first")[0])
        if op.startswith("dense_to_tiles"):
            return torch.from_numpy(ref_to_tiles(dense.numpy(), spec["origins"], tile, lo, -1.0,
                                                 owned_only=op.endswith("owned")))
        weight = np.full([3] * dims, 1.0 / 3**dims)
        return torch.from_numpy(ref_correlate(pages.numpy(), spec["origins"], weight, lo, hi, 0.0, "tiles"))

    def ours():
        given = index() if index is not None else None
        if op.startswith("tiles_to_dense"):
            return tiles.tiles_to_dense(pages, origins, lo, hi, -1.0, "sum" if op.endswith("sum") else "first",
                                        index=given)
        if op.startswith("dense_to_tiles"):
            return tiles.dense_to_tiles(dense, origins, tile, lo, -1.0, owned_only=op.endswith("owned"), index=given)
        return tiles.tiles_box_filter(pages, origins, lo, hi, index=given)

    return ours, reference


def container_pair(spec):
    import torch
    from torch_ragged import RaggedTensor

    lengths, damage, op = list(spec["lengths"]), spec["damage"], spec["op"]
    members = [_data(spec["seed"] + i, (n, 2)) for i, n in enumerate(lengths)]
    index = list(spec["index"])
    if damage == "float_length":
        lengths[0] = lengths[0] + 0.5
    if damage == "bool_lengths":
        lengths = torch.tensor(lengths) > 0
    if damage == "index_out_of_range":
        index = [len(members)]
    if damage == "index_float":
        index = [0.5]
    longest = max((m.shape[0] for m in members), default=0)
    padded = torch.stack([torch.cat([m, m.new_zeros(longest - m.shape[0], 2)]) for m in members])

    def reference():
        if op == "from_padded":
            if damage in ("float_length", "bool_lengths"):
                raise TypeError("lengths must be integers")
            return torch.cat(members)
        if op == "mask" and damage == "mask_extra":
            raise ValueError("one max_shape entry per ragged dim")
        if op == "mask":
            return torch.stack([torch.arange(longest) < m.shape[0] for m in members])
        if op == "padded":
            return padded
        if op == "index":
            if any(not isinstance(i, int) for i in index) or any(not -len(members) <= i < len(members)
                                                                 for i in index):
                raise IndexError("member index")
            return torch.cat([members[i] for i in index])
        if op == "softmax":
            return torch.cat([torch.softmax(m, 0) for m in members])
        reduce = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax}[op]
        return torch.stack([reduce(m, 0) if m.shape[0] else m.new_zeros(2) for m in members])

    def ours():
        if op == "from_padded":
            return RaggedTensor.from_padded(padded, lengths).values
        r = RaggedTensor.from_list(members)
        if op == "mask":
            return r.mask([longest, 1] if damage == "mask_extra" else None)
        if op == "padded":
            return r.padded(0.0)
        if op == "index":
            return r[index].values
        if op == "softmax":
            return r.softmax().values
        return getattr(r, op)()

    return ours, reference


PAIRS = {"segment": segment_pair, "sparse": sparse_pair, "tiles": tiles_pair, "container": container_pair}


# ---- comparing ----

def _leaves(value):
    import torch

    if isinstance(value, torch.Tensor) and value.layout == torch.sparse_coo:
        value = value.coalesce()
        return [value.indices(), value.values()]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def same_result(ours, expected) -> bool:
    import torch

    if isinstance(expected, str):  # "a result": only the kind of outcome is known
        return True
    ours, expected = _leaves(ours), _leaves(expected)
    if len(ours) != len(expected):
        return False
    for a, b in zip(ours, expected, strict=True):
        if a.shape != b.shape:
            return False
        if a.is_floating_point() or b.is_floating_point():
            if not torch.allclose(a.double(), b.double(), rtol=1e-9, atol=1e-9, equal_nan=True):
                return False
        elif not torch.equal(a.long(), b.long()):
            return False
    return True


def outcome(family, spec, outcome_of):
    """What our call did (outcome_of's dict), with the reference's verdict under "reference"."""
    ours, reference = PAIRS[family](spec)
    try:
        expected = reference()
    except Exception as error:  # noqa: BLE001 (the reference's exception is the verdict)
        expected = error
    result = outcome_of(family, lambda: ours(), ())
    if isinstance(expected, Exception):
        result["reference"] = f"raised {type(expected).__name__}"
    elif "returned" in result:
        result["reference"] = "same result" if same_result(ours(), expected) else \
            f"a different result: expected {_short(expected)}, got {_short(ours())}"
    else:
        result["reference"] = "a result"
    return result


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."
