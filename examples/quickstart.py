"""torch_ragged quick start: point clouds of different sizes, packed, padded (right and left), unpadded,
reduced per cloud, and a gradient flowing back. Run with `bash scripts/demo.sh`."""

import torch
import torch_ragged

torch.manual_seed(0)
clouds = [torch.randn(n, 3) for n in (4, 1, 3)]  # three point clouds: 4, 1 and 3 points of (x, y, z)
print("clouds:", [tuple(c.shape) for c in clouds])

packed, shape_per_tensor = torch_ragged.list_to_packed(clouds)
first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(dim=1))
print(f"packed: {tuple(packed.shape)}, shape_per_tensor: {shape_per_tensor.flatten().tolist()}, "
      f"first_idx: {first_idx.tolist()}")

right = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, padding_value=0.0)
left = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0, padding_side="left")
print(f"padded: {tuple(right.shape)}; which rows hold points (1) or padding (0):")
print("  right padding:", (right.abs().sum(-1) > 0).int().tolist())
print("  left padding: ", (left.abs().sum(-1) > 0).int().tolist())

assert torch.equal(torch_ragged.padded_to_packed(left, shape_per_tensor, "left"), packed)
for cloud, back in zip(clouds, torch_ragged.padded_to_list(right, shape_per_tensor), strict=True):
    assert torch.equal(cloud, back)
print("unpadded back to packed and to the list: identical to the input")

# A gradient flows back through the padded layout; the padding gets none.
points = packed.clone().requires_grad_()
padded = torch_ragged.packed_to_padded(points, shape_per_tensor, first_idx, 0.0, max_shape=[6])
centroids = padded.sum(dim=1) / shape_per_tensor  # per-cloud mean, padding contributes zero
centroids.pow(2).sum().backward()
expected = torch_ragged.tile_to_packed(2 * centroids.detach() / shape_per_tensor, shape_per_tensor.flatten())
print(f"max_shape=[6] gives {tuple(padded.shape)}; centroids:\n{centroids.detach()}")
print("d(sum |centroid|^2)/d(points) matches 2*centroid/n per cloud:", torch.allclose(points.grad, expected))

per_cloud_sum = torch_ragged.segment_sum(packed, first_idx)
print("segment_sum over first_idx equals padded.sum(1):", torch.allclose(per_cloud_sum, right.sum(dim=1)))

# The segment core: per-cloud reductions and softmax straight on the packed rows, no padding.
print("segment_mean (centroids):", torch_ragged.segment_mean(packed, first_idx).tolist())
highest = torch_ragged.segment_max(packed, first_idx)
print("segment_max: highest z per cloud", highest.values[:, 2].tolist(), "in rows", highest.arg[:, 2].tolist())
attention = torch_ragged.segment_softmax(packed[:, 2:], first_idx)  # weights sum to 1 within each cloud
print("segment_softmax of z sums to 1 per cloud:", torch_ragged.segment_sum(attention, first_idx).flatten().tolist())

# numpy.pad, every mode, on tensors: pads wider than the axis, odd reflections, statistics.
signal = torch.tensor([1.0, 2.0, 4.0], requires_grad=True)
print("reflect, 5 each side:        ", torch_ragged.pad(signal, 5, "reflect").tolist())
print("odd symmetric, 5 each side:  ", torch_ragged.pad(signal, 5, "symmetric", reflect_type="odd").tolist())
print("linear_ramp to (0, -1):      ", torch_ragged.pad(signal, 3, "linear_ramp", end_values=(0, -1)).tolist())
torch_ragged.pad(signal, (2, 4), "wrap").sum().backward()
print("wrap's gradient counts each element's copies:", signal.grad.tolist())

# The container: one packed buffer, read back in whichever form the next step wants.
batch = torch_ragged.RaggedTensor.from_list(clouds)
print("RaggedTensor", tuple(batch.shape), "(-1: sizes differ); padded", tuple(batch.padded(0.0).shape),
      "mask rows", batch.mask().sum(1).tolist())
centred = batch - batch.broadcast_members(batch.mean())
print("per-cloud centring leaves zero means:", torch.allclose(centred.mean(), torch.zeros(len(batch), 3), atol=1e-6))
picked = batch[[2, 0]]
print("batch[[2, 0]] packs clouds 2 and 0 in one kernel:", torch.equal(picked[0], clouds[2]))
