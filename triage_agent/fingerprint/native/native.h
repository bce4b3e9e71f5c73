// The native tracer's state: digest staging with an exact dedup cache, the RecordFunction
// observer that records ATen op events, and the step's records until they are flushed.
// Declarations shared by capture.cpp (device independent), cuda_backend.cpp (CUDA only)
// and bindings.cpp (Python).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "digest_math.h"

namespace triage {

// codes for an observed tensor that has no digest computation of its own
constexpr int32_t kNoDigest = -1;  // the record holds null (sparse, quantized, meta, ...)
constexpr int32_t kUninitialized = -2;
constexpr int32_t kEmptyTensor = -3;
// Memory an empty* op returned and nothing has written: kUninitBase - r, where r is the
// digest of the bytes it holds all the same (kept beside the sentinel in the record).
constexpr int32_t kUninitBase = -16;

enum Phase : uint8_t { kForward = 0, kBackward = 1, kOptimizer = 2, kOther = 3 };

struct Result {
  int16_t device = -1;  // -1: computed on the host, values final
  uint8_t itemsize = 1;
  uint8_t flags = 0;
  uint64_t nbytes = 0;
  int32_t buf = -1;  // device partials: buffer, first partial, count
  uint32_t part0 = 0;
  uint32_t nparts = 0;
  uint64_t x = 0;
  uint32_t a = 0;
  uint32_t b = 0;
};

// A device tensor to digest, and what must stay alive until its launch.
struct DeviceJob {
  Job job;
  Dims dims;
  int32_t result;
  int device;
  at::Tensor keep;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Launch the jobs: on the current stream, or on the digest stream after it waits for the
  // current one (and the allocator is told the digest stream uses each tensor).
  virtual void launch(std::vector<DeviceJob>& jobs, std::vector<Result>& results, bool side) = 0;
  // Every current stream waits for the digests issued so far on the digest stream.
  virtual void guard() = 0;
  // Read every partial of this step back (one copy per buffer) and fill the results.
  virtual void resolve(std::vector<Result>& results) = 0;
  virtual void begin_step() = 0;
  virtual std::string rng_state(int device) = 0;
};

std::unique_ptr<DeviceBackend> make_cuda_backend();  // nullptr in a CPU-only build

struct OpInfo {
  std::string name;  // schema name, ".overload" unless the default overload
  int32_t index = 0;
  bool composite = false;  // decomposed above the dispatch mode's key: never an event itself
  bool skip = false;       // profiler:: markers
  bool mutates = false;
  bool seeded = false;
  bool allocates = false;
  uint8_t mode = kXor;
  std::vector<int32_t> write_args;
};

struct Obs {
  int32_t result;
  int16_t dtype;
  int64_t numel;
  c10::SmallVector<int64_t, 5> shape;
};

struct OpRecord {
  int64_t seq;
  const OpInfo* op;
  int32_t scope;
  uint8_t phase;
  int32_t call;
  std::vector<Obs> ins;
  std::vector<Obs> outs;
  std::string rng;     // generator state bytes before the op (seeded ops)
  std::string caller;  // file:line of the user frame (ops that write), empty if none
};

struct Options {
  bool side_stream = false;
  bool cache = false;  // reuse digests across events (exact for dispatcher-visible writes only)
  uint8_t base_mode = kXor;
  std::vector<std::string> order_names;
};

struct CacheEntry {
  int32_t result;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uint64_t gen;
  uint64_t all_gen;
};

struct VecHash {
  size_t operator()(const std::vector<uint64_t>& v) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t x : v) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// The storage an empty* op returned: trusted only while it lives at the same bytes (freed or
// resized, its old address goes to another tensor, at version 0 too) and for tensors on it.
struct UninitEntry {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  const void* base;
  size_t nbytes;
};

struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& p) const noexcept {
    return static_cast<size_t>(p.first * 0x9E3779B97F4A7C15ull ^ p.second);
  }
};

enum class Observe : uint8_t { kOff = 0, kWrites = 1, kOps = 2 };

class State {
 public:
  explicit State(Options opts);
  ~State();

  void set_dtype(int scalar_type, std::string name);
  // Python-side staging (module hooks, collectives, optimizer): codes, one per tensor.
  std::vector<int32_t> stage(const std::vector<at::Tensor>& ts, uint8_t flags, bool fresh);
  uint8_t mode_for(const std::string& name) const;

  void begin_step();
  // Observer off, device buffers and streams freed: at the tracer's close, while CUDA is up
  // (not at interpreter exit, when the runtime may already be torn down).
  void release();
  void observe(Observe what);
  void guard();
  int64_t next_seq();
  int32_t scope_id(const std::string& scope);
  void set_forward_scope(int32_t scope, bool in_scope);
  void set_backward_scope(int32_t scope, bool in_scope);
  void set_outside_in_scope(bool in_scope);
  void set_suspended(bool v);
  void set_in_optimizer(bool v);
  // file:line of the user frame, asked (with the GIL) for each op that writes
  void set_caller(std::function<std::string()> fn) { caller_ = std::move(fn); }

  // Resolve every digest of the step (one readback per device buffer).
  void resolve();
  const std::vector<Result>& results() const { return results_; }
  std::vector<OpRecord>& records() { return records_; }
  const std::string& scope_name(int32_t id) const { return scopes_[id]; }
  const std::string& dtype_name(int16_t t) const { return dtype_names_[t]; }
  int64_t digests_staged() const { return digests_staged_; }
  int64_t cache_hits() const { return cache_hits_; }
  bool has_device() const { return device_ != nullptr; }

  // RecordFunction callbacks
  static std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn);
  static void on_op_end(const at::RecordFunction& fn, at::ObserverContext* ctx);
  static std::unique_ptr<at::ObserverContext> on_write_start(const at::RecordFunction& fn);

 private:
  const OpInfo* op_info(const at::RecordFunction& fn);
  int32_t stage_one(const at::Tensor& t, uint8_t flags, bool fresh, std::vector<DeviceJob>& jobs,
                    std::vector<at::Tensor>& temps);
  int32_t stage_bytes(const at::Tensor& t, uint8_t flags, bool fresh, std::vector<DeviceJob>& jobs,
                      std::vector<at::Tensor>& temps);
  bool unwritten(const at::Tensor& t);
  std::vector<Obs> stage_obs(const std::vector<at::Tensor>& ts, uint8_t flags, bool fresh);
  void launch(std::vector<DeviceJob>& jobs);
  void note_writes(const at::RecordFunction& fn, const OpInfo& op);
  void bump_storage(const at::Tensor& t);
  std::string rng_state(const std::vector<at::Tensor>& ins);
  bool cache_guarded() const { return opts_.cache && observe_ != Observe::kOff; }

  Options opts_;
  std::function<std::string()> caller_;
  std::unique_ptr<DeviceBackend> device_;
  std::mutex mu_;
  std::vector<std::string> dtype_names_;
  std::vector<std::string> scopes_;
  std::unordered_map<std::string, int32_t> scope_ids_;
  int32_t fwd_scope_ = -1;
  bool fwd_in_ = true;
  int32_t bwd_scope_ = 0;
  bool bwd_in_ = true;
  bool outside_in_ = true;
  bool suspended_ = false;
  bool in_optimizer_ = false;
  Observe observe_ = Observe::kOff;
  at::CallbackHandle handle_ = at::INVALID_CALLBACK_HANDLE;
  int64_t seq_ = 0;
  std::unordered_map<uint64_t, int32_t> calls_;
  std::vector<OpRecord> records_;
  std::vector<Result> results_;
  std::unordered_map<std::vector<uint64_t>, CacheEntry, VecHash> cache_;
  std::unordered_map<const void*, uint64_t> storage_gen_;
  uint64_t all_gen_ = 0;
  std::unordered_map<std::pair<uint64_t, uint64_t>, UninitEntry, PairHash> uninit_;
  std::unordered_map<const char*, const OpInfo*> op_by_name_;
  std::vector<std::unique_ptr<OpInfo>> ops_;
  int64_t digests_staged_ = 0;
  int64_t cache_hits_ = 0;
};

// The one state the callbacks report to (one tracer per process).
extern std::atomic<State*> g_state;

// > 0 while this library runs ATen ops of its own: the observer lets them through unseen.
struct NativeGuard {
  NativeGuard();
  ~NativeGuard();
};

std::string render_record(const State& s, const OpRecord& r, int64_t step, const std::string& rng_hex);

}  // namespace triage
