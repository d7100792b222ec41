"""Op table: einsum, against numpy.einsum in float64, over matmul-like, reduction, transpose,
outer, diagonal (forward only), ellipsis, implicit-output and broadcasting equations."""
import numpy as np

from ... import ops
from ...common import dtype as mstype
from ..opinfo import OpInfo, SampleInput, noncontig, rand, register

F16 = (mstype.float16, mstype.float32, mstype.float64)


def _samples(rng, dtype):
    r = lambda *s: rand(rng, s, dtype)     # noqa: E731
    yield SampleInput(("ij,jk->ik", r(3, 4), r(4, 2)), desc="matmul")
    yield SampleInput(("bij,bjk->bik", r(2, 3, 4), noncontig(r(2, 4, 3))), desc="batched, non-contiguous")
    yield SampleInput(("ij->", r(3, 4)), desc="total sum")
    yield SampleInput(("ij->ji", r(3, 4)), desc="transpose")
    yield SampleInput(("i,j->ij", r(3), r(4)), desc="outer")
    yield SampleInput(("i,i", r(5), r(5)), desc="implicit dot")
    yield SampleInput(("ba,ca", r(2, 3), r(4, 3)), desc="implicit output (sorted letters)")
    yield SampleInput(("...ij,...jk->...ik", r(2, 1, 3, 4), r(5, 4, 2)), desc="ellipsis broadcast")
    yield SampleInput(("bhqd,bhkd->bhqk", r(1, 2, 3, 4), r(1, 2, 5, 4)), desc="attention scores")
    yield SampleInput(("ij,ij->i", r(3, 4), r(1, 4)), desc="size-1 broadcast")
    yield SampleInput(("ij,jk,kl->il", r(2, 3), r(3, 4), r(4, 2)), desc="three operands")
    yield SampleInput(("ii->i", r(3, 3)), desc="diagonal (forward only)", grad_args=())
    yield SampleInput(("ij,k->i", r(3, 4), r(2)), desc="summed-only letters")


register(
    OpInfo("einsum", ops.einsum, lambda eq, *xs: np.einsum(eq, *xs), _samples, dtypes=F16,
           tols={mstype.float16: (5e-3, 5e-3), mstype.float32: (1e-5, 1e-5)}),
)
