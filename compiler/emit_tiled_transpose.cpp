// emit_tiled_transpose: the body of a kernel that tiled_transpose.h recognized as a batched
// transposition `target[b][q][p] = source[b][p][q]`. Each warp takes 32 x 32 tiles (p, q) in
// turn, a grid-stride loop over tiles: lane l reads source[b][p0 + i][q0 + l] for i < 32 (one
// coalesced row per step) into its warp's shared tile, the warp meets at __syncwarp, and lane l
// writes target[b][q0 + i][p0 + l] from the tile's column (one coalesced row of the target per
// step), then meets again before the tile is reused. Rows of 33 elements keep the column reads
// free of bank conflicts. Only warps synchronize (no __syncthreads), so a block's warps never
// wait for each other and every loop bound is the same for the 32 lanes of a warp. Elements
// move as their storage type: the same bits as the plain copy.
#include <algorithm>

#include "compiler/kernel_emitter.h"

namespace adjoint::compiler {
namespace {

/// Static shared memory a block's tiles may take: under the 48 KiB of static shared memory,
/// with room for nothing else (the kernel has nothing else).
constexpr int64_t kTileBytesPerBlock = 40 * 1024;
constexpr int64_t kTile = 32;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

}  // namespace

LaunchDims KernelEmitter::emit_tiled_transpose(const TiledTranspose& t) {
  const ir::Tensor source = program_.find_tensor(t.source);
  const ir::Tensor target = program_.find_tensor(t.target);
  if (!source || !target) {
    throw Error("emit_cuda: tiled transposition of kernel '" + kernel_.name +
                    "' names a tensor the program does not have",
                ErrorCode::kInternal);
  }
  const std::string type(cuda_storage_type(target->dtype));
  const int64_t tile_bytes = kTile * (kTile + 1) * static_cast<int64_t>(ir::dtype_bytes(target->dtype));
  const int64_t warps = std::max<int64_t>(
      1, std::min<int64_t>(kernel_.grid.block_size / 32, kTileBytesPerBlock / tile_bytes));
  const int64_t row_tiles = (t.rows + kTile - 1) / kTile;
  const int64_t column_tiles = (t.columns + kTile - 1) / kTile;
  const int64_t tiles = t.batches * row_tiles * column_tiles;
  const int64_t blocks = std::clamp<int64_t>((tiles + warps - 1) / warps, 1, kMaxBlocks);
  const std::string& index = index_type_;
  auto n = [](int64_t v) { return std::to_string(v); };
  auto literal = [&](int64_t v) { return index == "int" ? n(v) : n(v) + "LL"; };
  const std::string& src = params_.at(source.get());
  const std::string& dst = params_.at(target.get());
  CodeWriter& w = body_;
  w.line("// Tiled transposition (compiler/tiled_transpose.h): " + t.target + "[b][q][p] = " +
         t.source + "[b][p][q], b < " + n(t.batches) + ", p < " + n(t.rows) + ", q < " +
         n(t.columns) + "; " + n(warps) + " warps per block, each moving 32 x 32 tiles through "
         "shared memory.");
  w.line("__shared__ " + type + " tiles[" + n(warps) + "][32][33];");
  w.line("const int lane = (int)(threadIdx.x % 32u);");
  w.line("const int warp = (int)(threadIdx.x / 32u);");
  {
    CodeWriter::Block loop(
        w,
        "for (" + index + " t = (" + index + ")blockIdx.x * " + literal(warps) +
            " + warp; t < " + literal(tiles) + "; t += (" + index + ")gridDim.x * " +
            literal(warps) + ") {",
        "}");
    w.line("const " + index + " b = t / " + literal(row_tiles * column_tiles) + ";");
    w.line("const " + index + " p0 = t / " + literal(column_tiles) + " % " + literal(row_tiles) +
           " * 32;");
    w.line("const " + index + " q0 = t % " + literal(column_tiles) + " * 32;");
    w.line("const " + type + "* in = " + src + " + b * " + literal(t.source_batch_stride) + ";");
    w.line(type + "* out = " + dst + " + b * " + literal(t.target_batch_stride) + ";");
    w.line("#pragma unroll");
    {
      CodeWriter::Block rows(w, "for (int i = 0; i < 32; ++i) {", "}");
      w.line("const " + index + " p = p0 + i, q = q0 + lane;");
      w.line("if (p < " + literal(t.rows) + " && q < " + literal(t.columns) +
             ") tiles[warp][i][lane] = in[p * " + literal(t.source_row_stride) + " + q * " +
             literal(t.source_column_stride) + "];");
    }
    w.line("__syncwarp();");
    w.line("#pragma unroll");
    {
      CodeWriter::Block columns(w, "for (int i = 0; i < 32; ++i) {", "}");
      w.line("const " + index + " q = q0 + i, p = p0 + lane;");
      w.line("if (p < " + literal(t.rows) + " && q < " + literal(t.columns) + ") out[q * " +
             literal(t.target_column_stride) + " + p * " + literal(t.target_row_stride) +
             "] = tiles[warp][lane][i];");
    }
    w.line("__syncwarp();  // every lane has read the tile before it is refilled");
  }
  LaunchDims launch;
  launch.grid[0] = static_cast<uint32_t>(blocks);
  launch.block[0] = static_cast<uint32_t>(warps * 32);
  return launch;
}

}  // namespace adjoint::compiler
