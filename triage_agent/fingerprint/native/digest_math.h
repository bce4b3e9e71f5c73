// The digest functions of triage_agent/fingerprint/digest.py, in C++ for the CPU and CUDA.
//
// xor: torch.hash_tensor over a same-width signed integer view sign-extends each element
// to 64 bits and xors them; that equals the sign extension of the xor of the elements at
// their own width, and (xor being linear) the xor of the elements at width s is the fold
// to s bytes of the xor of the tensor's bytes taken as 64-bit words. So every kernel xors
// whole words and the fold and sign extension happen once, on the host.
//
// order: word i of the tensor's bytes (little-endian 32-bit, the last one zero-padded)
// adds mix_a(w ^ key_a(i)) to lane A and mix_b(w + key_b(i)) to lane B, modulo 2**32; the
// digest is (A << 32 | B) ^ length_key(nbytes). Sums and xors are order-free, so partials
// of any grid combine to the same value.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TRIAGE_HD __host__ __device__ __forceinline__
#else
#define TRIAGE_HD inline
#endif

namespace triage {

constexpr uint32_t kMul = 0x45D9F3Bu;
constexpr uint32_t kMul2 = 0x2C1B3C6Du;
constexpr uint32_t kMul3 = 0x297A2D39u;
constexpr uint32_t kKA = 0x1E3779B1u;
constexpr uint32_t kKB = 0x05EBCA77u;

TRIAGE_HD uint32_t lane_a(uint32_t w, uint64_t i) {
  uint32_t x = w ^ (static_cast<uint32_t>(i) * kKA + static_cast<uint32_t>(i >> 32));
  x ^= x >> 16;
  x *= kMul;
  x ^= x >> 13;
  x *= kMul2;
  return x ^ (x >> 16);
}

TRIAGE_HD uint32_t lane_b(uint32_t w, uint64_t i) {
  uint32_t y = (w + (static_cast<uint32_t>(i) * kKB + static_cast<uint32_t>(i >> 32))) * kMul3;
  return y ^ (y >> 15);
}

// xor of the s-byte lanes of a 64-bit word (s = 1, 2, 4, 8)
inline uint64_t fold_xor(uint64_t x, int s) {
  if (s <= 4) x ^= x >> 32;
  if (s <= 2) x ^= x >> 16;
  if (s <= 1) x ^= x >> 8;
  return s == 8 ? x : (x & ((uint64_t{1} << (8 * s)) - 1));
}

inline uint64_t sign_extend(uint64_t v, int s) {
  if (s == 8) return v;
  const int shift = 64 - 8 * s;
  return static_cast<uint64_t>(static_cast<int64_t>(v << shift) >> shift);
}

inline uint64_t length_key(uint64_t nbytes) {
  return (nbytes * 0x9E3779B97F4A7C15ull) & 0x7FFFFFFFFFFFFFFFull;
}

inline uint64_t combine(uint32_t a, uint32_t b, uint64_t nbytes) {
  return ((static_cast<uint64_t>(a) << 32) | b) ^ length_key(nbytes);
}

enum : uint8_t { kXor = 1, kOrder = 2, kStrided = 4 };

constexpr int kMaxDims = 8;
constexpr int kMaxJobs = 16;
constexpr int kMaxStrided = 2;  // strided jobs a launch (their sizes and strides ride along)
constexpr int kThreads = 256;
// bytes one block digests of a dense tensor: 16 bytes a thread, 16 rounds
constexpr uint64_t kChunkBytes = uint64_t{kThreads} * 16 * 16;
// elements (xor only) or 32-bit words (order) one block digests of a strided tensor
constexpr uint64_t kChunkItems = uint64_t{kThreads} * 16;

struct Partial {
  uint64_t x;
  uint32_t a;
  uint32_t b;
};

struct Dims {
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
};

// One tensor to digest. Dense: the bytes [ptr, ptr + nbytes) in memory order (a
// non-overlapping, dense tensor; in logical order when kOrder is set, which requires it to
// be contiguous). Strided: numel logical elements of `itemsize` bytes at ptr + sum(idx*stride).
struct Job {
  uint64_t ptr;
  uint64_t nbytes;
  uint64_t numel;
  Partial* out;  // one partial per chunk
  uint32_t nchunks;
  uint8_t itemsize;
  uint8_t flags;
  uint8_t ndim;
  uint8_t dims;  // index into Batch::dims (strided jobs)
};

// Kernel parameters of one launch: kept small, a launch's host cost grows with them.
struct Batch {
  int32_t njobs;
  int32_t nstrided;
  uint32_t first_block[kMaxJobs + 1];
  Job jobs[kMaxJobs];
  Dims dims[kMaxStrided];
};

inline uint32_t chunks_for(const Job& j) {
  uint64_t n;
  if (!(j.flags & kStrided)) {
    n = (j.nbytes + kChunkBytes - 1) / kChunkBytes;
  } else if (j.flags & kOrder) {
    n = ((j.nbytes + 3) / 4 + kChunkItems - 1) / kChunkItems;
  } else {
    n = (j.numel + kChunkItems - 1) / kChunkItems;
  }
  return static_cast<uint32_t>(n ? n : 1);
}

}  // namespace triage
