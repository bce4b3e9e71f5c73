// The CUDA half: launches, the digest stream with exact lifetimes, the step's readback.
//
// Side stream: the digest stream waits on an event of the stream that produced the
// tensors; the caching allocator is told (recordStream) that the digest stream reads each
// one, so memory freed on the compute stream is not handed out again before the digest
// has read it; guard() makes a stream that is about to write wait for every digest issued
// so far, so a digest always reads the bytes from before an in-place write.
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <mutex>
#include <unordered_set>

#include "native.h"

extern "C" cudaError_t triage_digest_launch(const triage::Batch* batch, unsigned blocks, cudaStream_t stream);

namespace triage {
namespace {

constexpr uint32_t kBufPartials = 1u << 18;  // 4 MiB of partials a buffer

// One digest stream a device for the process's life, never destroyed: the caching allocator
// keeps the streams recordStream named and records events on them when those blocks are
// freed, which may be long after a tracer is gone.
std::mutex g_streams_mu;
std::vector<cudaStream_t> g_streams;

cudaStream_t digest_stream(int index) {
  std::lock_guard<std::mutex> l(g_streams_mu);
  if (index >= static_cast<int>(g_streams.size())) g_streams.resize(index + 1, nullptr);
  if (g_streams[index] == nullptr) {
    int least = 0, greatest = 0;
    C10_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    C10_CUDA_CHECK(cudaStreamCreateWithPriority(&g_streams[index], cudaStreamNonBlocking, least));
  }
  return g_streams[index];
}

struct Buffer {
  Partial* dev = nullptr;
  uint32_t used = 0;
};

struct Device {
  int index = -1;
  cudaStream_t side = nullptr;
  cudaEvent_t produced = nullptr;
  cudaEvent_t digested = nullptr;
  cudaEvent_t done = nullptr;
  std::vector<Buffer> bufs;
  size_t cur = 0;
  std::unordered_set<cudaStream_t> used;  // streams this step's digests ran on
  uint64_t issued = 0;                     // launches on the digest stream
  uint64_t guarded = 0;                    // of which every current stream has waited for
};

class CudaBackend final : public DeviceBackend {
 public:
  ~CudaBackend() override {
    for (Device& d : devices_) {
      if (d.index < 0) continue;
      cudaSetDevice(d.index);
      cudaStreamSynchronize(d.side);
      for (Buffer& b : d.bufs) cudaFree(b.dev);  // errors ignored: the context may be gone
      cudaEventDestroy(d.produced);
      cudaEventDestroy(d.digested);
      cudaEventDestroy(d.done);
    }
  }

  void launch(std::vector<DeviceJob>& jobs, std::vector<Result>& results, bool side) override {
    size_t i = 0;
    while (i < jobs.size()) {
      Device& d = device(jobs[i].device);
      c10::cuda::CUDAGuard g(d.index);
      const cudaStream_t cur = c10::cuda::getCurrentCUDAStream(d.index).stream();
      const cudaStream_t target = side ? d.side : cur;
      if (side) {
        C10_CUDA_CHECK(cudaEventRecord(d.produced, cur));
        C10_CUDA_CHECK(cudaStreamWaitEvent(d.side, d.produced, 0));
        ++d.issued;
      }
      d.used.insert(target);
      Batch batch{};
      uint32_t blocks = 0;
      auto flush = [&]() {
        if (batch.njobs == 0) return;
        batch.first_block[batch.njobs] = blocks;
        C10_CUDA_CHECK(triage_digest_launch(&batch, blocks, target));
        batch.njobs = 0;
        batch.nstrided = 0;
        blocks = 0;
      };
      for (; i < jobs.size() && jobs[i].device == d.index; ++i) {
        DeviceJob& dj = jobs[i];
        Job j = dj.job;
        j.nchunks = chunks_for(j);
        Buffer* b = room(d, j.nchunks, target);
        const bool strided = (j.flags & kStrided) != 0;
        if (batch.njobs == kMaxJobs || (strided && batch.nstrided == kMaxStrided)) flush();
        if (strided) {
          batch.dims[batch.nstrided] = dj.dims;
          j.dims = static_cast<uint8_t>(batch.nstrided++);
        }
        Result& r = results[dj.result];
        r.buf = static_cast<int32_t>(d.cur);
        r.part0 = b->used;
        r.nparts = j.nchunks;
        j.out = b->dev + b->used;
        b->used += j.nchunks;
        batch.first_block[batch.njobs] = blocks;
        batch.jobs[batch.njobs++] = j;
        blocks += j.nchunks;
        if (side) {
          c10::cuda::CUDACachingAllocator::recordStream(
              dj.keep.storage().data_ptr(), c10::cuda::getStreamFromExternal(d.side, d.index));
        }
      }
      flush();
    }
  }

  void guard() override {
    for (Device& d : devices_) {
      if (d.index < 0 || d.issued == d.guarded) continue;
      c10::cuda::CUDAGuard g(d.index);
      C10_CUDA_CHECK(cudaEventRecord(d.digested, d.side));
      C10_CUDA_CHECK(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(d.index).stream(), d.digested, 0));
      d.guarded = d.issued;
    }
  }

  void resolve(std::vector<Result>& results) override {
    std::vector<std::vector<Partial>> host(devices_.size());
    for (Device& d : devices_) {
      if (d.index < 0 || d.used.empty()) continue;
      c10::cuda::CUDAGuard g(d.index);
      // the copy runs on the digest stream once every stream a digest ran on is past it
      for (cudaStream_t s : d.used) {
        if (s == d.side) continue;
        C10_CUDA_CHECK(cudaEventRecord(d.done, s));
        C10_CUDA_CHECK(cudaStreamWaitEvent(d.side, d.done, 0));
      }
      std::vector<Partial>& h = host[d.index];
      size_t total = 0;
      for (const Buffer& b : d.bufs) total += b.used;
      h.resize(total);
      size_t at = 0;
      for (const Buffer& b : d.bufs) {
        if (b.used) {
          C10_CUDA_CHECK(cudaMemcpyAsync(h.data() + at, b.dev, b.used * sizeof(Partial), cudaMemcpyDeviceToHost, d.side));
        }
        at += b.used;
      }
      C10_CUDA_CHECK(cudaStreamSynchronize(d.side));
      d.guarded = d.issued;
    }
    for (Result& r : results) {
      if (r.device < 0 || r.buf < 0) continue;
      const Device& d = devices_[r.device];
      size_t base = 0;
      for (int32_t k = 0; k < r.buf; ++k) base += d.bufs[k].used;
      uint64_t x = 0;
      uint32_t a = 0, b = 0;
      const Partial* p = host[r.device].data() + base + r.part0;
      for (uint32_t k = 0; k < r.nparts; ++k) {
        x ^= p[k].x;
        a += p[k].a;
        b += p[k].b;
      }
      r.x = x;
      r.a = a;
      r.b = b;
      r.buf = -1;
    }
  }

  void begin_step() override {
    for (Device& d : devices_) {
      // a step that ended unread: its kernels finish before the buffers are reused
      for (cudaStream_t st : d.used) C10_CUDA_CHECK(cudaStreamSynchronize(st));
      for (Buffer& b : d.bufs) b.used = 0;
      d.cur = 0;
      d.used.clear();
    }
  }

  std::string rng_state(int index) override {
    at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(index));
    std::lock_guard<std::mutex> lock(gen.mutex());
    const at::Tensor st = gen.get_state();
    return std::string(static_cast<const char*>(st.const_data_ptr()), st.nbytes());
  }

 private:
  Device& device(int index) {
    if (index >= static_cast<int>(devices_.size())) devices_.resize(index + 1);
    Device& d = devices_[index];
    if (d.index < 0) {
      c10::cuda::CUDAGuard g(index);
      d.side = digest_stream(index);
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&d.produced, cudaEventDisableTiming));
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&d.digested, cudaEventDisableTiming));
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&d.done, cudaEventDisableTiming));
      d.index = index;
    }
    return d;
  }

  Buffer* room(Device& d, uint32_t parts, cudaStream_t stream) {
    if (parts > kBufPartials) {
      TORCH_CHECK(false, "triage native: a tensor of more than ", kBufPartials, " digest chunks");
    }
    while (d.cur < d.bufs.size() && d.bufs[d.cur].used + parts > kBufPartials) ++d.cur;
    if (d.cur == d.bufs.size()) {
      Buffer b;
      // kept for the tracer's life (one allocation, at its first steps, usually one buffer);
      // not from the caching allocator, which may be torn down before this at exit
      C10_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&b.dev), kBufPartials * sizeof(Partial)));
      d.bufs.push_back(b);
    }
    return &d.bufs[d.cur];
  }

  std::vector<Device> devices_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return nullptr;
  }
  return std::make_unique<CudaBackend>();
}

}  // namespace triage
