"""Fragment: thread/slot maps, replication, repeat, inverse, adapters to the lowering's layouts."""
import itertools

import pytest

import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.ir.expr import Var
from tilelang.layout import Fragment, Layout
from tilelang.layout.fragment import FlatFragment, MmaAccFragment


def acc16x8():
    return Fragment((16, 8), lambda i, j: (i % 8) * 4 + j // 2, lambda i, j: (i // 8) * 2 + j % 2)


def test_thread_index_owners_counts():
    F = acc16x8()
    assert (F.thread(9, 3), F.index(9, 3)) == (5, 3) == F.map(9, 3)
    assert F.owners(9, 3) == [(5, 3)]
    assert F.threads() == 32 and F.locals_per_thread() == 4 and F.is_bijective()
    e = F.thread(Var("r"), Var("c"))
    assert "r" in str(e) and "c" in str(e)


def test_inverse_is_thread_slot_to_logical():
    F = acc16x8()
    inv = F.inverse()
    assert isinstance(inv, Layout) and inv.shape == (32, 4)
    seen = set()
    for t, s in itertools.product(range(32), range(4)):
        i, j = inv.map(t, s)
        assert F.map(i, j) == (t, s)
        seen.add((i, j))
    assert len(seen) == 128


def test_forward_fn_and_positional_forms_agree():
    a = acc16x8()
    b = Fragment.from_fn((16, 8), forward_fn=lambda i, j: ((i % 8) * 4 + j // 2, (i // 8) * 2 + j % 2))
    c = Fragment((16, 8), lambda i, j: ((i % 8) * 4 + j // 2, (i // 8) * 2 + j % 2))
    d = T.Fragment((16, 8), forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 2,
                   forward_index_fn=lambda i, j: [(i // 8), j % 2])   # 2-d index flattens row-major
    assert a == b == c == d
    assert a != Fragment((16, 8), lambda i, j: (i % 8) * 4 + j // 2, lambda i, j: (j % 2) * 2 + i // 8)


def test_replicate_argument_gets_rep_var():
    F = T.Fragment((4, 4), forward_fn=lambda i, j, rep: (rep * 4 + j, i), replicate=2)
    assert F.num_replicas == 2 and F.threads() == 8 and F.locals_per_thread() == 4
    assert F.owners(3, 1) == [(1, 3), (5, 3)]
    assert F.is_bijective()
    inv = F.inverse()
    assert inv.map(5, 3) == (3, 1) and inv.map(1, 3) == (3, 1)


def test_replicate_method():
    P = acc16x8().replicate(4)
    assert P.threads() == 128 and P.num_replicas == 4
    assert P.owners(9, 3) == [(5 + 32 * k, 3) for k in range(4)]
    assert P.is_bijective()
    # replicating a replicated fragment stacks: 2 x 2 = 4 replicas over 4 x 32 threads
    assert acc16x8().replicate(2).replicate(2) == P


def test_repeat_on_slots_and_threads():
    F = acc16x8()
    S = F.repeat([2, 3])                            # lower_dim_first: column blocks fastest
    assert S.shape == (32, 24) and S.threads() == 32 and S.locals_per_thread() == 24
    for i, j in itertools.product(range(32), range(24)):
        b = (i // 16) * 3 + j // 8
        assert S.map(i, j) == (F.thread(i % 16, j % 8), F.index(i % 16, j % 8) + 4 * b)
    C = F.repeat([2, 3], lower_dim_first=False)
    assert C.index(16, 0) == 4 and S.index(16, 0) == 12
    W = F.repeat([2, 1], repeat_on_thread=True)
    assert W.threads() == 64 and W.locals_per_thread() == 4 and W.map(25, 3) == (37, 3)
    assert S.is_bijective() and W.is_bijective()


def test_invalid_fragment_reports_collision():
    F = Fragment((4, 4), lambda i, j: i, lambda i, j: j // 2)
    assert not F.is_bijective()
    with pytest.raises(DSLTypeError, match="holds both"):
        F.inverse()


FLATS = [FlatFragment((16, 8), 32, 1), FlatFragment((64, 32), 128, 4), FlatFragment((8, 8, 4), 64, 2),
         FlatFragment((10, 6), 16, 2)]


@pytest.mark.parametrize("f", FLATS, ids=str)
def test_from_flat_agrees_with_coords(f):
    F = Fragment.from_flat(f)
    inv = F.inverse()
    for tid, slot in itertools.product(range(f.threads), range(f.nlocal)):
        want = tuple(f.coords(tid, slot))
        inside = all(0 <= v < s for v, s in zip(want, f.shape))
        got = inv.map(tid, slot) if tid < inv.shape[0] and slot < inv.shape[1] else None
        assert got == (want if inside else None), (tid, slot)
    assert F == Fragment.from_coords(f)


MMAS = [MmaAccFragment((16, 8), 1, 1), MmaAccFragment((64, 64), 2, 2), MmaAccFragment((128, 64), 4, 1),
        MmaAccFragment((32, 128), 1, 4)]


@pytest.mark.parametrize("f", MMAS, ids=str)
def test_from_mma_acc_agrees_with_coords(f):
    F = Fragment.from_mma_acc(f)
    assert F.threads() == f.threads and F.locals_per_thread() == f.nlocal and F.is_bijective()
    inv = F.inverse()
    for tid, slot in itertools.product(range(f.threads), range(f.nlocal)):
        assert inv.map(tid, slot) == tuple(f.coords(tid, slot)), (tid, slot)


def test_from_wgmma_acc_agrees_with_coords():
    from tilelang.layout import fragment as lowering

    if not hasattr(lowering, "WgmmaAccFragment"):
        pytest.skip("this tree has no WgmmaAccFragment")
    for f in (lowering.WgmmaAccFragment((64, 64), 1, 1), lowering.WgmmaAccFragment((128, 256), 2, 2)):
        inv = Fragment.from_wgmma_acc(f).inverse()
        for tid, slot in itertools.product(range(f.threads), range(f.nlocal)):
            assert inv.map(tid, slot) == tuple(f.coords(tid, slot)), (tid, slot)


def test_table_fragment_algebra_matches_symbolic():
    f = MmaAccFragment((32, 16), 2, 1)
    sym, tab = Fragment.from_mma_acc(f), Fragment.from_coords(f)
    assert tab.is_table and sym == tab
    assert sym.repeat([1, 2]) == tab.repeat([1, 2])
    assert sym.replicate(2) == tab.replicate(2)
    with pytest.raises(DSLTypeError, match="constant indices"):
        tab.thread(Var("i"), 0)


def test_thread_function_alone_infers_the_register_index():
    from tilelang.layout.fragment import Fragment as PublicPathFragment

    assert PublicPathFragment is Fragment
    # lanes (i % 8) * 4 + j // 2 of a (16, 8) tile: i // 8 and j % 2 are not the lane's, so they
    # make the slot, row-major: slot = (i // 8) * 2 + j % 2
    F = Fragment((16, 8), forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 2)
    for i, j in itertools.product(range(16), range(8)):
        assert F.thread(i, j) == (i % 8) * 4 + j // 2
        assert F.index(i, j) == (i // 8) * 2 + j % 2
    assert F.is_bijective()
    assert F == Fragment((16, 8), forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 2,
                         forward_index_fn=lambda i, j: (i // 8) * 2 + j % 2)
    # one element per thread: slot 0; replicated: the replica does not move the slot
    assert all(Fragment((32, 4), forward_thread_fn=lambda i, j: i * 4 + j).index(i, j) == 0
               for i, j in itertools.product(range(32), range(4)))
    R = Fragment((32, 4), forward_thread_fn=lambda i, j, rep: i * 4 + rep, replicate=4)
    assert [R.index(5, j) for j in range(4)] == [0, 1, 2, 3]
    assert R.owners(5, 2) == [(20, 2), (21, 2), (22, 2), (23, 2)]
    with pytest.raises(DSLTypeError, match="power-of-two"):
        Fragment((12, 8), forward_thread_fn=lambda i, j: i)
