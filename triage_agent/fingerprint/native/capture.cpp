// Device-independent half of the native tracer: what to digest (and whether it was
// digested already), the host digest, the RecordFunction observer and the trace lines.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/resolve_conj.h>
#include <ATen/ops/resolve_neg.h>
#if __has_include(<torch/csrc/autograd/node.h>)
#include <torch/csrc/autograd/node.h>
#else
#include <torch/csrc/autograd/function.h>
#endif

#include <cinttypes>
#include <cstdio>

#include "native.h"

namespace triage {

std::atomic<State*> g_state{nullptr};

namespace {

thread_local int tl_native = 0;
// One frame per RecordFunction this thread is inside: transparent (a composite op, whose
// inner ops may be events), opaque (inside an event, or an op the tracer lets through), or
// an event being recorded.
enum Frame : uint8_t { kTransparent = 0, kOpaque = 1, kEvent = 2 };
thread_local std::vector<uint8_t> tl_frames;
thread_local int tl_opaque = 0;

struct PendingOp {
  const OpInfo* op;
  int32_t scope;
  uint8_t phase;
  std::vector<Obs> ins;
  std::string rng;
};
thread_local std::vector<PendingOp> tl_pending;

bool glob_match(const char* p, const char* s) {
  // fnmatch.fnmatchcase: '*', '?', '[seq]', '[!seq]'
  const char* star = nullptr;
  const char* back = nullptr;
  while (*s) {
    if (*p == '*') {
      star = ++p;
      back = s;
      continue;
    }
    bool ok = false;
    const char* next = p + 1;
    if (*p == '?') {
      ok = true;
    } else if (*p == '[') {
      const char* q = p + 1;
      bool neg = *q == '!';
      if (neg) ++q;
      bool hit = false;
      const char* first = q;
      while (*q && (*q != ']' || q == first)) {
        if (q[1] == '-' && q[2] && q[2] != ']') {
          if (*s >= q[0] && *s <= q[2]) hit = true;
          q += 3;
        } else {
          if (*s == *q) hit = true;
          ++q;
        }
      }
      if (*q == ']') {
        ok = hit != neg;
        next = q + 1;
      } else {
        ok = *s == '[';  // no closing bracket: a literal '['
      }
    } else {
      ok = *p && *p == *s;
    }
    if (ok) {
      p = next;
      ++s;
    } else if (star) {
      p = star;
      s = ++back;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == '\0';
}

void collect(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    // a Python number the dispatcher wrapped: the dispatch mode is handed the number back
    if (t.defined() && !t.unsafeGetTensorImpl()->is_wrapped_number()) out.push_back(t);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (t.defined()) out.push_back(t);
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) out.push_back(e.toTensor());
    }
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) collect(e, out);
  }
}

// Integer and bool tensors (indices, token ids, masks) get the order digest in every mode:
// xor is weak exactly there (digest.ORDERED_DTYPES names the same types).
bool always_ordered(c10::ScalarType st) {
  switch (st) {
    case c10::ScalarType::Bool:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::UInt16:
    case c10::ScalarType::UInt32:
    case c10::ScalarType::UInt64:
      return true;
    default:
      return false;
  }
}

void digest_host(const Job& j, const Dims& dm, Result& r) {
  uint64_t x = 0;
  uint32_t a = 0, b = 0;
  const bool order = (j.flags & kOrder) != 0;
  const auto* p = reinterpret_cast<const uint8_t*>(j.ptr);
  if (!(j.flags & kStrided)) {
    const uint64_t n = j.nbytes;
    uint64_t k = 0;
    for (; k + 8 <= n; k += 8) {
      uint64_t w;
      std::memcpy(&w, p + k, 8);
      x ^= w;
    }
    if (k < n) {
      uint64_t w = 0;
      std::memcpy(&w, p + k, n - k);
      x ^= w;
    }
    if (order) {
      const uint64_t nw = n / 4;
      for (uint64_t i = 0; i < nw; ++i) {
        uint32_t w;
        std::memcpy(&w, p + 4 * i, 4);
        a += lane_a(w, i);
        b += lane_b(w, i);
      }
      if (n % 4) {
        uint32_t w = 0;
        std::memcpy(&w, p + 4 * nw, n % 4);
        a += lane_a(w, nw);
        b += lane_b(w, nw);
      }
    }
  } else {
    const int s = j.itemsize;
    const int nd = j.ndim;
    int64_t idx[kMaxDims] = {0};
    int64_t off = 0;
    uint32_t word = 0;
    uint64_t byte = 0;  // logical byte position of the element
    for (uint64_t e = 0; e < j.numel; ++e) {
      uint64_t v = 0;
      std::memcpy(&v, p + off * s, s);
      x ^= v;
      if (order) {
        if (s == 8) {
          a += lane_a(static_cast<uint32_t>(v), 2 * e) + lane_a(static_cast<uint32_t>(v >> 32), 2 * e + 1);
          b += lane_b(static_cast<uint32_t>(v), 2 * e) + lane_b(static_cast<uint32_t>(v >> 32), 2 * e + 1);
        } else {
          word |= static_cast<uint32_t>(v) << (8 * (byte % 4));
          if ((byte + s) % 4 == 0) {
            a += lane_a(word, byte / 4);
            b += lane_b(word, byte / 4);
            word = 0;
          }
        }
      }
      byte += s;
      for (int d = nd - 1; d >= 0; --d) {
        off += dm.strides[d];
        if (++idx[d] < dm.sizes[d]) break;
        off -= dm.strides[d] * dm.sizes[d];
        idx[d] = 0;
      }
    }
    if (order && s < 4 && byte % 4) {
      a += lane_a(word, byte / 4);
      b += lane_b(word, byte / 4);
    }
  }
  r.x = x;
  r.a = a;
  r.b = b;
}

void append_escaped(std::string& out, const std::string& s) {
  // json.dumps(..., ensure_ascii=False)
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void append_hex(std::string& out, uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016" PRIx64 "\"", v);
  out += buf;
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%" PRId64, v);
  out += buf;
}

const char* kPhaseNames[] = {"forward", "backward", "optimizer", "other"};

}  // namespace

NativeGuard::NativeGuard() { ++tl_native; }
NativeGuard::~NativeGuard() { --tl_native; }

#ifndef TRIAGE_WITH_CUDA
std::unique_ptr<DeviceBackend> make_cuda_backend() { return nullptr; }
#endif

State::State(Options opts) : opts_(std::move(opts)), device_(make_cuda_backend()) {
  dtype_names_.resize(64, "unknown");
  scope_id("");
}

State::~State() { observe(Observe::kOff); }

void State::set_dtype(int scalar_type, std::string name) {
  if (scalar_type >= 0 && scalar_type < static_cast<int>(dtype_names_.size())) {
    dtype_names_[scalar_type] = std::move(name);
  }
}

uint8_t State::mode_for(const std::string& name) const {
  if (opts_.base_mode != kXor) return opts_.base_mode;
  for (const std::string& p : opts_.order_names) {
    if (glob_match(p.c_str(), name.c_str())) return kXor | kOrder;
  }
  return kXor;
}

int32_t State::scope_id(const std::string& scope) {
  auto it = scope_ids_.find(scope);
  if (it != scope_ids_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(scopes_.size());
  scopes_.push_back(scope);
  scope_ids_.emplace(scope, id);
  return id;
}

void State::set_forward_scope(int32_t scope, bool in_scope) {
  std::lock_guard<std::mutex> l(mu_);
  fwd_scope_ = scope;
  fwd_in_ = in_scope;
}

void State::set_backward_scope(int32_t scope, bool in_scope) {
  std::lock_guard<std::mutex> l(mu_);
  bwd_scope_ = scope;
  bwd_in_ = in_scope;
}

void State::set_outside_in_scope(bool in_scope) { outside_in_ = in_scope; }

void State::set_suspended(bool v) {
  std::lock_guard<std::mutex> l(mu_);
  suspended_ = v;
}

void State::set_in_optimizer(bool v) {
  std::lock_guard<std::mutex> l(mu_);
  in_optimizer_ = v;
}

int64_t State::next_seq() {
  std::lock_guard<std::mutex> l(mu_);
  return seq_++;
}

void State::begin_step() {
  std::lock_guard<std::mutex> l(mu_);
  seq_ = 0;
  calls_.clear();
  records_.clear();
  results_.clear();
  cache_.clear();
  storage_gen_.clear();
  uninit_.clear();
  if (device_) device_->begin_step();
}

void State::release() {
  observe(Observe::kOff);
  std::lock_guard<std::mutex> l(mu_);
  device_.reset();
}

void State::observe(Observe what) {
  if (what == observe_) return;
  if (handle_ != at::INVALID_CALLBACK_HANDLE) {
    at::removeCallback(handle_);
    handle_ = at::INVALID_CALLBACK_HANDLE;
  }
  observe_ = what;
  if (what == Observe::kOff) {
    State* self = this;
    g_state.compare_exchange_strong(self, nullptr);
  }
  // Thread-local callbacks reach the threads the autograd engine runs this thread's
  // backward on (it carries them over), as the dispatch mode does; other threads are not
  // observed, as they are not by the dispatch mode either.
  if (what == Observe::kOps) {
    g_state.store(this);
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&State::on_op_start, &State::on_op_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
  } else if (what == Observe::kWrites) {
    g_state.store(this);
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&State::on_write_start).scopes({at::RecordScope::FUNCTION}));
  }
}

void State::guard() {
  std::lock_guard<std::mutex> l(mu_);
  if (device_ && opts_.side_stream) device_->guard();
}

const OpInfo* State::op_info(const at::RecordFunction& fn) {
  const char* key = fn.name();
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = op_by_name_.find(key);
    if (it != op_by_name_.end()) return it->second;
  }
  const auto opname = fn.operator_name();
  if (!opname) return nullptr;  // not an operator (a named range): never cached by address
  const auto handle = c10::Dispatcher::singleton().findSchema(*opname);
  if (!handle) return nullptr;
  auto info = std::make_unique<OpInfo>();
  info->name = opname->name + (opname->overload_name.empty() ? "" : "." + opname->overload_name);
  using K = c10::DispatchKey;
  const bool reaches = handle->hasKernelForDispatchKey(K::CPU) || handle->hasKernelForDispatchKey(K::CUDA) ||
                       handle->hasKernelForDispatchKey(K::CompositeExplicitAutograd) ||
                       handle->hasKernelForDispatchKey(K::CompositeExplicitAutogradNonFunctional);
  info->composite = !reaches;
  info->skip = info->name.rfind("profiler::", 0) == 0;
  const c10::FunctionSchema& schema = handle->schema();
  info->mutates = schema.is_mutable();
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    if (alias && alias->isWrite()) info->write_args.push_back(static_cast<int32_t>(i));
  }
  info->seeded = handle->hasTag(at::Tag::nondeterministic_seeded);
  info->allocates = info->name.rfind("aten::empty", 0) == 0 || info->name.rfind("aten::new_empty", 0) == 0;
  info->mode = mode_for(info->name);
  std::lock_guard<std::mutex> l(mu_);
  auto it = op_by_name_.find(key);
  if (it != op_by_name_.end()) return it->second;
  info->index = static_cast<int32_t>(ops_.size());
  const OpInfo* raw = info.get();
  ops_.push_back(std::move(info));
  op_by_name_.emplace(key, raw);
  return raw;
}

bool State::unwritten(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->is_inference()) return false;
  const uint64_t ptr = reinterpret_cast<uint64_t>(t.const_data_ptr());
  const auto it = uninit_.find({ptr, impl->version_counter().current_version()});
  if (it == uninit_.end()) return false;
  const UninitEntry& e = it->second;
  const c10::intrusive_ptr<c10::StorageImpl> st = e.storage.lock();
  if (!st || st->data() != e.base || st->nbytes() != e.nbytes) {
    uninit_.erase(it);  // this memory is someone else's now
    return false;
  }
  return t.storage().unsafeGetStorageImpl() == st.get();
}

int32_t State::stage_one(const at::Tensor& t, uint8_t flags, bool fresh, std::vector<DeviceJob>& jobs,
                         std::vector<at::Tensor>& temps) {
  if (!t.defined() || t.layout() != c10::kStrided || t.is_quantized() || t.is_nested() || t.is_meta()) {
    return kNoDigest;
  }
  if (!t.has_storage()) return t.numel() == 0 ? kEmptyTensor : kNoDigest;
  const bool marked = !uninit_.empty() && t.const_data_ptr() && t.numel() && unwritten(t);
  const int32_t r = stage_bytes(t, flags, fresh, jobs, temps);
  return marked && r >= 0 ? kUninitBase - r : r;
}

int32_t State::stage_bytes(const at::Tensor& t, uint8_t flags, bool fresh, std::vector<DeviceJob>& jobs,
                           std::vector<at::Tensor>& temps) {
  if (always_ordered(t.scalar_type())) flags = kOrder;
  const int64_t numel = t.numel();
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const bool versioned = !impl->is_inference();
  const uint64_t version = versioned ? impl->version_counter().current_version() : 0;
  const uint64_t ptr = reinterpret_cast<uint64_t>(t.const_data_ptr());
  if (numel == 0) return kEmptyTensor;
  if (!ptr) return kNoDigest;
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  // The key names the bytes and the way they are read; a hit also needs the storage alive
  // (memory freed and reused is never a hit) and unwritten since (see note_writes).
  std::vector<uint64_t> key{ptr,
                            static_cast<uint64_t>(numel),
                            static_cast<uint64_t>(t.scalar_type()) | (uint64_t{flags} << 8) |
                                (static_cast<uint64_t>(t.is_conj()) << 16) |
                                (static_cast<uint64_t>(t.is_neg()) << 17),
                            version,
                            reinterpret_cast<uint64_t>(storage)};
  const bool contiguous = t.is_contiguous();
  const bool dense = contiguous || t.is_non_overlapping_and_dense();
  // xor is blind to order: a dense permutation of the same bytes reads as one block
  const bool logical = (flags & kOrder) ? !contiguous : !dense;
  if (logical) {
    for (int64_t d = 0; d < t.dim(); ++d) key.push_back(static_cast<uint64_t>(t.size(d)));
    for (int64_t d = 0; d < t.dim(); ++d) key.push_back(static_cast<uint64_t>(t.stride(d)));
  }
  if (versioned) {
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      const CacheEntry& e = it->second;
      const auto g = storage_gen_.find(storage);
      const uint64_t gen = g == storage_gen_.end() ? 0 : g->second;
      if (!fresh && !e.storage.expired() && e.gen == gen && e.all_gen == all_gen_) {
        ++cache_hits_;
        return e.result;
      }
    }
  }
  at::Tensor h = t;
  if (t.is_conj() || t.is_neg()) {
    // the Python path digests the logical values of a lazily conjugated or negated view
    NativeGuard g;
    h = at::resolve_neg(at::resolve_conj(t));
    temps.push_back(h);
  }
  int s = static_cast<int>(h.element_size());
  const bool complex = h.is_complex();
  if (complex) s /= 2;  // real and imaginary parts, as view_as_real reads them
  bool strided = logical;
  const uint64_t hptr = reinterpret_cast<uint64_t>(h.const_data_ptr());
  if ((strided && h.dim() + (complex ? 1 : 0) > kMaxDims) || hptr % s != 0) {
    NativeGuard g;
    h = h.contiguous().clone();
    temps.push_back(h);
    strided = false;
  }
  Job j{};
  j.ptr = reinterpret_cast<uint64_t>(h.const_data_ptr());
  j.numel = static_cast<uint64_t>(numel) * (complex ? 2 : 1);
  j.itemsize = static_cast<uint8_t>(s);
  j.nbytes = j.numel * s;
  j.flags = static_cast<uint8_t>(flags | (strided ? kStrided : 0));
  Dims dims{};
  if (strided) {
    int nd = 0;
    for (int64_t d = 0; d < h.dim(); ++d) {
      dims.sizes[nd] = h.size(d);
      dims.strides[nd] = h.stride(d) * (complex ? 2 : 1);
      ++nd;
    }
    if (complex) {
      dims.sizes[nd] = 2;
      dims.strides[nd] = 1;
      ++nd;
    }
    j.ndim = static_cast<uint8_t>(nd);
  }
  const int32_t r = static_cast<int32_t>(results_.size());
  results_.emplace_back();
  Result& res = results_.back();
  res.itemsize = static_cast<uint8_t>(s);
  res.flags = flags;
  res.nbytes = j.nbytes;
  if (h.is_cpu()) {
    digest_host(j, dims, res);
  } else if (h.is_cuda() && device_) {
    res.device = static_cast<int16_t>(h.get_device());
    jobs.push_back(DeviceJob{j, dims, r, h.get_device(), h});
  } else {
    results_.pop_back();
    return kNoDigest;
  }
  ++digests_staged_;
  if (versioned) {
    const auto g = storage_gen_.find(storage);
    cache_.insert_or_assign(std::move(key), CacheEntry{r, t.storage().getWeakStorageImpl(),
                                                       g == storage_gen_.end() ? 0 : g->second, all_gen_});
  }
  return r;
}

void State::launch(std::vector<DeviceJob>& jobs) {
  if (!jobs.empty()) device_->launch(jobs, results_, opts_.side_stream);
  jobs.clear();
}

std::vector<int32_t> State::stage(const std::vector<at::Tensor>& ts, uint8_t flags, bool fresh) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<int32_t> codes;
  codes.reserve(ts.size());
  std::vector<DeviceJob> jobs;
  std::vector<at::Tensor> temps;
  for (const at::Tensor& t : ts) codes.push_back(stage_one(t, flags, fresh, jobs, temps));
  launch(jobs);
  if (!cache_guarded()) cache_.clear();  // unobserved code runs next: nothing carries over
  return codes;
}

std::vector<Obs> State::stage_obs(const std::vector<at::Tensor>& ts, uint8_t flags, bool fresh) {
  std::vector<Obs> out;
  out.reserve(ts.size());
  std::vector<DeviceJob> jobs;
  std::vector<at::Tensor> temps;
  for (const at::Tensor& t : ts) {
    Obs o;
    o.result = stage_one(t, flags, fresh, jobs, temps);
    o.dtype = static_cast<int16_t>(t.scalar_type());
    o.numel = t.numel();
    for (int64_t d = 0; d < t.dim(); ++d) o.shape.push_back(t.size(d));
    out.push_back(std::move(o));
  }
  launch(jobs);
  return out;
}

void State::bump_storage(const at::Tensor& t) {
  if (t.defined() && t.has_storage()) ++storage_gen_[t.storage().unsafeGetStorageImpl()];
}

void State::note_writes(const at::RecordFunction& fn, const OpInfo& op) {
  // An op about to write its arguments: digests of those storages are stale from now on
  // (whatever the version counter says), and the write waits for their pending digests.
  const auto ins = fn.inputs();
  for (int32_t i : op.write_args) {
    if (i >= static_cast<int32_t>(ins.size())) continue;
    std::vector<at::Tensor> ts;
    collect(ins[i], ts);
    for (const at::Tensor& t : ts) bump_storage(t);
  }
  if (device_ && opts_.side_stream) device_->guard();
}

std::string State::rng_state(const std::vector<at::Tensor>& ins) {
  NativeGuard g;
  if (!ins.empty() && ins[0].is_cuda() && device_) return device_->rng_state(ins[0].get_device());
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor st = gen.get_state();
  return std::string(static_cast<const char*>(st.const_data_ptr()), st.nbytes());
}

std::unique_ptr<at::ObserverContext> State::on_op_start(const at::RecordFunction& fn) {
  State* s = g_state.load();
  if (tl_native || s == nullptr) {
    tl_frames.push_back(kTransparent);
    return nullptr;
  }
  const OpInfo* op = s->op_info(fn);
  if (op == nullptr) {
    tl_frames.push_back(kTransparent);
    return nullptr;
  }
  std::lock_guard<std::mutex> l(s->mu_);
  if (tl_opaque > 0 || op->composite) {
    // inside an event (or a decomposing op): not an event, but its writes still count
    tl_frames.push_back(op->composite && tl_opaque == 0 ? kTransparent : kOpaque);
    if (tl_frames.back() == kOpaque) ++tl_opaque;
    if (op->mutates) s->note_writes(fn, *op);
    return nullptr;
  }
  int32_t scope;
  uint8_t phase;
  bool in_scope;
  if (s->fwd_scope_ >= 0) {
    scope = s->fwd_scope_;
    phase = kForward;
    in_scope = s->fwd_in_;
  } else if (torch::autograd::get_current_node()) {
    scope = s->bwd_scope_;
    phase = kBackward;
    in_scope = s->bwd_in_;
  } else {
    scope = 0;
    phase = s->in_optimizer_ ? kOptimizer : kOther;
    in_scope = s->outside_in_;
  }
  ++tl_opaque;
  if (s->observe_ != Observe::kOps || s->suspended_ || op->skip || !in_scope) {
    tl_frames.push_back(kOpaque);
    if (op->mutates) s->note_writes(fn, *op);
    return nullptr;
  }
  tl_frames.push_back(kEvent);
  std::vector<at::Tensor> ins;
  for (const c10::IValue& v : fn.inputs()) collect(v, ins);
  PendingOp p{op, scope, phase, s->stage_obs(ins, op->mode, false), {}};
  if (op->seeded) p.rng = s->rng_state(ins);
  if (op->mutates) {
    if (!s->uninit_.empty()) {
      for (const at::Tensor& t : ins) {
        if (t.has_storage() && !t.unsafeGetTensorImpl()->is_inference()) {
          s->uninit_.erase({reinterpret_cast<uint64_t>(t.const_data_ptr()),
                            t.unsafeGetTensorImpl()->version_counter().current_version()});
        }
      }
    }
    s->note_writes(fn, *op);
  }
  if (!s->cache_guarded()) s->cache_.clear();  // nothing carries over to the next event
  tl_pending.push_back(std::move(p));
  return nullptr;
}

void State::on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (tl_frames.empty()) return;
  const uint8_t frame = tl_frames.back();
  tl_frames.pop_back();
  if (frame == kTransparent) return;
  --tl_opaque;
  if (frame == kOpaque) return;
  PendingOp p = std::move(tl_pending.back());
  tl_pending.pop_back();
  State* s = g_state.load();
  if (s == nullptr) return;
  std::vector<at::Tensor> outs;
  for (const c10::IValue& v : fn.outputs()) collect(v, outs);
  // the Python path asks for the caller after the op, from the same frames; the GIL is
  // taken with the state unlocked (a Python thread may hold the GIL and wait for the lock)
  std::string caller =
      (p.op->mutates || p.op->seeded) && s->caller_ ? s->caller_() : std::string();
  std::lock_guard<std::mutex> l(s->mu_);
  if (p.op->allocates) {
    for (const at::Tensor& t : outs) {
      if (t.has_storage() && !t.unsafeGetTensorImpl()->is_inference()) {
        s->uninit_.insert_or_assign(
            {reinterpret_cast<uint64_t>(t.const_data_ptr()),
             t.unsafeGetTensorImpl()->version_counter().current_version()},
            UninitEntry{t.storage().getWeakStorageImpl(), t.storage().data(), t.storage().nbytes()});
      }
    }
  }
  OpRecord rec;
  rec.seq = s->seq_++;
  rec.caller = std::move(caller);
  rec.op = p.op;
  rec.scope = p.scope;
  rec.phase = p.phase;
  rec.call = s->calls_[(static_cast<uint64_t>(p.scope) << 32) | static_cast<uint32_t>(p.op->index)]++;
  rec.ins = std::move(p.ins);
  rec.outs = s->stage_obs(outs, p.op->mode, p.op->mutates);
  if (!s->cache_guarded()) s->cache_.clear();
  rec.rng = std::move(p.rng);
  s->records_.push_back(std::move(rec));
}

std::unique_ptr<at::ObserverContext> State::on_write_start(const at::RecordFunction& fn) {
  State* s = g_state.load();
  if (tl_native || s == nullptr) return nullptr;
  const OpInfo* op = s->op_info(fn);
  if (op == nullptr || !op->mutates) return nullptr;
  // No inputs here (asking for them costs every op): any write makes every cached digest
  // stale and waits for every pending one.
  std::lock_guard<std::mutex> l(s->mu_);
  ++s->all_gen_;
  if (s->device_ && s->opts_.side_stream) s->device_->guard();
  return nullptr;
}

void State::resolve() {
  std::lock_guard<std::mutex> l(mu_);
  if (device_) device_->resolve(results_);
}

std::string render_record(const State& s, const OpRecord& r, int64_t step, const std::string& rng_hex) {
  std::string out;
  out.reserve(256);
  out += "{\"type\":\"event\",\"seq\":";
  append_int(out, r.seq);
  out += ",\"step\":";
  append_int(out, step);
  out += ",\"kind\":\"op\",\"name\":";
  append_escaped(out, r.op->name);
  out += ",\"scope\":";
  append_escaped(out, s.scope_name(r.scope));
  out += ",\"call\":";
  append_int(out, r.call);
  out += ",\"phase\":\"";
  out += kPhaseNames[r.phase];
  out += "\"";
  if (!r.caller.empty()) {
    out += ",\"caller\":";
    append_escaped(out, r.caller);
  }
  const auto& results = s.results();
  auto list = [&](const char* key, const std::vector<Obs>& obs) {
    out += key;
    out.push_back('[');
    for (size_t i = 0; i < obs.size(); ++i) {
      if (i) out.push_back(',');
      const Obs& o = obs[i];
      if (o.result == kNoDigest) {
        out += "null";
        continue;
      }
      out += "{\"shape\":[";
      for (size_t d = 0; d < o.shape.size(); ++d) {
        if (d) out.push_back(',');
        append_int(out, o.shape[d]);
      }
      out += "],\"dtype\":";
      append_escaped(out, s.dtype_name(o.dtype));
      out += ",\"numel\":";
      append_int(out, o.numel);
      out += ",\"digest\":";
      if (o.numel == 0 || o.result == kEmptyTensor) {
        out += "\"empty\"}";
        continue;
      }
      if (o.result == kUninitialized) {
        out += "\"uninitialized\"}";
        continue;
      }
      const bool marked = o.result <= kUninitBase;
      if (marked) out += "\"uninitialized\",\"value\":";
      const Result& res = results[marked ? kUninitBase - o.result : o.result];
      const uint64_t xv = sign_extend(fold_xor(res.x, res.itemsize), res.itemsize);
      const uint64_t ov = combine(res.a, res.b, res.nbytes);
      append_hex(out, (res.flags & kXor) ? xv : ov);
      if (res.flags & kOrder) {
        out += marked ? ",\"value_order\":" : ",\"order\":";
        append_hex(out, ov);
      }
      out.push_back('}');
    }
    out.push_back(']');
  };
  list(",\"inputs\":", r.ins);
  list(",\"outputs\":", r.outs);
  out += ",\"meta\":{";
  if (!rng_hex.empty()) {
    out += "\"rng\":";
    append_escaped(out, rng_hex);
  }
  out += "}}";
  return out;
}

}  // namespace triage
