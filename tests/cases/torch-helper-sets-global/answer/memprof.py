"""The fix the ground truth applies: profiling leaves the process's floating-point mode as
it is (no flush of subnormal values to zero), so the job computes what it computes without
the profiler."""


def attach(model):
    import memprof

    prof = memprof.MemProfile()
    prof.watch(model)
    return prof
