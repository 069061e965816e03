"""Bound checks of int32 indices against an int32 T.dynamic size, which a CUDA kernel takes as an
int64_t argument, compare in 32 bits against two constants set at entry (codegen/cuda.narrow_dims,
c_expr.narrow_bound; tl.disable_narrow_dim_checks): i < n as i <= min(n - 1, INT32_MAX), i <= n as
i <= min(n, INT32_MAX), min(i, n) as min(i, min(n, INT32_MAX)). The rule is checked over int32 edge
values and sizes past INT32_MAX; the fp8 lighting indexer's loop (its scale loads and logit stores,
kv length dynamic, last block partial) runs on the host emulator against float64 both ways, and with
its logit stores' lane test around their slot loop or at each store (tl.disable_row_store_hoist)."""
import pytest
import torch

import tilelang
from tilelang.testing.kernels import lighting_indexer

from tests.transform.cuda.test_acc_segments import reference as indexer_reference

INT32_MAX = 2**31 - 1
XS = [-(2**31), -5, -1, 0, 1, 6, 7, 8, 2**30, INT32_MAX - 1, INT32_MAX]
NS = [0, 1, 7, 8, 2**30, INT32_MAX - 1, INT32_MAX, 2**31, 2**33 + 5]


@pytest.mark.parametrize("n", NS)
def test_the_32_bit_forms_agree_with_64_bit_compares(n):
    lt, le = min(n - 1, INT32_MAX), min(n, INT32_MAX)
    assert -1 <= lt <= INT32_MAX and 0 <= le <= INT32_MAX  # both are int32 values
    for x in XS:
        assert (x < n) == (x <= lt) and (x >= n) == (x > lt)
        assert (x <= n) == (x <= le) and (x > n) == (x > le)
        assert min(x, n) == min(x, le)


@pytest.mark.parametrize("narrow, hoist", [(True, True), (False, True), (True, False)])
def test_dynamic_indexer_on_host(narrow, hoist, run_on_host):
    M, Q, H, K, threads, nkv = 256, 4, 32, 64, 512, 700  # the third block holds 188 rows
    # FullCol's 1 x 4 grid (kept by tl.disable_wgmma_policy_cost): each quad's lane 0 stores 8 rows of one q
    configs = {"tl.disable_narrow_dim_checks": not narrow, "tl.disable_row_store_hoist": not hoist,
               "tl.disable_wgmma_policy_cost": True}
    kern = tilelang.compile(lighting_indexer(None, M, Q, H, K, threads), target="cuda -arch=sm_90a",
                            pass_configs=configs)
    src = kern.get_kernel_source()
    assert ("tl_nkv_lt" in src) == narrow, src
    if narrow:  # the scale loads' and stores' checks read the entry constant, none compares with nkv itself
        assert "< nkv)" not in src and "<= tl_nkv_lt" in src, src
    # the logits' row loop (lane 0 of each quad stores its 8 rows): one test of the lane around it
    lines = [ln.strip() for ln in src.splitlines()]
    around = [n for n, ln in enumerate(lines) if ln == "if (((tid % 4) == 0)) {" and lines[n + 1] == "#pragma unroll"]
    assert bool(around) == hoist, src
    g = torch.Generator().manual_seed(11 + narrow + 2 * hoist)
    kv = torch.randn(nkv, K, generator=g).half()
    qm = torch.randn(Q * H, K, generator=g).half()
    scale = torch.rand(nkv, generator=g) + 0.5
    w = torch.randn(Q, H, generator=g)
    out = torch.full((Q, nkv), float("nan"))
    run_on_host(kern, [kv, qm, scale, w, out])
    torch.testing.assert_close(out.double(), indexer_reference(kv, qm, scale, w), rtol=1e-4, atol=1e-2)
