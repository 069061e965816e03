"""Ranges: interval bounds of index expressions over block and loop variables."""
from tilelang import dtypes as dt
from tilelang.arith.ranges import Ranges
from tilelang.ir import expr as E
from tilelang.ir import stmt as S


def v(name):
    return E.Var(name, dt.int32)


def kernel(grid):
    bvars = tuple(v(f"b{d}") for d in range(len(grid)))
    return S.KernelLaunch(bvars, tuple(E.as_expr(g) for g in grid), (128, 1, 1), (), S.seq())


def test_block_vars_range_over_the_grid():
    k = kernel((16, 32))
    bx, by = k.block_vars
    r = Ranges()
    r.kernel(k)
    assert r.bounds(by * 128 + 127) == (127, 4095)
    assert r.below(by * 128 + 127, 4096) and not r.below(by * 128 + 127, 4095)
    assert r.bounds(bx * 256 - by) == (-31, 3840)


def test_unknown_terms_give_no_bound():
    m, x = v("m"), v("x")
    k = S.KernelLaunch((x,), ((m + 127) // 128,), (128, 1, 1), (), S.seq())  # symbolic grid
    r = Ranges()
    r.kernel(k)
    assert r.bounds(x * 128) is None
    assert not r.below(x * 128 + 127, m)
    assert not r.nonneg(m) and r.upper(x) is None


def test_symbolic_grid_bounds_its_block_variable():
    """A block variable of a grid of G blocks is in [0, G - 1] for a symbolic G too: the guards
    `by < batch`, `bx < seq_len` of an index of a [batch, seq_len, ...] tensor are proven."""
    s, b, n, bx, by = v("seq_len"), v("batch"), v("n"), v("bx"), v("by")
    k = S.KernelLaunch((bx, by), (s * 2, b), (128, 1, 1), (), S.seq())
    r = Ranges()
    r.kernel(k)
    assert r.nonneg(by) and r.below(by, b) and r.below(bx, s * 2)
    assert not r.below(by + 1, b) and not r.below(bx, s) and not r.below(by, n)
    assert r.upper(by - b) == -1 and r.lower(by - b) is None and r.lower(1 - by + b) == 2
    assert r.decide(E.binop("<", by, b)) is True and r.decide(E.binop(">=", by, b)) is False
    assert r.decide(E.binop("<", by, 3)) is None and r.bounds(by) is None
    r.let(by, E.as_expr(b) - 5)  # a rebound block variable loses its grid range
    assert not r.below(by, b)


def test_symbolic_grid_divided_by_a_constant():
    """`s_i = bx // 2`, `H0 = bx % 2 * 64` of a T.Kernel(seq_len * 2, ..) (sparse MLA's two blocks per
    query row): s_i is in [0, seq_len - 1] and H0 in [0, 64], so `s_i < seq_len` and `H0 + 63 < 128`
    hold; a divisor that does not divide the extent bounds by ceildiv (`bx // 3 < (2 * seq_len + 2) // 3`)."""
    s, bx, si, h0, t, a = v("seq_len"), v("bx"), v("s_i"), v("H0"), v("t"), v("a")
    r = Ranges()
    r.kernel(S.KernelLaunch((bx,), (s * 2,), (128, 1, 1), (), S.seq()))
    r.let(si, bx // 2)
    assert r.below(si, s) and r.nonneg(si) and not r.below(si, s - 1) and r.bounds(si) is None
    assert r.decide(E.binop("<", si, s)) is True and r.decide(E.binop(">=", si, 0)) is True
    r.let(h0, bx % 2 * 64)
    assert r.bounds(h0) == (0, 64) and r.below(h0 + 63, 128) and not r.below(h0 + 64, 128)
    r.let(t, bx // 3)
    assert r.below(t, (s * 2 + 2) // 3) and not r.below(t, s // 2)
    r.let(a, bx)  # an alias keeps the grid's extent
    assert r.below(a, s * 2) and not r.below(a, s)
    r.let(si, bx - 1)  # rebound to what no rule bounds: no range
    assert not r.below(si, s) and not r.nonneg(si)


def test_loops_are_scoped_and_ifs_tighten():
    ko, i = v("ko"), v("i")
    r = Ranges()
    loop = S.For(ko, E.as_expr(0), E.as_expr(128), "serial", S.seq())
    with r.loop(loop):
        assert r.bounds(ko * 32 + 96 + 31) == (127, 4191)  # the k tile 3 stages ahead can pass K
        with r.where(E.binop("<", ko + 3, 128)):  # the pipeline's guard on that load
            assert r.bounds(ko * 32 + 96 + 31) == (127, 4095)
        with r.where(E.logical_and(E.binop(">=", 2 * ko, 9), E.binop("<=", ko, 7))):
            assert r.of[ko] == (5, 7)
        assert r.of[ko] == (0, 127)
    assert ko not in r.of
    with r.loop(S.For(i, E.as_expr(0), v("n"), "serial", S.seq())):  # symbolic extent: unknown
        assert r.bounds(i) is None


def test_division_modulo_min_max():
    t = v("t")
    r = Ranges()
    r.of[t] = (0, 511)
    assert r.bounds(t % 16) == (0, 15)
    assert r.bounds(t // 16) == (0, 31)
    assert r.bounds(E.binop("min", t, 100)) == (0, 100)
    r.of[t] = (-5, 5)
    assert r.bounds(t % 16) is None  # C's remainder takes the sign of t


def test_a_let_replaces_the_grid_range():
    # persistent kernels rebind bx/by per tile: the new value decides, never the (1-d) grid
    k = kernel((132, 1))
    bx, by = k.block_vars
    cta, j = v("cta"), v("j")
    r = Ranges()
    r.kernel(k)
    assert r.bounds(by) == (0, 0)
    r.let(cta, bx)
    assert r.bounds(cta) == (0, 131)
    r.let(by, (cta + j * 132) // 16)  # j: a tile loop with a symbolic trip count
    assert r.bounds(by * 128) is None
    r.let(bx, (cta + j * 132) % 16)
    assert r.bounds(bx) is None  # cta + j*132 may be negative as far as the analysis knows
    r.of[j] = (0, 3)
    r.let(bx, (cta + j * 132) % 16)
    assert r.bounds(bx) == (0, 15)


def test_decide_comparisons_the_ranges_settle():
    """Ranges.decide: True / False where every value in range agrees, None otherwise (lower_tile_ops
    folds such T.if_then_else conditions to their branch)."""
    k, j, m = v("k"), v("j"), v("m")
    r = Ranges()
    with r.scoped({k: (0, 1), j: (0, 127)}):
        assert r.decide(E.binop(">=", k * 128 + j, 256)) is False
        assert r.decide(E.binop("<", k * 128 + j, 256)) is True
        assert r.decide(E.binop(">=", k * 128 + j, 255)) is None  # k = 1, j = 127 reaches it
        assert r.decide(E.binop("==", k * 128 + j, 300)) is False and r.decide(E.binop("!=", j, -1)) is True
        assert r.decide(E.binop("<", j, m)) is None  # m unbounded
        both = E.binop("&&", E.binop("<", j, 128), E.binop("<", j, m))
        assert r.decide(both) is None
        assert r.decide(E.binop("&&", E.binop(">", j, 200), E.binop("<", j, m))) is False
        assert r.decide(E.binop("||", E.binop("<", j, 128), E.binop("<", j, m))) is True


def test_symbolic_loop_bounds_come_from_their_ranges():
    k = kernel((4, 8))
    bx, by = k.block_vars
    kk, t = v("k"), v("t")
    r = Ranges()
    r.kernel(k)
    # the attention backward's `for k in T.Pipelined(by * 4 // 2, 16)`-style loop: start in [0, 14]
    with r.loop(S.For(kk, by * 2, 16 - by * 2, "serial", S.seq())):
        assert r.of[kk] == (0, 15)
        assert r.below(kk * 32 + 31, 512)
    with r.loop(S.For(t, E.as_expr(0), bx + 1, "serial", S.seq())):  # extent in [1, 4]: t in [0, 3]
        assert r.of[t] == (0, 3)
    with r.loop(S.For(t, E.as_expr(0), v("n"), "serial", S.seq())):  # unbounded extent: none
        assert t not in r.of


def test_shifts_and_masks_are_bounded():
    t = v("t")
    r = Ranges()
    r.of[t] = (0, 255)
    assert r.bounds(E.binop(">>", t % 32, 2)) == (0, 7)  # a lane's row in an mma fragment
    assert r.bounds(E.binop("&", t, 3) * 2) == (0, 6)
    assert r.bounds(E.binop("&", t, 1023)) == (0, 255)  # a mask wider than the value keeps its range
    r.of[t] = (-4, 3)
    assert r.bounds(E.binop(">>", t, 1)) == (-2, 1)  # arithmetic shift: floor
    assert r.bounds(E.binop("&", t, 7)) == (0, 7)
