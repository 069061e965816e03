"""Source instrumentation: the definitions that make the kernel's IKET calls record events.

Takes the generated CUDA (or, for the CPU backend, C) source of one kernel and the registered
events; gives the source with, at its top, a record buffer and the event macros. Every event a
thread executes appends one 32-byte record to the module's global buffer `tl_iket_records`
(slots from the counter `tl_iket_count`; a warp takes its slots with one atomic):

    word 0, 1   globaltimer (ns) low, high       (CPU: CLOCK_MONOTONIC)
    word 2      linear block index
    word 3      linear thread index              (CPU: 0xffffffff, no threads there)
    word 4      event id | RANGE_END_BIT | HAS_PAYLOAD_BIT | FLOAT_BIT
    word 5      payload bits (0 without a runtime payload)
    word 6      SM id                            (CPU: the OpenMP worker)
    word 7      active-lane mask of the warp     (CPU: 0)

`__iket_meta_info` is the kernel's event table as a JSON string, so the host side reads the
names back from the source alone (runtime.Tracer). Records past CAPACITY are counted, not kept.
"""
from __future__ import annotations

import json
import re

from .frontend import EVENT, PAYLOAD_F32, PAYLOAD_U32, RANGE_END, Event

MARKER = "__tilelang_iket_tool__"
CAPACITY = 1 << 18  # records per launch (8 MiB)
RECORD_WORDS = 8
RANGE_END_BIT, HAS_PAYLOAD_BIT, FLOAT_BIT = 1 << 16, 1 << 17, 1 << 18
ID_MASK = 0xFFFF
_CALL = re.compile(r"\b(?:%s|%s|%s|%s)\(\s*(\d+)" % (EVENT, RANGE_END, PAYLOAD_U32, PAYLOAD_F32))
_META = re.compile(r'#define TL_IKET_META ("(?:[^"\\]|\\.)*")')

_CUDA_RECORD = r"""
extern "C" {
__device__ unsigned int tl_iket_count;
__device__ uint4 tl_iket_records[2 * TL_IKET_CAPACITY];
__device__ __attribute__((used)) const char __iket_meta_info[] = TL_IKET_META;
}
static __device__ __forceinline__ void tl_iket_record(unsigned int word, unsigned int payload) {
  unsigned long long t;
  unsigned int lane, sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const unsigned int mask = __activemask();
  const unsigned int leader = __ffs(mask) - 1;
  unsigned int base = 0;
  if (lane == leader) base = atomicAdd(&tl_iket_count, (unsigned int)__popc(mask));
  base = __shfl_sync(mask, base, leader);
  const unsigned int slot = base + __popc(mask & ((1u << lane) - 1u));
  if (slot < TL_IKET_CAPACITY) {
    const unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    tl_iket_records[2 * slot] = make_uint4((unsigned int)t, (unsigned int)(t >> 32), block, thread);
    tl_iket_records[2 * slot + 1] = make_uint4(word, payload, sm, mask);
  }
}
static __device__ __forceinline__ unsigned int tl_iket_f32_bits(float v) { return __float_as_uint(v); }
"""

_C_RECORD = r"""
#include <stdint.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
uint32_t tl_iket_count;
uint32_t tl_iket_records[8 * (size_t)TL_IKET_CAPACITY];
const char __iket_meta_info[] = TL_IKET_META;
static inline void tl_iket_record_at(uint32_t word, uint32_t payload, int64_t block) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  const uint32_t slot = __atomic_fetch_add(&tl_iket_count, 1u, __ATOMIC_RELAXED);
  if (slot < TL_IKET_CAPACITY) {
    uint32_t* r = tl_iket_records + 8 * (size_t)slot;
#ifdef _OPENMP
    const uint32_t worker = (uint32_t)omp_get_thread_num();
#else
    const uint32_t worker = 0;
#endif
    r[0] = (uint32_t)t; r[1] = (uint32_t)(t >> 32); r[2] = (uint32_t)block; r[3] = 0xffffffffu;
    r[4] = word; r[5] = payload; r[6] = worker; r[7] = 0;
  }
}
static inline uint32_t tl_iket_f32_bits(float v) { uint32_t u; memcpy(&u, &v, 4); return u; }
/* NOTE: tl_b is the CPU codegen's linear block index, in scope in every kernel body */
#define tl_iket_record(WORD, PAYLOAD) tl_iket_record_at((WORD), (PAYLOAD), tl_b)
"""


def events_in(code: str) -> set:
    """The event ids the source's IKET calls use."""
    return {int(m.group(1)) for m in _CALL.finditer(code)}


def instrument(code: str, events: list, *, runtime_payloads: bool, language: str) -> str:
    """`code` with the record buffer and event macros in front (unchanged when it has no IKET
    call or is already instrumented). `events`: the registered Events; those the source uses
    must all be there."""
    if MARKER in code:
        return code
    used = events_in(code)
    if not used:
        return code
    by_id = {e.event_id: e for e in events}
    missing = sorted(used - set(by_id))
    if missing:
        raise ValueError(f"iket: the kernel uses event ids {missing}, which are not registered (was it built "
                         "before an iket.reset() or in another iket.session?); build it inside the session "
                         "that compiles it")
    table = [_event_dict(by_id[i]) for i in sorted(used)]
    meta = json.dumps(json.dumps({"version": 1, "language": language, "runtime_payloads": runtime_payloads,
                                  "events": table}, sort_keys=True), ensure_ascii=True)
    lines = [f"// {MARKER}: in-kernel event records of tilelang.tools.cuda.iket",
             f"#define TL_IKET_CAPACITY {CAPACITY}u", f"#define TL_IKET_META {meta}",
             _CUDA_RECORD if language == "cuda" else _C_RECORD,
             f"#define {EVENT}(ID) tl_iket_record((unsigned int)(ID), 0u)",
             f"#define {RANGE_END}(ID) tl_iket_record((unsigned int)(ID) | {RANGE_END_BIT}u, 0u)"]
    if runtime_payloads:
        lines += [f"#define {PAYLOAD_U32}(ID, VALUE) tl_iket_record((unsigned int)(ID) | {HAS_PAYLOAD_BIT}u, "
                  "(unsigned int)(VALUE))",
                  f"#define {PAYLOAD_F32}(ID, VALUE) tl_iket_record((unsigned int)(ID) | "
                  f"{HAS_PAYLOAD_BIT | FLOAT_BIT}u, tl_iket_f32_bits((float)(VALUE)))"]
    else:  # the public IKET's meaning: without runtime payloads an event records no value
        lines += [f"#define {PAYLOAD_U32}(ID, VALUE) {EVENT}(ID)", f"#define {PAYLOAD_F32}(ID, VALUE) {EVENT}(ID)"]
    return "\n".join(lines) + "\n\n" + code


def read_meta(code: str) -> dict | None:
    """The event table `instrument` put into `code`, or None for an uninstrumented source."""
    if MARKER not in code:
        return None
    m = _META.search(code)
    if m is None:
        return None
    return json.loads(json.loads(m.group(1)))


def _event_dict(e: Event) -> dict:
    return {"name": e.name, "event_id": e.event_id, "kind": e.kind, "range_id": e.range_id,
            "payload_type": e.payload_type, "payload_iket_id": e.payload_iket_id}
