// An experiment, not part of the library: how fast can mhc_pre_backward's two contractions run
// on tensor cores, and how exact are they? It measures on the GPU (nvcc -O3 -arch=sm_90), in one
// process, hand-written kernels of the two contractions that dominate mhc_pre_backward
// (docs/mhc.md "Where mhc_pre_backward stands"), against an f64 reference of the same formulas:
//   dx[t,c]    = gamma[c]·Σ_k dh_mix[t,k]·phi[k,c] − coef[t]·x[t,c] + h_pre[t,c/D]·grad_h_in[t,c%D]
//   xmix[k,c]  = Σ_t dh_mix[t,k]·x[t,c]          (x_mix's partials before the combine; dphi and
//                                                  dgamma are cheap functions of it)
// with t over B·S tokens, c over n·D, k over n²+2n (DESIGN.md). Variants:
//   dx   fp32      one thread per 8 outputs, an FMA chain over k in order (the ALU floor's form)
//   dx   tf32x1    mma.sync m16n8k8 TF32, inputs rounded to TF32 once
//   dx   tf32x3    the same with the split a = hi + lo of both operands: hi·hi + hi·lo + lo·hi
//   xmix tf32x2    x is bf16, exact in TF32, so only dh_mix is split: lo·x + hi·x
//   +ahd           (dx and xmix) the next tile's operands loaded before this tile's mma
//   +smem          (xmix) x read in 16-byte loads into shared memory, a tile ahead
//   dx+xmix fused  both in one pass over x (n = 4 and 6): dx's tiles also feed x_mix's mma
// Each prints its median kernel time over 30 launches, the effective bandwidth of its minimum
// bytes, and the worst error of its f32 results against the f64 reference (relative to the largest
// reference value). The copy bandwidth is measured in the same run. Usage:
//   mhc_tensor_cores B S n D
// Determinism: each output is computed by one thread in a fixed order (mma's own order is fixed
// by the hardware), so every variant gives the same bits every run; the program checks that too.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                   cudaGetErrorString(e_));                                           \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// v = hi + lo to about 22 bits: hi rounded to TF32, lo the rest rounded again.
__device__ __forceinline__ void split_tf32(const float (&v)[4], uint32_t (&hi)[4],
                                           uint32_t (&lo)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    hi[j] = to_tf32(v[j]);
    lo[j] = to_tf32(v[j] - __uint_as_float(hi[j]));
  }
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) {
  return __uint_as_float(bits16 << 16);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ void load_f32x8(float (&v)[8], const float* p) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// 8 bf16 (one 16-byte word) widened exactly to f32 at dst.
__device__ __forceinline__ void store_widened8(float* dst, uint4 w) {
  *reinterpret_cast<float4*>(dst) =
      make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u),
                  __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xffff0000u));
  *reinterpret_cast<float4*>(dst + 4) =
      make_float4(__uint_as_float(w.z << 16), __uint_as_float(w.z & 0xffff0000u),
                  __uint_as_float(w.w << 16), __uint_as_float(w.w & 0xffff0000u));
}

// An mma A fragment (m16n8k8, TF32) of a row-major matrix with leading dimension ld: rows row0 +
// gid and + 8, columns col0 + tig and + 4 (gid = lane / 4, tig = lane % 4).
__device__ __forceinline__ void load_a_rows(float (&v)[4], const float* m, size_t ld, int row0,
                                            int col0, int gid, int tig) {
  const float* r0 = m + static_cast<size_t>(row0 + gid) * ld + col0;
  const float* r1 = r0 + 8 * ld;
  v[0] = r0[tig], v[1] = r1[tig], v[2] = r0[tig + 4], v[3] = r1[tig + 4];
}

// The A fragment of the transpose: A[k][t] = m[t][k], k from k0 (rows k0 + gid, + 8; zero at k >=
// K), t from t0 (columns t0 + tig, + 4).
__device__ __forceinline__ void load_a_transposed(float (&v)[4], const float* m, size_t ld, int K,
                                                  int t0, int k0, int gid, int tig) {
  const int ka = k0 + gid, kb = ka + 8;
  const float* ra = m + static_cast<size_t>(t0 + tig) * ld;
  const float* rb = ra + 4 * ld;
  v[0] = ka < K ? ra[ka] : 0.f, v[1] = kb < K ? ra[kb] : 0.f;
  v[2] = ka < K ? rb[ka] : 0.f, v[3] = kb < K ? rb[kb] : 0.f;
}

struct DxArgs {
  const float* dh_mix;        // [T, K]
  const float* phi;           // [K, C]
  const float* gamma;         // [C]
  const __nv_bfloat16* x;     // [T, C]
  const __nv_bfloat16* ghin;  // [T, D]
  const float* h_pre;         // [T, n]
  const float* coef;          // [T]
  __nv_bfloat16* dx;          // [T, C]
  float* dx_f32;              // [T, C] or null
  int T, n, D, K;
};

// dx for 8 consecutive c of token t from mm = Σ_k dh_mix·phi and the elementwise operands
// (xv, gv: 8 bf16 of x and grad_h_in), stored as bf16 (evict-first where kStreaming) and, where
// asked, as f32.
template <bool kStreaming>
__device__ __forceinline__ void dx_store8(const DxArgs& a, int t, int c, const float (&gm)[8],
                                          const float (&mm)[8], uint4 xv, uint4 gv, float hp,
                                          float cf) {
  const size_t at = static_cast<size_t>(t) * a.n * a.D + c;
  const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w}, gw[4] = {gv.x, gv.y, gv.z, gv.w};
  float out[8];
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const uint32_t xbits = (xw[q / 2] >> (16 * (q % 2))) & 0xffff;
    const uint32_t gbits = (gw[q / 2] >> (16 * (q % 2))) & 0xffff;
    out[q] = fmaf(gm[q], mm[q], fmaf(-cf, bf16_bits_to_float(xbits), hp * bf16_bits_to_float(gbits)));
  }
  const uint4 o = make_uint4(pack_bf16x2(out[0], out[1]), pack_bf16x2(out[2], out[3]),
                             pack_bf16x2(out[4], out[5]), pack_bf16x2(out[6], out[7]));
  if (kStreaming) __stcs(reinterpret_cast<uint4*>(a.dx + at), o);
  else *reinterpret_cast<uint4*>(a.dx + at) = o;
  if (a.dx_f32) {
#pragma unroll
    for (int q = 0; q < 8; ++q) a.dx_f32[at + q] = out[q];
  }
}

// The same, reading its operands where it stands.
__device__ __forceinline__ void dx_epilogue8(const DxArgs& a, int t, int c, const float (&mm)[8]) {
  const int C = a.n * a.D, i = c / a.D, d = c - i * a.D;
  const uint4 xv = *reinterpret_cast<const uint4*>(a.x + static_cast<size_t>(t) * C + c);
  const uint4 gv = *reinterpret_cast<const uint4*>(a.ghin + static_cast<size_t>(t) * a.D + d);
  float gm[8];
  load_f32x8(gm, a.gamma + c);
  dx_store8<false>(a, t, c, gm, mm, xv, gv, a.h_pre[static_cast<size_t>(t) * a.n + i], a.coef[t]);
}

// FP32 on the ALUs: a thread makes 8 consecutive c of one token, k in order.
__global__ void __launch_bounds__(256) dx_fp32(DxArgs a) {
  const int C = a.n * a.D;
  const size_t groups = static_cast<size_t>(a.T) * (C / 8);
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(g / (C / 8)), c = static_cast<int>(g % (C / 8)) * 8;
    float mm[8] = {};
    for (int k = 0; k < a.K; ++k) {
      const float h = a.dh_mix[static_cast<size_t>(t) * a.K + k];
      const float* p = a.phi + static_cast<size_t>(k) * C + c;
#pragma unroll
      for (int j = 0; j < 8; ++j) mm[j] = fmaf(h, p[j], mm[j]);
    }
    dx_epilogue8(a, t, c, mm);
  }
}

// phi's B fragments for the block's BN = NT x 8 columns from c0, KS steps of 8 k, in shared
// memory: one 16-byte word per (step, n-tile, lane) holding the hi and lo TF32 halves of the
// lane's two values, so that a warp reads a fragment pair with one conflict-free load.
template <int KS, int NT>
__device__ __forceinline__ void stage_phi_fragments(uint4* bfrag, const float* phi, int C, int c0) {
  for (int e = threadIdx.x; e < KS * NT * 32; e += blockDim.x) {
    const int l = e & 31, nt = (e >> 5) % NT, ks = e / (32 * NT);
    const int g = l >> 2, tg = l & 3;
    const float v0 = phi[static_cast<size_t>(ks * 8 + tg) * C + c0 + nt * 8 + g];
    const float v1 = phi[static_cast<size_t>(ks * 8 + tg + 4) * C + c0 + nt * 8 + g];
    const uint32_t h0 = to_tf32(v0), h1 = to_tf32(v1);
    bfrag[e] = make_uint4(h0, h1, to_tf32(v0 - __uint_as_float(h0)),
                          to_tf32(v1 - __uint_as_float(h1)));
  }
}

// A warp's 16 tokens x NT x 8 c of Σ_k dh_mix·phi: av the tile's dh_mix fragments (KS steps), phi's
// from stage_phi_fragments; kSplit: 3xTF32 (lo·hi + hi·lo + hi·hi), else one TF32 product.
template <int KS, int NT, bool kSplit>
__device__ __forceinline__ void dx_tile_mma(float (&acc)[NT][4], const float (&av)[KS][4],
                                            const uint4* bfrag, int lane) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t ah[4], al[4];
    split_tf32(av[ks], ah, al);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint4 b = bfrag[(ks * NT + nt) * 32 + lane];
      if (kSplit) {
        mma_tf32(acc[nt], al, b.x, b.y);
        mma_tf32(acc[nt], ah, b.z, b.w);
      }
      mma_tf32(acc[nt], ah, b.x, b.y);
    }
  }
}

template <int KS>
__device__ __forceinline__ void load_dh_mix_rows(float (&av)[KS][4], const float* dh_mix, int t0,
                                                 int gid, int tig) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) load_a_rows(av[ks], dh_mix, KS * 8, t0, ks * 8, gid, tig);
}

// A warp's accumulator fragments into its 16 x NT*8 tile of shared memory (row stride STRIDE).
template <int NT, int STRIDE>
__device__ __forceinline__ void stash_accumulators(float* tile, const float (&acc)[NT][4], int gid,
                                                   int tig) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    *reinterpret_cast<float2*>(&tile[gid * STRIDE + nt * 8 + 2 * tig]) =
        make_float2(acc[nt][0], acc[nt][1]);
    *reinterpret_cast<float2*>(&tile[(gid + 8) * STRIDE + nt * 8 + 2 * tig]) =
        make_float2(acc[nt][2], acc[nt][3]);
  }
}

// Tensor cores. A block of 4 warps owns BN consecutive c; it stages phi's fragments for them in
// shared memory once, then each warp walks token tiles of 16 on its own: K/8 steps of BN/8 mma
// each, the 16 x BN accumulators through shared memory, and the epilogue in rows of 8 consecutive
// c (16-byte loads and stores).
template <int K, int BN, bool kSplit>
__global__ void __launch_bounds__(128) dx_mma(DxArgs a) {
  constexpr int KS = K / 8, NT = BN / 8, STRIDE = BN + 8;
  extern __shared__ uint4 smem[];
  uint4* bfrag = smem;                                                 // [KS][NT][32]
  float* acc_s = reinterpret_cast<float*>(bfrag + KS * NT * 32);       // [4][16][STRIDE]
  const int C = a.n * a.D, c0 = blockIdx.x * BN;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  stage_phi_fragments<KS, NT>(bfrag, a.phi, C, c0);
  __syncthreads();
  float* my_acc = acc_s + warp * 16 * STRIDE;
  constexpr int kLanesPerRow = BN / 8, kRowsPerStep = 32 / kLanesPerRow;
  for (int t0 = (blockIdx.y * 4 + warp) * 16; t0 < a.T; t0 += gridDim.y * 64) {
    float av[KS][4], acc[NT][4];
    load_dh_mix_rows<KS>(av, a.dh_mix, t0, gid, tig);
    dx_tile_mma<KS, NT, kSplit>(acc, av, bfrag, lane);
    __syncwarp();
    stash_accumulators<NT, STRIDE>(my_acc, acc, gid, tig);
    __syncwarp();
    const int cc = (lane % kLanesPerRow) * 8;
    for (int r = lane / kLanesPerRow; r < 16; r += kRowsPerStep) {
      float mm[8];
      load_f32x8(mm, &my_acc[r * STRIDE + cc]);
      dx_epilogue8(a, t0 + r, c0 + cc, mm);
    }
    __syncwarp();
  }
}

// A lane's share of a warp's 16 x 64 dx tile (BN = 64: 8 lanes a row, each 8 consecutive c of
// rows lane/8 + 4j, j < 4): x and grad_h_in, loaded a tile ahead by the kernels below.
struct DxOperands {
  uint4 xv[4], gv[4];
};

__device__ __forceinline__ void load_dx_operands(DxOperands& h, const DxArgs& a, int t0, int row0,
                                                 int c, int d) {
  const int C = a.n * a.D;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int t = t0 + row0 + 4 * j;
    h.xv[j] = __ldcs(reinterpret_cast<const uint4*>(a.x + static_cast<size_t>(t) * C + c));
    h.gv[j] = *reinterpret_cast<const uint4*>(a.ghin + static_cast<size_t>(t) * a.D + d);
  }
}

// The same tensor-core dx with its epilogue's operands loaded one token tile ahead: before the
// mma of tile i, each lane issues the loads of tile i+1's x, grad_h_in, h_pre, coef and dh_mix
// into registers, so the memory latency hides behind a tile's mma and epilogue. BN = 64 (see
// DxOperands); gamma, the stream i and d of a lane are the same for every tile and are read once.
template <int K, bool kSplit>
__global__ void __launch_bounds__(128) dx_mma_ahead(DxArgs a) {
  constexpr int BN = 64, KS = K / 8, NT = BN / 8, STRIDE = BN + 8;
  extern __shared__ uint4 smem[];
  uint4* bfrag = smem;
  float* acc_s = reinterpret_cast<float*>(bfrag + KS * NT * 32);
  const int C = a.n * a.D, c0 = blockIdx.x * BN;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  stage_phi_fragments<KS, NT>(bfrag, a.phi, C, c0);
  __syncthreads();
  float* my_acc = acc_s + warp * 16 * STRIDE;
  const int cc = (lane % 8) * 8, row0 = lane / 8, c = c0 + cc, si = c / a.D, d = c - si * a.D;
  float gm[8];
  load_f32x8(gm, a.gamma + c);
  struct Ahead {
    DxOperands ops;
    float hp[4], cf[4], av[KS][4];
  };
  auto load = [&](Ahead& h, int t0) {
    load_dx_operands(h.ops, a, t0, row0, c, d);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int t = t0 + row0 + 4 * j;
      h.hp[j] = a.h_pre[static_cast<size_t>(t) * a.n + si];
      h.cf[j] = a.coef[t];
    }
    load_dh_mix_rows<KS>(h.av, a.dh_mix, t0, gid, tig);
  };
  const int step = gridDim.y * 64;
  int t0 = (blockIdx.y * 4 + warp) * 16;
  Ahead cur;
  if (t0 < a.T) load(cur, t0);
  for (; t0 < a.T; t0 += step) {
    Ahead next;
    if (t0 + step < a.T) load(next, t0 + step);
    float acc[NT][4];
    dx_tile_mma<KS, NT, kSplit>(acc, cur.av, bfrag, lane);
    stash_accumulators<NT, STRIDE>(my_acc, acc, gid, tig);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + 4 * j;
      float mm[8];
      load_f32x8(mm, &my_acc[r * STRIDE + cc]);
      dx_store8<true>(a, t0 + r, c, gm, mm, cur.ops.xv[j], cur.ops.gv[j], cur.hp[j], cur.cf[j]);
    }
    __syncwarp();
    cur = next;
  }
}

// Σ over 8 tokens of x_mix's partials: for MT m-tiles of 16 k, the A fragments av (dh_mix
// transposed, split 2 ways: x is exact in TF32) times the B fragments b (x) of NT n-tiles.
template <int MT, int NT>
__device__ __forceinline__ void xmix_step_mma(float (&acc)[MT][NT][4], const float (&av)[MT][4],
                                              const uint32_t (&b)[NT][2]) {
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    uint32_t ah[4], al[4];
    split_tf32(av[m], ah, al);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      mma_tf32(acc[m][nt], al, b[nt][0], b[nt][1]);
      mma_tf32(acc[m][nt], ah, b[nt][0], b[nt][1]);
    }
  }
}

template <int MT, int NT>
__device__ __forceinline__ void zero_accumulators(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[m][nt][0] = acc[m][nt][1] = acc[m][nt][2] = acc[m][nt][3] = 0.f;
}

// x_mix's accumulator fragments (C[k][c]: rows k = m*16 + gid and + 8, columns c = cw + nt*8 +
// 2tig, + 1) into out[k][c], rows at or past K left out.
template <int MT, int NT>
__device__ __forceinline__ void store_xmix(float* out, const float (&acc)[MT][NT][4], int K, int C,
                                           int cw, int gid, int tig) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int k0 = m * 16 + gid, cn = cw + nt * 8 + 2 * tig;
      if (k0 < K) *reinterpret_cast<float2*>(&out[static_cast<size_t>(k0) * C + cn]) = make_float2(acc[m][nt][0], acc[m][nt][1]);
      if (k0 + 8 < K) *reinterpret_cast<float2*>(&out[static_cast<size_t>(k0 + 8) * C + cn]) = make_float2(acc[m][nt][2], acc[m][nt][3]);
    }
}

// x_mix's B fragments of 8 tokens from t (rows t + tig and + 4) and 4 n-tiles of c from cw
// (columns cw + nt*8 + gid), read from global memory as bf16 and widened.
__device__ __forceinline__ void load_x_fragments(uint32_t (&b)[4][2], const uint16_t* xb, int C,
                                                 int t, int cw, int gid, int tig) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int cn = cw + nt * 8 + gid;
    b[nt][0] = static_cast<uint32_t>(__ldcs(&xb[static_cast<size_t>(t + tig) * C + cn])) << 16;
    b[nt][1] = static_cast<uint32_t>(__ldcs(&xb[static_cast<size_t>(t + tig + 4) * C + cn])) << 16;
  }
}

// dx and x_mix's partials in one pass over x: dx_mma_ahead's tiles, where each warp also adds its
// tile's 16 tokens into x_mix's partials for the block's 64 c (P[k][c] += Σ_t dh_mix[t,k]·x[t,c],
// mma with M = k, N = c, the mma's k = tokens, x widened into shared memory for the B
// fragments). At the end the 4 warps' partials are added in warp order in shared memory and
// written as this block's partial (grid.y partials of K x C). x is read once for both.
template <int K>
__global__ void __launch_bounds__(128) dx_xmix_fused(DxArgs a, float* __restrict__ partials) {
  constexpr int BN = 64, KS = K / 8, NT = BN / 8, STRIDE = BN + 8, MT = (K + 15) / 16;
  extern __shared__ uint4 smem[];
  uint4* bfrag = smem;                                             // [KS][NT][32]
  float* acc_s = reinterpret_cast<float*>(bfrag + KS * NT * 32);   // [4][16][STRIDE]
  float* xs_all = acc_s + 4 * 16 * STRIDE;                         // [4][16][STRIDE]
  float* pc = xs_all + 4 * 16 * STRIDE;                            // [K][BN]
  const int C = a.n * a.D, c0 = blockIdx.x * BN;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  stage_phi_fragments<KS, NT>(bfrag, a.phi, C, c0);
  __syncthreads();
  float* my_acc = acc_s + warp * 16 * STRIDE;
  float* xs = xs_all + warp * 16 * STRIDE;
  const int cc = (lane % 8) * 8, row0 = lane / 8, c = c0 + cc, si = c / a.D, d = c - si * a.D;
  float gm[8];
  load_f32x8(gm, a.gamma + c);
  float pacc[MT][NT][4];
  zero_accumulators(pacc);
  const int step = gridDim.y * 64;
  int t0 = (blockIdx.y * 4 + warp) * 16;
  DxOperands cur;
  if (t0 < a.T) load_dx_operands(cur, a, t0, row0, c, d);
  for (; t0 < a.T; t0 += step) {
    DxOperands next;
    if (t0 + step < a.T) load_dx_operands(next, a, t0 + step, row0, c, d);
#pragma unroll
    for (int j = 0; j < 4; ++j) store_widened8(&xs[(row0 + 4 * j) * STRIDE + cc], cur.xv[j]);
    float av[KS][4], acc[NT][4];
    load_dh_mix_rows<KS>(av, a.dh_mix, t0, gid, tig);
    dx_tile_mma<KS, NT, true>(acc, av, bfrag, lane);
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {  // x_mix: two steps of 8 tokens
      uint32_t bx[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        bx[nt][0] = __float_as_uint(xs[(kk * 8 + tig) * STRIDE + nt * 8 + gid]);
        bx[nt][1] = __float_as_uint(xs[(kk * 8 + tig + 4) * STRIDE + nt * 8 + gid]);
      }
      float xav[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) load_a_transposed(xav[m], a.dh_mix, K, K, t0 + kk * 8, m * 16, gid, tig);
      xmix_step_mma(pacc, xav, bx);
    }
    stash_accumulators<NT, STRIDE>(my_acc, acc, gid, tig);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + 4 * j, t = t0 + r;
      float mm[8];
      load_f32x8(mm, &my_acc[r * STRIDE + cc]);
      dx_store8<true>(a, t, c, gm, mm, cur.xv[j], cur.gv[j],
                      a.h_pre[static_cast<size_t>(t) * a.n + si], a.coef[t]);
    }
    __syncwarp();
    cur = next;
  }
  // the 4 warps' partials, added in warp order
  for (int w = 0; w < 4; ++w) {
    if (warp == w) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int k0 = m * 16 + gid, cn = nt * 8 + 2 * tig;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int k = k0 + 8 * h;
            if (k >= K) continue;
            float* q = &pc[k * BN + cn];
            q[0] = w == 0 ? pacc[m][nt][2 * h] : q[0] + pacc[m][nt][2 * h];
            q[1] = w == 0 ? pacc[m][nt][2 * h + 1] : q[1] + pacc[m][nt][2 * h + 1];
          }
        }
    }
    __syncthreads();
  }
  float* o = partials + static_cast<size_t>(blockIdx.y) * K * C;
  for (int e = threadIdx.x; e < K * BN; e += blockDim.x)
    o[static_cast<size_t>(e / BN) * C + c0 + e % BN] = pc[e];
}

// x_mix's partials on tensor cores: out[p][k][c] = Σ_{t in chunk p} dh_mix[t,k]·x[t,c]. M = k (K
// padded to a multiple of 16, the pad rows zero), N = c, the mma's k = tokens. A block of 4 warps
// owns 32 c per warp (4 n-tiles); it walks its chunk of tokens 8 at a time: A (dh_mix, split into
// hi and lo TF32) read from global (L1/L2), B (x) read as bf16 and widened exactly.
template <int K>
__global__ void __launch_bounds__(128) xmix_mma(const float* __restrict__ dh_mix,
                                                const __nv_bfloat16* __restrict__ x,
                                                float* __restrict__ out, int T, int C,
                                                int chunk) {
  constexpr int MT = (K + 15) / 16;  // m-tiles of 16 k
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  const int cw = (blockIdx.x * 4 + warp) * 32;  // this warp's 32 c
  const int p = blockIdx.y, tb = p * chunk, te = min(T, tb + chunk);
  const uint16_t* xb = reinterpret_cast<const uint16_t*>(x);
  float acc[MT][4][4];
  zero_accumulators(acc);
  for (int t = tb; t < te; t += 8) {
    uint32_t b[4][2];
    load_x_fragments(b, xb, C, t, cw, gid, tig);
    float av[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) load_a_transposed(av[m], dh_mix, K, K, t, m * 16, gid, tig);
    xmix_step_mma(acc, av, b);
  }
  store_xmix(out + static_cast<size_t>(p) * K * C, acc, K, C, cw, gid, tig);
}

// x_mix's partials with the next 8 tokens' operands loaded before this 8's mma (see xmix_mma).
template <int K>
__global__ void __launch_bounds__(128) xmix_mma_ahead(const float* __restrict__ dh_mix,
                                                      const __nv_bfloat16* __restrict__ x,
                                                      float* __restrict__ out, int T, int C,
                                                      int chunk) {
  constexpr int MT = (K + 15) / 16;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  const int cw = (blockIdx.x * 4 + warp) * 32;
  const int p = blockIdx.y, tb = p * chunk, te = min(T, tb + chunk);
  const uint16_t* xb = reinterpret_cast<const uint16_t*>(x);
  float acc[MT][4][4];
  zero_accumulators(acc);
  struct Ahead {
    uint32_t b[4][2];
    float av[MT][4];
  };
  auto load = [&](Ahead& h, int t) {
    load_x_fragments(h.b, xb, C, t, cw, gid, tig);
#pragma unroll
    for (int m = 0; m < MT; ++m) load_a_transposed(h.av[m], dh_mix, K, K, t, m * 16, gid, tig);
  };
  Ahead cur;
  if (tb < te) load(cur, tb);
  for (int t = tb; t < te; t += 8) {
    Ahead next;
    if (t + 8 < te) load(next, t + 8);
    xmix_step_mma(acc, cur.av, cur.b);
    cur = next;
  }
  store_xmix(out + static_cast<size_t>(p) * K * C, acc, K, C, cw, gid, tig);
}

// x_mix's partials with x staged through shared memory: a block's 4 warps own 128 c; per tile of
// 32 tokens every thread loads 4 x 16 bytes of x and its share of dh_mix, the next tile's loads
// issued before this tile's mma, the tile widened to f32 in one of two shared buffers (one
// barrier a tile). B fragments (x) and A fragments (dh_mix, split hi/lo) come from shared memory
// with strides that keep the 32 lanes on 32 banks.
template <int K>
__global__ void __launch_bounds__(128) xmix_mma_staged(const float* __restrict__ dh_mix,
                                                       const __nv_bfloat16* __restrict__ x,
                                                       float* __restrict__ out, int T, int C,
                                                       int chunk) {
  constexpr int MT = (K + 15) / 16, TT = 32, XS = 128 + 8;
  constexpr int KS = (K % 32 == 8 || K % 32 == 24) ? K : K + 8;
  constexpr int kDhPerThread = (TT * K + 127) / 128;
  __shared__ float xs[2][TT][XS];
  __shared__ float ds[2][TT][KS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  const int cb = blockIdx.x * 128, cw = warp * 32;
  const int p = blockIdx.y, tb = p * chunk, te = min(T, tb + chunk);
  float acc[MT][4][4];
  zero_accumulators(acc);
  uint4 xr[4];
  float dr[kDhPerThread];
  auto load = [&](int t0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = threadIdx.x + 128 * j, r = e >> 4, c8 = (e & 15) * 8;
      xr[j] = t0 + r < te ? __ldcs(reinterpret_cast<const uint4*>(x + static_cast<size_t>(t0 + r) * C + cb + c8))
                          : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < kDhPerThread; ++j) {
      const int e = threadIdx.x + 128 * j, r = e / K;
      dr[j] = (e < TT * K && t0 + r < te) ? dh_mix[static_cast<size_t>(t0) * K + e] : 0.f;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = threadIdx.x + 128 * j, r = e >> 4, c8 = (e & 15) * 8;
      store_widened8(&xs[buf][r][c8], xr[j]);
    }
#pragma unroll
    for (int j = 0; j < kDhPerThread; ++j) {
      const int e = threadIdx.x + 128 * j;
      if (e < TT * K) ds[buf][e / K][e % K] = dr[j];
    }
  };
  if (tb < te) {
    load(tb);
    store(0);
  }
  __syncthreads();
  int buf = 0;
  for (int t0 = tb; t0 < te; t0 += TT) {
    const bool more = t0 + TT < te;
    if (more) load(t0 + TT);
#pragma unroll
    for (int s = 0; s < TT / 8; ++s) {
      uint32_t b[4][2];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        b[nt][0] = __float_as_uint(xs[buf][s * 8 + tig][cw + nt * 8 + gid]);
        b[nt][1] = __float_as_uint(xs[buf][s * 8 + tig + 4][cw + nt * 8 + gid]);
      }
      float av[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) load_a_transposed(av[m], &ds[buf][0][0], KS, K, s * 8, m * 16, gid, tig);
      xmix_step_mma(acc, av, b);
    }
    if (more) store(buf ^ 1);
    __syncthreads();
    buf ^= 1;
  }
  store_xmix(out + static_cast<size_t>(p) * K * C, acc, K, C, cb + cw, gid, tig);
}

// The same partials on the ALUs, for the error comparison (not tuned): one thread per (k, c).
__global__ void xmix_fp32(const float* dh_mix, const __nv_bfloat16* x, float* out, int T, int C,
                          int K, int chunk) {
  const size_t n = static_cast<size_t>(K) * C;
  const int p = blockIdx.y, tb = p * chunk, te = min(T, tb + chunk);
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(e / C), c = static_cast<int>(e % C);
    float s = 0.f;
    for (int t = tb; t < te; ++t)
      s = fmaf(dh_mix[static_cast<size_t>(t) * K + k], __bfloat162float(x[static_cast<size_t>(t) * C + c]), s);
    out[static_cast<size_t>(p) * n + e] = s;
  }
}

__global__ void dx_reference(DxArgs a, double* ref) {
  const int C = a.n * a.D;
  const size_t total = static_cast<size_t>(a.T) * C;
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(e / C), c = static_cast<int>(e % C);
    const int i = c / a.D, d = c - i * a.D;
    double mm = 0;
    for (int k = 0; k < a.K; ++k)
      mm += static_cast<double>(a.dh_mix[static_cast<size_t>(t) * a.K + k]) * a.phi[static_cast<size_t>(k) * C + c];
    ref[e] = a.gamma[c] * mm - static_cast<double>(a.coef[t]) * __bfloat162float(a.x[e]) +
             static_cast<double>(a.h_pre[static_cast<size_t>(t) * a.n + i]) *
                 __bfloat162float(a.ghin[static_cast<size_t>(t) * a.D + d]);
  }
}

__global__ void xmix_reference(const float* dh_mix, const __nv_bfloat16* x, double* ref, int T,
                               int C, int K, int chunk, int p) {
  const size_t n = static_cast<size_t>(K) * C;
  const int tb = p * chunk, te = min(T, tb + chunk);
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(e / C), c = static_cast<int>(e % C);
    double s = 0;
    for (int t = tb; t < te; ++t)
      s += static_cast<double>(dh_mix[static_cast<size_t>(t) * K + k]) * __bfloat162float(x[static_cast<size_t>(t) * C + c]);
    ref[e] = s;
  }
}

template <typename Launch>
float median_ms(Launch launch, int runs = 30) {
  cudaEvent_t b, e;
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventCreate(&e));
  for (int i = 0; i < 5; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < runs; ++i) {
    CHECK(cudaEventRecord(b));
    launch();
    CHECK(cudaEventRecord(e));
    CHECK(cudaEventSynchronize(e));
    float v;
    CHECK(cudaEventElapsedTime(&v, b, e));
    ms.push_back(v);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename T>
T* upload(const std::vector<T>& h) {
  T* d;
  CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Worst |got - ref| over the largest |ref|.
double worst_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double big = 0, err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    big = std::max(big, std::fabs(ref[i]));
    err = std::max(err, std::fabs(got[i] - ref[i]));
  }
  return big > 0 ? err / big : err;
}

uint64_t digest(const void* d, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  CHECK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
  uint64_t v = 1469598103934665603ull;
  for (unsigned char c : h) v = (v ^ c) * 1099511628211ull;
  return v;
}

template <int K>
void run_shape(int B, int S, int n, int D, double copy_gbps, int sms) {
  const int T = B * S, C = n * D;
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> dh_mix(static_cast<size_t>(T) * K), phi(static_cast<size_t>(K) * C), gamma(C),
      h_pre(static_cast<size_t>(T) * n), coef(T);
  std::vector<__nv_bfloat16> x(static_cast<size_t>(T) * C), ghin(static_cast<size_t>(T) * D);
  for (auto& v : dh_mix) v = 0.05f * nd(rng);
  for (auto& v : phi) v = nd(rng) / std::sqrt(static_cast<float>(C));
  for (auto& v : gamma) v = 1.f + 0.1f * nd(rng);
  for (auto& v : h_pre) v = 0.5f + 0.2f * nd(rng);
  for (auto& v : coef) v = 1e-3f * nd(rng);
  for (auto& v : x) v = __float2bfloat16(nd(rng));
  for (auto& v : ghin) v = __float2bfloat16(nd(rng));
  DxArgs a{upload(dh_mix), upload(phi), upload(gamma), upload(x), upload(ghin), upload(h_pre),
           upload(coef), nullptr, nullptr, T, n, D, K};
  CHECK(cudaMalloc(&a.dx, static_cast<size_t>(T) * C * 2));
  CHECK(cudaMalloc(&a.dx_f32, static_cast<size_t>(T) * C * 4));
  double* ref;
  CHECK(cudaMalloc(&ref, static_cast<size_t>(T) * C * 8));
  dx_reference<<<4 * sms, 256>>>(a, ref);
  CHECK(cudaDeviceSynchronize());
  std::vector<double> ref_h = download(ref, static_cast<size_t>(T) * C);
  const double bytes = static_cast<double>(T) * C * 2 * 2 + static_cast<double>(T) * D * 2 +
                       static_cast<double>(K) * C * 4;
  std::printf("dx B%d S%d n%d D%d (K=%d): minimum bytes %.1f MB, %.1f us at the copy bandwidth\n",
              B, S, n, D, K, bytes / 1e6, bytes / copy_gbps / 1e3);

  // fp32
  {
    auto launch = [&](DxArgs args) { dx_fp32<<<8 * sms, 256>>>(args); };
    DxArgs timed = a;
    timed.dx_f32 = nullptr;
    float ms = median_ms([&] { launch(timed); });
    launch(a);
    CHECK(cudaDeviceSynchronize());
    double err = worst_error(download(a.dx_f32, ref_h.size()), ref_h);
    uint64_t d1 = digest(a.dx, ref_h.size() * 2);
    launch(timed);
    CHECK(cudaDeviceSynchronize());
    std::printf("  dx fp32          %8.1f us  %6.0f GB/s (%4.1f%% of copy)  error %.2e  bits %s\n",
                ms * 1e3, bytes / ms / 1e6, 100 * bytes / ms / 1e6 / copy_gbps, err,
                d1 == digest(a.dx, ref_h.size() * 2) ? "same" : "DIFFER");
  }
  auto run_mma = [&](auto kernel, const char* name, int bn) {
    const int ks = K / 8, nt = bn / 8;
    const size_t smem = static_cast<size_t>(ks) * nt * 32 * 16 + 4 * 16 * (bn + 8) * 4;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 128, smem));
    const int cblocks = C / bn, tile_groups = T / 64;
    float best = 1e30f;
    int best_y = 1;
    std::printf("  %s BN=%d: %zu B shared a block, %d blocks a SM; grid.y (ms):", name, bn, smem,
                per_sm);
    for (int y : {1, 2, 3, 4, 6, 8, 12, 16, 32, 64}) {
      if (y > tile_groups) break;
      DxArgs timed = a;
      timed.dx_f32 = nullptr;
      float ms = median_ms([&] { kernel<<<dim3(cblocks, y), 128, smem>>>(timed); });
      std::printf(" %d:%.4f", y, ms);
      if (ms < best) best = ms, best_y = y;
    }
    std::printf("\n");
    kernel<<<dim3(cblocks, best_y), 128, smem>>>(a);
    CHECK(cudaDeviceSynchronize());
    double err = worst_error(download(a.dx_f32, ref_h.size()), ref_h);
    uint64_t d1 = digest(a.dx, ref_h.size() * 2);
    DxArgs timed = a;
    timed.dx_f32 = nullptr;
    kernel<<<dim3(cblocks, best_y), 128, smem>>>(timed);
    CHECK(cudaDeviceSynchronize());
    std::printf("  dx %-6s BN=%-3d %8.1f us  %6.0f GB/s (%4.1f%% of copy)  error %.2e  bits %s  (grid.y %d)\n",
                name, bn, best * 1e3, bytes / best / 1e6, 100 * bytes / best / 1e6 / copy_gbps, err,
                d1 == digest(a.dx, ref_h.size() * 2) ? "same" : "DIFFER", best_y);
  };
  if (C % 128 == 0) {
    run_mma(dx_mma<K, 128, false>, "tf32x1", 128);
    run_mma(dx_mma<K, 128, true>, "tf32x3", 128);
  }
  if (C % 64 == 0) run_mma(dx_mma<K, 64, true>, "tf32x3", 64);
  if (C % 64 == 0) run_mma(dx_mma_ahead<K, true>, "x3+ahd", 64);
  if (C % 64 == 0) run_mma(dx_mma_ahead<K, false>, "x1+ahd", 64);
  if constexpr (K <= 48) {
    // dx and x_mix's partials in one pass (3xTF32 dx, 2xTF32 x_mix), against the reference
    // of both; x_mix's reference sums every token in f64, the partials summed in f64 here.
    if (C % 64 == 0) {
      constexpr int BN = 64;
      const size_t smem = static_cast<size_t>(K / 8) * (BN / 8) * 32 * 16 +
                          2 * 4 * 16 * (BN + 8) * 4 + static_cast<size_t>(K) * BN * 4;
      auto kernel = dx_xmix_fused<K>;
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
      int per_sm = 0;
      CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 128, smem));
      const int cblocks = C / BN, tile_groups = T / 64;
      float* parts;
      CHECK(cudaMalloc(&parts, static_cast<size_t>(64) * K * C * 4));
      float best = 1e30f;
      int best_y = 1;
      std::printf("  fused BN=64: %zu B shared a block, %d blocks a SM; grid.y (ms):", smem, per_sm);
      for (int y : {1, 2, 3, 4, 6, 8, 12, 16, 32, 64}) {
        if (y > tile_groups) break;
        DxArgs timed = a;
        timed.dx_f32 = nullptr;
        float ms = median_ms([&] { kernel<<<dim3(cblocks, y), 128, smem>>>(timed, parts); });
        std::printf(" %d:%.4f", y, ms);
        if (ms < best) best = ms, best_y = y;
      }
      std::printf("\n");
      kernel<<<dim3(cblocks, best_y), 128, smem>>>(a, parts);
      CHECK(cudaDeviceSynchronize());
      const double err = worst_error(download(a.dx_f32, ref_h.size()), ref_h);
      std::vector<float> ph = download(parts, static_cast<size_t>(best_y) * K * C);
      const uint64_t d1 = digest(parts, ph.size() * 4) ^ digest(a.dx, ref_h.size() * 2);
      double* xr;
      CHECK(cudaMalloc(&xr, static_cast<size_t>(K) * C * 8));
      xmix_reference<<<4 * sms, 256>>>(a.dh_mix, a.x, xr, T, C, K, T, 0);
      CHECK(cudaDeviceSynchronize());
      std::vector<double> xr_h = download(xr, static_cast<size_t>(K) * C);
      double big = 0, xerr = 0;
      for (size_t e = 0; e < xr_h.size(); ++e) {
        double sum = 0;
        for (int y = 0; y < best_y; ++y) sum += ph[static_cast<size_t>(y) * K * C + e];
        big = std::max(big, std::fabs(xr_h[e]));
        xerr = std::max(xerr, std::fabs(sum - xr_h[e]));
      }
      DxArgs timed = a;
      timed.dx_f32 = nullptr;
      kernel<<<dim3(cblocks, best_y), 128, smem>>>(timed, parts);
      CHECK(cudaDeviceSynchronize());
      const bool same = d1 == (digest(parts, ph.size() * 4) ^ digest(a.dx, ref_h.size() * 2));
      const double fbytes = bytes + static_cast<double>(best_y) * K * C * 4;
      std::printf("  dx+xmix fused    %8.1f us  %6.0f GB/s (%4.1f%% of copy)  dx error %.2e  x_mix error %.2e (%d partials)  bits %s  (grid.y %d)\n",
                  best * 1e3, fbytes / best / 1e6, 100 * fbytes / best / 1e6 / copy_gbps, err,
                  big > 0 ? xerr / big : xerr, best_y, same ? "same" : "DIFFER", best_y);
      CHECK(cudaFree(parts));
      CHECK(cudaFree(xr));
    }
  }

  // x_mix's partials
  auto run_xmix = [&](auto kernel, const char* name) {
    const double xbytes = static_cast<double>(T) * C * 2;
    for (int chunk : {128, 256, 512, 1024}) {
      if (chunk > T || C % 128 != 0) continue;
      const int parts = (T + chunk - 1) / chunk;
      float* out;
      CHECK(cudaMalloc(&out, static_cast<size_t>(parts) * K * C * 4));
      float ms = median_ms([&] {
        kernel<<<dim3(C / 128, parts), 128>>>(a.dh_mix, a.x, out, T, C, chunk);
      });
      std::vector<float> got = download(out, static_cast<size_t>(K) * C);  // partial 0
      double* xr;
      CHECK(cudaMalloc(&xr, static_cast<size_t>(K) * C * 8));
      xmix_reference<<<4 * sms, 256>>>(a.dh_mix, a.x, xr, T, C, K, chunk, 0);
      CHECK(cudaDeviceSynchronize());
      std::vector<double> xr_h = download(xr, static_cast<size_t>(K) * C);
      double err = worst_error(got, xr_h);
      uint64_t d1 = digest(out, static_cast<size_t>(parts) * K * C * 4);
      kernel<<<dim3(C / 128, parts), 128>>>(a.dh_mix, a.x, out, T, C, chunk);
      CHECK(cudaDeviceSynchronize());
      bool same = d1 == digest(out, static_cast<size_t>(parts) * K * C * 4);
      float* fo;
      CHECK(cudaMalloc(&fo, static_cast<size_t>(parts) * K * C * 4));
      xmix_fp32<<<dim3(2 * sms, parts), 256>>>(a.dh_mix, a.x, fo, T, C, K, chunk);
      CHECK(cudaDeviceSynchronize());
      double ferr = worst_error(download(fo, static_cast<size_t>(K) * C), xr_h);
      const double pbytes = static_cast<double>(parts) * K * C * 4;
      std::printf("  xmix %s chunk %4d (%d partials, %.1f MB): %8.1f us, x at %6.0f GB/s (%4.1f%% of copy)  error %.2e (fp32 chain %.2e)  bits %s\n",
                  name, chunk, parts, pbytes / 1e6, ms * 1e3, xbytes / ms / 1e6,
                  100 * xbytes / ms / 1e6 / copy_gbps, err, ferr, same ? "same" : "DIFFER");
      CHECK(cudaFree(out));
      CHECK(cudaFree(xr));
      CHECK(cudaFree(fo));
    }
  };
  run_xmix(xmix_mma<K>, "tf32x2     ");
  run_xmix(xmix_mma_ahead<K>, "tf32x2+ahd ");
  if constexpr (K <= 48) run_xmix(xmix_mma_staged<K>, "tf32x2+smem");  // K = 80: past 48 KB static
  for (const void* p : {static_cast<const void*>(a.dh_mix), static_cast<const void*>(a.phi),
                        static_cast<const void*>(a.gamma), static_cast<const void*>(a.x),
                        static_cast<const void*>(a.ghin), static_cast<const void*>(a.h_pre),
                        static_cast<const void*>(a.coef), static_cast<const void*>(a.dx),
                        static_cast<const void*>(a.dx_f32), static_cast<const void*>(ref)})
    CHECK(cudaFree(const_cast<void*>(p)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s B S n D\n", argv[0]);
    return 2;
  }
  const int B = std::atoi(argv[1]), S = std::atoi(argv[2]), n = std::atoi(argv[3]),
            D = std::atoi(argv[4]);
  if ((B * S) % 64 != 0 || D % 8 != 0 || (n != 4 && n != 6 && n != 8)) {
    std::fprintf(stderr, "this experiment needs B*S a multiple of 64, D of 8, n in {4, 6, 8}\n");
    return 2;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  // Copy bandwidth: a 512 MB device-to-device copy, bytes read plus written.
  const size_t cbytes = size_t{512} << 20;
  void *src, *dst;
  CHECK(cudaMalloc(&src, cbytes));
  CHECK(cudaMalloc(&dst, cbytes));
  CHECK(cudaMemset(src, 1, cbytes));
  float cms = median_ms([&] { CHECK(cudaMemcpyAsync(dst, src, cbytes, cudaMemcpyDeviceToDevice)); }, 20);
  const double copy_gbps = 2.0 * cbytes / cms / 1e6;
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  std::printf("%s, %d SMs; copy bandwidth %.0f GB/s\n", prop.name, prop.multiProcessorCount, copy_gbps);
  if (n == 4) run_shape<24>(B, S, n, D, copy_gbps, prop.multiProcessorCount);
  if (n == 6) run_shape<48>(B, S, n, D, copy_gbps, prop.multiProcessorCount);
  if (n == 8) run_shape<80>(B, S, n, D, copy_gbps, prop.multiProcessorCount);
  return 0;
}
