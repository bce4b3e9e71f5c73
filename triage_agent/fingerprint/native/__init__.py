"""The tracer's per-event host path in C++ (a torch extension built on first use).

:mod:`.loader` builds and caches the extension; :mod:`.backend` holds
:class:`NativeTracer`, a :class:`~triage_agent.fingerprint.capture.Tracer` whose digests
and op observer run in C++, :func:`make_tracer`, which picks it where it can run, and
:func:`injected_tracer`, which an injected process installs (native where it is built). The
C++ sources beside them: ``digest_math.h`` (the digest functions), ``digest_kernels.cu``
(batched CUDA launches), ``capture.cpp`` (staging, exact reuse, the RecordFunction
observer, trace lines), ``cuda_backend.cpp`` (streams, lifetimes, readback),
``bindings.cpp`` (Python). See docs/tracer_speed.md.
"""

from .backend import NativeTracer, NativeUnavailable, injected_tracer, make_tracer
from .loader import build, load, unavailable_reason

__all__ = [
    "NativeTracer",
    "NativeUnavailable",
    "build",
    "injected_tracer",
    "load",
    "make_tracer",
    "unavailable_reason",
]
