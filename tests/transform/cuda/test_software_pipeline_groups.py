"""software_pipeline on sm_90 (issue_first): one cp.async group per reader group.

An attention-shaped body (K read by the first gemm, V copied after it and read by the second)
commits K and V as separate groups, waits for each right before its first reader and refills
each stage right after its last reader. The tile-level result runs on test_software_pipeline's
cp.async machine (every read sees its own iteration's tile, completed, no early refill), and
the generated sm_90a CUDA runs on the host emulator against a float64 reference.
"""
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.arith.simplify import const_int
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.op import tile_ops as O
from tilelang.transform.cuda.lower_tile_ops import Raw
from tilelang.transform.cuda.software_pipeline import pipeline_kernel

from .test_software_pipeline import CpAsyncMachine


class Machine(CpAsyncMachine):
    """Reads of tiles no loop stages (Q_s, copied once before the loop) are not checked."""

    def read(self, name):
        if name in self.views:
            super().read(name)


def qk_pv(stages, start=0, n_kv=512, block=64, dim=64):
    """O = sum over KV blocks of half(Q Kᵀ) V: V's copy sits after the first gemm (flash decoding)."""

    @T.prim_func
    def qk_pv(Q: T.Tensor((64, dim), "float16"), K: T.Tensor((n_kv, dim), "float16"),
              V: T.Tensor((n_kv, dim), "float16"), O: T.Tensor((64, dim), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((64, dim), "float16")
            K_s = T.alloc_shared((block, dim), "float16")
            V_s = T.alloc_shared((block, dim), "float16")
            acc_s = T.alloc_fragment((64, block), "float32")
            acc_c = T.alloc_fragment((64, block), "float16")
            acc_o = T.alloc_fragment((64, dim), "float32")
            T.copy(Q[0, 0], Q_s)
            T.clear(acc_o)
            for k in T.Pipelined(start, n_kv // block, num_stages=stages):
                T.copy(K[k * block, 0], K_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                T.copy(acc_s, acc_c)
                T.copy(V[k * block, 0], V_s)
                T.gemm(acc_c, V_s, acc_o)
            T.copy(acc_o, O[0, 0])

    return qk_pv


def _piped(func, helpers):
    k = helpers.tile_kernel(func, "sm_90a")
    msgs = []
    piped, _ = pipeline_kernel(k, msgs.append, issue_first=True)
    loop = next(s for s in collect(k.body, lambda n: isinstance(n, S.For)) if s.kind == "pipelined")
    return k, piped, loop, msgs


@pytest.mark.parametrize("stages,start", [(2, 0), (3, 0), (2, 3), (4, 1)])
def test_k_and_v_are_separate_groups_each_read_complete_and_refilled_after_its_reader(stages, start, helpers):
    k, piped, loop, msgs = _piped(qk_pv(stages, start), helpers)
    assert not [m for m in msgs if "unpipelined" in m], msgs
    expected = {c.dst.buffer.name: c.src for c in collect(loop.body, lambda n: isinstance(n, O.Copy))}
    m = Machine(k, expected)
    m.run(piped.body)
    n = const_int(loop.extent)
    assert m.reads == ["K_s", "V_s"] * n
    raws = [r.fmt for r in collect(piped.body, lambda x: isinstance(x, Raw))]
    # K then V for each of the S stages ahead, one commit each; two waits per iteration
    assert sum("cp_async_commit" in r for r in raws) == 2 * stages + 2
    waits = [int(w) for r in raws for w in re.findall(r"cp_async_wait<(\d+)>", r)]
    assert waits == [2 * stages - 1, 2 * stages - 1, 0], waits


def test_machine_catches_a_shallower_split_wait(helpers):
    """The K wait one group too deep lets the first gemm read K before its group completed."""
    k, piped, loop, _ = _piped(qk_pv(2), helpers)

    class Deeper(tilelang.ir.visitor.Mutator):
        def visit(self, node):
            if isinstance(node, Raw) and "cp_async_wait<3>" in node.fmt and not hasattr(self, "done"):
                self.done = True
                return Raw(node.fmt.replace("<3>", "<4>"), node.args)
            return super().visit(node)

    expected = {c.dst.buffer.name: c.src for c in collect(loop.body, lambda n: isinstance(n, O.Copy))}
    m = Machine(k, expected)
    with pytest.raises(AssertionError, match="before its cp.async group completed"):
        m.run(Deeper().visit(piped.body))


@pytest.mark.parametrize("stages,sink", [(2, False), (3, False), (2, True), (3, True)])
def test_split_groups_source_and_host_run_match_float64(stages, sink, run_on_host):
    cfg = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    if not sink:
        cfg["tl.disable_pipeline_refill_sink"] = True
    kern = tilelang.compile(qk_pv(stages, start=1), target="cuda -arch=sm_90a", pass_configs=cfg)
    src = kern.get_kernel_source()
    loop = src[src.index("for (int k"):]
    waits = re.findall(r"cp_async_wait<(\d+)>", loop)
    second = loop.index("cp_async_wait", loop.index("gemm_ss"))
    if not sink:
        assert waits[:2] == [str(2 * stages - 1)] * 2, waits  # before Q·Kᵀ, before P·V
        assert loop.index("cp_async_wait") < loop.index("gemm_ss") < loop.index("K_s_w = ") \
            < second < loop.index("gemm_rs") < loop.index("V_s_w = ")
    else:  # K's refill shares V's wait barrier (pipeline_barriers.py): that wait counts one group fewer
        assert waits[:2] == [str(2 * stages - 1), str(2 * stages - 2)], waits
        assert loop.index("cp_async_wait") < loop.index("gemm_ss") < second < loop.index("K_s_w = ") \
            < loop.index("gemm_rs") < loop.index("V_s_w = ")
    g = torch.Generator().manual_seed(stages + 10 * sink)
    q = (torch.randn(64, 64, generator=g) / 8).half()
    kk = (torch.randn(512, 64, generator=g) / 8).half()
    v = torch.randn(512, 64, generator=g).half()
    o = torch.full((64, 64), float("nan"))
    run_on_host(kern, [q, kk, v, o])
    s = (q.double() @ kk.double().T).half().double()  # the kernel casts Q·Kᵀ to half before P·V
    ref = sum(s[:, b * 64:(b + 1) * 64] @ v.double()[b * 64:(b + 1) * 64] for b in range(1, 8))
    torch.testing.assert_close(o.double(), ref, rtol=2e-3, atol=2e-3)
