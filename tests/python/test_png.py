"""CPU-only test of bench/png.py, the benchmark chart's fallback when matplotlib is missing:
the bytes are a well-formed PNG (signature, chunk CRCs, IHDR, inflatable IDAT of the right
size) and the bars land where their values say.
"""

import os
import struct
import sys
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

import png  # noqa: E402


def decode(data):
    """(width, height, rows of RGB bytes) of an 8-bit RGB PNG with filter 0 rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, []
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind = data[offset + 4:offset + 8]
        body = data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, "bad CRC in %s" % kind
        chunks.append((kind, body))
        offset += 12 + length
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, color, _, _, _ = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(chunks[1][1])
    stride = 1 + width * 3
    assert len(raw) == height * stride
    rows = [raw[r * stride:(r + 1) * stride] for r in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, [row[1:] for row in rows]


class PngTest(unittest.TestCase):
    def test_bars_are_drawn_to_scale(self):
        red, blue = (200, 0, 0), (0, 0, 200)
        data = png.bar_chart([1.0, 2.0], [red, blue], guides=(1.0,), width=100, height=60,
                             margin=10)
        width, height, rows = decode(data)
        self.assertEqual((width, height), (100, 60))

        def pixel(x, y):
            return tuple(rows[y][3 * x:3 * x + 3])

        # Axis top = 2.0 * 1.05; plot height 40 px: bar 1 is ~19 px tall, bar 2 ~38 px.
        self.assertEqual(pixel(30, 45), red)
        self.assertEqual(pixel(30, 25), (255, 255, 255))
        self.assertEqual(pixel(70, 15), blue)
        self.assertEqual(pixel(5, 5), (255, 255, 255))

    def test_rejects_wrong_pixel_count(self):
        with self.assertRaises(ValueError):
            png.encode_png(2, 2, bytearray(5))


if __name__ == "__main__":
    unittest.main()
