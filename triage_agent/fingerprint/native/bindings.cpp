// Python interface of the native tracer (see backend.py, the only caller).
#include <torch/extension.h>

#include "native.h"

namespace py = pybind11;
using triage::State;

namespace {

py::tuple flush(State& s, int64_t step, const py::function& rng_hash) {
  s.resolve();
  const auto& results = s.results();
  py::list digest(results.size());
  py::list order(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const triage::Result& r = results[i];
    const uint64_t xv = triage::sign_extend(triage::fold_xor(r.x, r.itemsize), r.itemsize);
    const uint64_t ov = triage::combine(r.a, r.b, r.nbytes);
    digest[i] = py::int_((r.flags & triage::kXor) ? xv : ov);
    order[i] = (r.flags & triage::kOrder) ? py::object(py::int_(ov)) : py::object(py::none());
  }
  py::list lines(s.records().size());
  size_t k = 0;
  for (const triage::OpRecord& rec : s.records()) {
    std::string rng;
    if (!rec.rng.empty()) rng = py::cast<std::string>(rng_hash(py::bytes(rec.rng)));
    lines[k++] = py::make_tuple(rec.seq, triage::render_record(s, rec, step, rng));
  }
  s.records().clear();
  return py::make_tuple(digest, order, lines);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<State>(m, "State")
      .def(py::init([](bool side_stream, bool cache, int base_mode, std::vector<std::string> order_names) {
             triage::Options o;
             o.side_stream = side_stream;
             o.cache = cache;
             o.base_mode = static_cast<uint8_t>(base_mode);
             o.order_names = std::move(order_names);
             return std::make_unique<State>(std::move(o));
           }),
           py::arg("side_stream"), py::arg("cache"), py::arg("base_mode"), py::arg("order_names"))
      .def("set_dtype", [](State& s, const at::Tensor& example, std::string name) {
        s.set_dtype(static_cast<int>(example.scalar_type()), std::move(name));
      })
      .def("stage", &State::stage)
      .def("begin_step", &State::begin_step)
      .def("release", &State::release)
      .def("observe", [](State& s, int what) { s.observe(static_cast<triage::Observe>(what)); })
      .def("guard", &State::guard)
      .def("next_seq", &State::next_seq)
      .def("scope_id", &State::scope_id)
      .def("set_forward_scope", &State::set_forward_scope)
      .def("set_backward_scope", &State::set_backward_scope)
      .def("set_outside_in_scope", &State::set_outside_in_scope)
      .def("set_suspended", &State::set_suspended)
      .def("set_in_optimizer", &State::set_in_optimizer)
      .def("set_caller",
           [](State& s, py::function fn) {
             auto keep = std::make_shared<py::function>(std::move(fn));
             s.set_caller([keep]() -> std::string {
               py::gil_scoped_acquire gil;
               py::object r = (*keep)();
               return r.is_none() ? std::string() : py::cast<std::string>(r);
             });
           })
      .def("flush", &flush)
      .def_property_readonly("has_device", &State::has_device)
      .def_property_readonly("digests_staged", &State::digests_staged)
      .def_property_readonly("cache_hits", &State::cache_hits);
}
