// One launch digests up to kMaxJobs tensors: each block takes one chunk of one job and
// writes one partial (xor word, two lane sums); the host combines a job's partials, so the
// result does not depend on the grid or on block order. Plain CUDA: no torch headers, so
// this file builds in seconds.
#include <cuda_runtime.h>

#include "digest_math.h"

namespace triage {
namespace {

__device__ __forceinline__ uint32_t byte_mask(uint64_t lo, uint64_t hi) {
  // bytes [lo, hi) of a 32-bit word, 0 <= lo <= hi <= 4
  const uint32_t upto = hi >= 4 ? 0xFFFFFFFFu : ((1u << (8 * hi)) - 1u);
  const uint32_t from = lo == 0 ? 0xFFFFFFFFu : ~((1u << (8 * lo)) - 1u);
  return upto & from;
}

__device__ __forceinline__ void add_word(uint32_t u, uint64_t addr, uint64_t start, uint64_t end,
                                         uint64_t base, bool order, uint64_t& x, uint32_t& a,
                                         uint32_t& b) {
  if (addr + 4 <= start || addr >= end) return;
  const uint64_t lo = addr < start ? start - addr : 0;
  const uint64_t hi = end - addr < 4 ? end - addr : 4;
  const uint32_t w = u & byte_mask(lo, hi);
  x ^= static_cast<uint64_t>(w) << (8 * (addr & 4));
  if (order) {
    const uint64_t i = (addr - base) >> 2;
    a += lane_a(w, i);
    b += lane_b(w, i);
  }
}

__device__ void dense_chunk(const Job& j, uint32_t chunk, uint64_t& x, uint32_t& a, uint32_t& b) {
  const uint64_t start = j.ptr + uint64_t{chunk} * kChunkBytes;
  const uint64_t stop = uint64_t{chunk + 1} * kChunkBytes;
  const uint64_t end = j.ptr + (stop < j.nbytes ? stop : j.nbytes);
  const bool aligned4 = (j.ptr & 3) == 0;
  const bool order = (j.flags & kOrder) != 0;
  // order over a base that is not 4-aligned is done word by word below
  const bool order_here = order && aligned4;
  uint64_t A0 = (start & ~uint64_t{15}) + 16 * threadIdx.x;
  if (!order_here) {
    // xor only (the default): whole 16-byte words, four loads in flight before any use
    constexpr uint64_t step = 16 * kThreads;
    for (; A0 + 3 * step + 16 <= end; A0 += 4 * step) {
      if (A0 < start) break;
      uint4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = *reinterpret_cast<const uint4*>(A0 + k * step);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        x ^= (static_cast<uint64_t>(v[k].y) << 32 | v[k].x) ^ (static_cast<uint64_t>(v[k].w) << 32 | v[k].z);
      }
    }
  }
  for (uint64_t A = A0; A < end; A += 16 * kThreads) {
    const uint4 v = *reinterpret_cast<const uint4*>(A);
    if (A >= start && A + 16 <= end) {
      x ^= (static_cast<uint64_t>(v.y) << 32 | v.x) ^ (static_cast<uint64_t>(v.w) << 32 | v.z);
      if (order_here) {
        const uint64_t i = (A - j.ptr) >> 2;
        a += lane_a(v.x, i) + lane_a(v.y, i + 1) + lane_a(v.z, i + 2) + lane_a(v.w, i + 3);
        b += lane_b(v.x, i) + lane_b(v.y, i + 1) + lane_b(v.z, i + 2) + lane_b(v.w, i + 3);
      }
    } else {
      add_word(v.x, A, start, end, j.ptr, order_here, x, a, b);
      add_word(v.y, A + 4, start, end, j.ptr, order_here, x, a, b);
      add_word(v.z, A + 8, start, end, j.ptr, order_here, x, a, b);
      add_word(v.w, A + 12, start, end, j.ptr, order_here, x, a, b);
    }
  }
  if (order && !aligned4) {
    const uint64_t nw = (j.nbytes + 3) / 4;
    const uint64_t i0 = uint64_t{chunk} * (kChunkBytes / 4);
    const uint64_t i1 = (i0 + kChunkBytes / 4) < nw ? i0 + kChunkBytes / 4 : nw;
    const uint64_t last = j.ptr + j.nbytes;
    const uint32_t sh = static_cast<uint32_t>(j.ptr & 3) * 8;
    for (uint64_t i = i0 + threadIdx.x; i < i1; i += kThreads) {
      const uint64_t p = j.ptr + 4 * i;
      const uint64_t w0 = p & ~uint64_t{3};
      const uint32_t u0 = *reinterpret_cast<const uint32_t*>(w0);
      const uint32_t u1 = w0 + 4 < last ? *reinterpret_cast<const uint32_t*>(w0 + 4) : 0u;
      uint32_t w = (u0 >> sh) | (u1 << (32 - sh));
      const uint64_t valid = last - p < 4 ? last - p : 4;
      w &= byte_mask(0, valid);
      a += lane_a(w, i);
      b += lane_b(w, i);
    }
  }
}

__device__ __forceinline__ uint64_t element_at(const Job& j, const Dims& dm, uint64_t e) {
  int64_t off = 0;
  for (int d = j.ndim - 1; d >= 0; --d) {
    const uint64_t size = static_cast<uint64_t>(dm.sizes[d]);
    off += static_cast<int64_t>(e % size) * dm.strides[d];
    e /= size;
  }
  const uint64_t p = j.ptr + static_cast<uint64_t>(off * j.itemsize);
  switch (j.itemsize) {
    case 1:
      return *reinterpret_cast<const uint8_t*>(p);
    case 2:
      return *reinterpret_cast<const uint16_t*>(p);
    case 4:
      return *reinterpret_cast<const uint32_t*>(p);
    default:
      return *reinterpret_cast<const unsigned long long*>(p);
  }
}

__device__ void strided_chunk(const Job& j, const Dims& dm, uint32_t chunk, uint64_t& x,
                              uint32_t& a, uint32_t& b) {
  const uint64_t k0 = uint64_t{chunk} * kChunkItems;
  if (!(j.flags & kOrder)) {
    const uint64_t k1 = k0 + kChunkItems < j.numel ? k0 + kChunkItems : j.numel;
    for (uint64_t e = k0 + threadIdx.x; e < k1; e += kThreads) x ^= element_at(j, dm, e);
    return;
  }
  const uint64_t nw = (j.nbytes + 3) / 4;
  const uint64_t k1 = k0 + kChunkItems < nw ? k0 + kChunkItems : nw;
  const int s = j.itemsize;
  for (uint64_t i = k0 + threadIdx.x; i < k1; i += kThreads) {
    uint32_t w;
    if (s == 8) {
      const uint64_t v = element_at(j, dm, i >> 1);
      w = (i & 1) ? static_cast<uint32_t>(v >> 32) : static_cast<uint32_t>(v);
      if (!(i & 1)) x ^= v;
    } else {
      const int per = 4 / s;
      w = 0;
      for (int k = 0; k < per; ++k) {
        const uint64_t e = i * per + k;
        if (e < j.numel) w |= static_cast<uint32_t>(element_at(j, dm, e)) << (8 * s * k);
      }
      x ^= w;
    }
    a += lane_a(w, i);
    b += lane_b(w, i);
  }
}

__global__ void __launch_bounds__(kThreads) digest_kernel(const __grid_constant__ Batch batch) {
  int jn = 0;
  while (jn + 1 < batch.njobs && blockIdx.x >= batch.first_block[jn + 1]) ++jn;
  const Job& j = batch.jobs[jn];
  const uint32_t chunk = blockIdx.x - batch.first_block[jn];
  uint64_t x = 0;
  uint32_t a = 0, b = 0;
  if (j.flags & kStrided) {
    strided_chunk(j, batch.dims[j.dims], chunk, x, a, b);
  } else {
    dense_chunk(j, chunk, x, a, b);
  }
  for (int off = 16; off > 0; off >>= 1) {
    x ^= __shfl_xor_sync(0xFFFFFFFFu, x, off);
    a += __shfl_xor_sync(0xFFFFFFFFu, a, off);
    b += __shfl_xor_sync(0xFFFFFFFFu, b, off);
  }
  __shared__ uint64_t sx[kThreads / 32];
  __shared__ uint32_t sa[kThreads / 32], sb[kThreads / 32];
  const int warp = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) {
    sx[warp] = x;
    sa[warp] = a;
    sb[warp] = b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      x ^= sx[w];
      a += sa[w];
      b += sb[w];
    }
    j.out[chunk] = Partial{x, a, b};
  }
}

}  // namespace
}  // namespace triage

extern "C" cudaError_t triage_digest_launch(const triage::Batch* batch, unsigned blocks,
                                            cudaStream_t stream) {
  triage::digest_kernel<<<blocks, triage::kThreads, 0, stream>>>(*batch);
  return cudaGetLastError();
}
