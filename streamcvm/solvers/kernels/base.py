"""The kernel as an object, and the registry of kernels by name.

A :class:`Kernel` holds its parameters and says, in one place, what the
code above it may assume: whether k(x, x) is constant (BVM and MMDA need it;
other kernels make a center-constrained MEB), whether gamma scales a
distance (searched by ``gamma="auto"``), which compiled fast paths know it
(:attr:`Kernel.fast_paths`), and the small integer code it hands to the numba
layer (:attr:`Kernel.code`; only compiled loops switch on it). The kernels
themselves are in :mod:`.distance` (rbf, laplacian, exponential) and
:mod:`.dot` (linear, poly, npoly); ``Kernel("rbf", gamma=0.5)`` makes the
registered kernel of that name.
"""
import numpy as np
import scipy.sparse as sp

from .compiled import csr_gram
from .sums import sq_norms

KERNELS = {}        # a name or alias -> its class

# The compiled fast paths a kernel may have (``Kernel.fast_paths``):
# "exact_bvm": the exact BVM pass computes its kernel values itself (solvers.exact);
# "kernel_rows": the exact SMO solvers compute its rows as they need them
#   (kernels.rows), instead of holding the whole matrix;
# "mmda_columns": MMDA's in-memory route computes its columns in numba (solvers.mmda).
FAST_PATHS = ("exact_bvm", "kernel_rows", "mmda_columns")


def register(cls):
    """Class decorator: ``cls`` is the kernel of ``cls.name`` and its aliases."""
    for n in (cls.name,) + tuple(cls.aliases):
        if n in KERNELS:
            raise ValueError(f"kernel name {n!r} registered twice")
        KERNELS[n] = cls
    unknown = set(cls.fast_paths) - set(FAST_PATHS)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown fast paths {sorted(unknown)}")
    return cls


def kernel_names():
    """The registered kernels' names (aliases left out), sorted."""
    return sorted({c.name for c in KERNELS.values()})


def kernel_class(name):
    """The kernel class registered as ``name``; a ValueError naming the
    registered ones otherwise."""
    try:
        return KERNELS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown kernel {name!r}; choose from "
                         f"{', '.join(kernel_names())}") from None


def _scratch(out, m, n):
    """An [m, n] float32 view of the scratch buffer ``out`` (or a new array)."""
    if out is None or out.size < m * n:
        return np.empty((m, n), np.float32)
    return out[:m * n].reshape(m, n)


class Kernel:
    """A kernel k(x, z) with its parameters (``gamma``, ``coef0``,
    ``degree``: each kernel uses those in its ``params``).

    ``Kernel(name, gamma=..., coef0=..., degree=...)`` makes the registered
    kernel ``name`` (a subclass); ``block(A, B)`` is the kernel block
    K[i, j] = k(A_i, B_j), ``diag(X)`` k(x, x) of every row.

    What a kernel declares (class attributes):

    - ``constant_diagonal``: k(x, x) is the same for every x (BVM's
      condition, and MMDA's);
    - ``length_scale``: gamma scales a distance, so ``gamma="auto"`` is
      chosen among multiples of 1 / the rows' mean squared distance;
    - ``fast_paths``: the compiled paths that know this kernel
      (:data:`FAST_PATHS`); the others fall back to :meth:`block`;
    - ``code``: the integer the numba layer switches on (-1: none).
    """

    name = None
    aliases = ()
    params = ("gamma", "coef0", "degree")
    constant_diagonal = False
    length_scale = False
    fast_paths = frozenset()
    code = -1
    # a Gram matrix of float32 rows is kept in float32 (half the memory traffic,
    # twice the exp throughput); other kernels transform it in float64
    float32_gram = False
    # rows s x give the kernel of x at gamma s^-distance_power (a uniform row scale)
    distance_power = 2
    # the distance the exponent takes (distance kernels: "sqeuclidean", "manhattan"
    # or "euclidean", as scipy names them), and how messages write it
    distance = None
    distance_text = None
    # k(x + v, z + v) = k(x, z): columns may be centred without changing the kernel
    translation_invariant = False
    # the largest value (gamma x'z + coef0)^degree may reach (poly kernels), and what
    # holds it; None: bounded kernels
    value_limit = None
    value_limit_why = None

    def __new__(cls, name=None, gamma=1.0, coef0=0.0, degree=3):
        if cls is Kernel:
            cls = kernel_class("rbf" if name is None else name)
        return super().__new__(cls)

    def __init__(self, name=None, gamma=1.0, coef0=0.0, degree=3):
        if name is not None and kernel_class(name) is not type(self):
            raise ValueError(f"{type(self).__name__} is not the kernel {name!r}")
        self.gamma = float(gamma)
        self.coef0 = float(coef0)
        self.degree = float(degree)
        for what, v in (("gamma", self.gamma), ("coef0", self.coef0), ("degree", self.degree)):
            if not np.isfinite(v):
                raise ValueError(f"{what} must be a finite number, got {v}")
        if self.gamma <= 0 and self.length_scale:
            raise ValueError(f"gamma must be positive, got {gamma}")

    def __repr__(self):
        args = ", ".join(f"{p}={getattr(self, p):g}" for p in self.params)
        return f"{type(self).__name__}({args})"

    def has(self, path):
        """Whether the compiled fast path ``path`` (:data:`FAST_PATHS`) knows
        this kernel."""
        if path not in FAST_PATHS:
            raise ValueError(f"unknown fast path {path!r}")
        return path in self.fast_paths

    # -- values ---------------------------------------------------------------
    def diag(self, X, sq=None):
        """k(x, x) for every row."""
        if self.constant_diagonal:
            return np.ones(X.shape[0])
        return self._diag(X, sq_norms(X) if sq is None else sq)

    def _diag(self, X, sq):
        raise NotImplementedError

    def pair_diag(self, Xi, Xj):
        """k(x_i, x_i) + k(x_j, x_j) - 2 k(x_i, x_j) row by row (float64):
        the squared feature-space distance of each pair (ranking's points)."""
        return self.diag(Xi) + self.diag(Xj) - 2.0 * np.array(
            [self.block(Xi[r:r + 1], Xj[r:r + 1])[0, 0] for r in range(len(Xi))])

    def pair_bound(self):
        """An upper bound of :meth:`pair_diag` over all pairs that needs no
        rows (a bounded kernel), or None."""
        return None

    # pairs' squared distances do not change when every row moves by one vector
    # (the linear kernel: ||x_i - x_j||^2), so they can be bounded from centred rows
    pairs_translation_invariant = False

    def block(self, A, B, sqa=None, sqb=None, BT=None, out=None, one_pass=False):
        """K[i, j] = k(A_i, B_j) (A, B: dense or CSR): float32 for dense
        float32 rows where the kernel keeps a float32 Gram matrix
        (``float32_gram``), float64 otherwise.

        ``one_pass``: the RBF's float32 block by :func:`.compiled.rbf_exp`
        (within 1e-7 relative of NumPy's exp, and faster: predict's tiles of
        a large union, which stay in cache); other kernels ignore it.

        ``BT``: optionally B transposed (float32, C-contiguous, at least
        ``len(B)`` columns); with CSR ``A`` and dense ``B`` the Gram matrix is
        then computed from A's nonzeros only (:func:`.compiled.csr_gram`).
        ``out``: a float32 scratch buffer of at least ``len(A) * len(B)``
        elements for the float32 paths (a fresh multi-MB array per call costs
        more in page faults than the arithmetic)."""
        m, n = A.shape[0], B.shape[0]
        if m == 0 or n == 0:
            return np.zeros((m, n))
        G = self._gram(A, B, BT, out)
        if one_pass:
            return self._from_gram_one_pass(G, A, B, sqa, sqb)
        return self._from_gram(G, A, B, sqa, sqb)

    def _from_gram_one_pass(self, G, A, B, sqa, sqb):
        """:meth:`_from_gram` by one pass over the block where the kernel has one."""
        return self._from_gram(G, A, B, sqa, sqb)

    def _gram(self, A, B, BT, out):
        """The Gram matrix A B' (float32 where ``float32_gram`` allows)."""
        m, n = A.shape[0], B.shape[0]
        if BT is not None and sp.issparse(A) and not sp.issparse(B):
            A = A.tocsr()
            G = csr_gram(A.indptr, A.indices, A.data.astype(np.float32, copy=False), BT, n,
                         _scratch(out, m, n))
            if not self.float32_gram:
                G = G.astype(np.float64)
        elif sp.issparse(A) or sp.issparse(B):
            G = A @ B.T
            G = G.toarray() if sp.issparse(G) else np.asarray(G)
            G = np.ascontiguousarray(G, dtype=np.float64)
        else:
            # float32 rows (the stores' dtype) give a float32 block: half the
            # memory traffic and twice the exp throughput of float64
            f32 = A.dtype == np.float32 and B.dtype == np.float32
            if m == 1:
                # one row would go to BLAS's gemv, whose sums round differently
                # from gemm's: a row's value would depend on the batch it came in
                G = np.dot(np.repeat(A, 2, axis=0), B.T)[:1]
            else:
                G = np.dot(A, B.T, out=_scratch(out, m, n)) if f32 and out is not None \
                    else np.dot(A, B.T)
            if G.dtype != np.float32 or not self.float32_gram:
                G = G.astype(np.float64)
        return G

    def _from_gram(self, G, A, B, sqa, sqb):
        """The kernel block from the Gram matrix ``G`` (in place where it can)."""
        raise NotImplementedError


def estimate_beta(X, n_sample=5000, seed=0):
    """Mean squared distance between two distinct rows, estimated on a sample.

    ``1 / beta`` is the papers' default Gaussian width (``gamma="auto"``).
    Uses mean_{i != j} ||x_i - x_j||^2 = 2 m/(m-1) (mean ||x||^2 - ||mean x||^2).
    """
    n = X.shape[0]
    if n < 2:
        return 1.0
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=min(n, n_sample), replace=False))
    S = X[idx]
    m = S.shape[0]
    sq = sq_norms(S)
    mean = np.asarray(S.mean(axis=0), dtype=np.float64).ravel()
    beta = 2.0 * m / (m - 1) * (sq.mean() - mean @ mean)
    if not np.isfinite(beta):       # never a fallback width for rows of NaN or inf
        raise ValueError("the rows hold NaN or infinite values (or values too large to "
                         "square): no kernel width can be estimated")
    return float(beta) if beta > 0 else 1.0
