"""A dependency-free bar chart written as a PNG (zlib + struct only), for machines without
matplotlib. No text: bars, their colours, and horizontal guide lines at given values; the
numbers themselves are in the benchmark's JSON.
"""

import struct
import zlib


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode_png(width, height, pixels):
    """PNG bytes of an RGB image; `pixels` is a bytearray of height rows of width*3 bytes."""
    if len(pixels) != width * height * 3:
        raise ValueError("expected %d bytes of RGB pixels, got %d" % (width * height * 3,
                                                                      len(pixels)))
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(pixels[row * stride:(row + 1) * stride])
                   for row in range(height))  # filter type 0 on every row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def bar_chart(values, colors, guides=(), width=960, height=360, margin=20,
              background=(255, 255, 255), guide_color=(120, 120, 120)):
    """PNG bytes: one bar per value (height proportional, the axis from 0 to the largest of the
    values and guides), coloured by `colors` (RGB tuples), and a dashed line at each guide."""
    pixels = bytearray(bytes(background) * (width * height))
    top = max(list(values) + list(guides) + [1e-12]) * 1.05
    plot_height = height - 2 * margin

    def y_of(value):
        return height - margin - int(round(plot_height * max(value, 0.0) / top))

    def fill(x0, y0, x1, y1, color):
        for y in range(max(y0, 0), min(y1, height)):
            start = (y * width + max(x0, 0)) * 3
            count = max(min(x1, width) - max(x0, 0), 0)
            pixels[start:start + 3 * count] = bytes(color) * count

    slot = (width - 2 * margin) / max(len(values), 1)
    for index, (value, color) in enumerate(zip(values, colors)):
        x0 = margin + int(index * slot + slot * 0.15)
        x1 = margin + int((index + 1) * slot - slot * 0.15)
        fill(x0, y_of(value), max(x1, x0 + 1), height - margin, color)
    for guide in guides:
        y = y_of(guide)
        for x in range(margin, width - margin, 8):
            fill(x, y, x + 4, y + 1, guide_color)
    fill(margin, height - margin, width - margin, height - margin + 1, (0, 0, 0))
    return encode_png(width, height, pixels)
