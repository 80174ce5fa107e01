"""Three 8x8 tiles in a 32x32 bound, a 3x3 box filter over the sparse field into a dense output.

Writes sparse_tiles.png (input field | filtered output, side by side, grey levels) into the current directory, or
to the path given as the first argument. No imaging library needed: the PNG is written with zlib.
"""

import struct
import sys
import zlib

import torch
from torch_ragged import tiles


def write_png(path, image):
    """image: (H, W) floats in [0, 1] -> an 8-bit greyscale PNG."""
    pixels = (image.clamp(0, 1) * 255).round().to(torch.uint8)
    height, width = pixels.shape
    raw = b"".join(b"\x00" + bytes(pixels[y].tolist()) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                + chunk(b"IEND", b""))


def main():
    torch.manual_seed(0)
    origins = torch.tensor([[2, 2], [10, 16], [0, 20]])  # the seed's AddTile calls, (x, y) as dims 0, 1
    pages = torch.rand(3, 8, 8)                           # Randomize01
    full_min, full_max = [0, 0], [32, 32]
    field = tiles.tiles_to_dense(pages, origins, full_min, full_max, fill_value=0.0)
    filtered = tiles.tiles_box_filter(pages, origins, full_min, full_max, size=3, out="dense")
    # The seed's reference, a loop over the dense bound reading the first-wins field (0 where no tile).
    padded = torch.nn.functional.pad(field, (1, 1, 1, 1))
    reference = sum(padded[dx:dx + 32, dy:dy + 32] for dx in range(3) for dy in range(3)) / 9
    print("box filter matches the dense reference:", torch.allclose(filtered, reference, atol=1e-6))
    print("active tiles:", len(origins), "| non-zero input points:", int((field != 0).sum()),
          "| non-zero output points:", int((filtered != 0).sum()))
    side_by_side = torch.cat([field.t(), torch.ones(32, 2), filtered.t()], 1)  # image rows = the field's y
    path = sys.argv[1] if len(sys.argv) > 1 else "sparse_tiles.png"  # not into the source tree
    write_png(path, side_by_side.repeat_interleave(8, 0).repeat_interleave(8, 1))  # 8x8 pixels per point
    print("wrote", path)


if __name__ == "__main__":
    main()
