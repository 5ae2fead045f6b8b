"""Numba kernels that parse blocks of svmlight/LIBSVM and CSV text
(``streamcvm.ingest._parse``; numba's cache of them is keyed by this file,
so a change of the module's name must come with a change of the file).

Pure numba: no I/O, no zarr, no dask. Every kernel takes a uint8 buffer that
holds whole lines (the caller guarantees the block ends with ``\\n``) and
returns plain arrays plus an error triple ``(code, line, byte_pos)`` so the
caller can report ``file:line: what is wrong`` without a traceback.

Numbers are parsed exactly as a correctly rounded float64 (what
``float()``, ``strtod`` and scikit-learn's loader produce) and then cast to
float32 for X: a fast path (Clinger: a mantissa below 2^53 and a power
of ten up to 1e22, both exact in binary64) covers ordinary data files; any
other token is handed to the C library's ``strtod``, which glibc rounds
correctly.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# error codes (messages live in ingest/errors.py)
OK = 0
E_NUMBER = 1       # token is not a number
E_ORDER = 2        # svmlight indices not strictly increasing
E_INDEX_ZERO = 3   # index 0 while one-based
E_INDEX_RANGE = 4  # index >= n_features limit
E_NONFINITE = 5    # nan/inf without allow_nan
E_RAGGED = 6       # CSV row with a different field count
E_PAIR = 7         # svmlight token without ':' / bad index
E_QID = 8          # bad qid / qid on some rows only
E_MULTILABEL = 9   # "1,2 3:4" multilabel rows
E_RANGE32 = 10     # finite in float64 but overflows float32
E_NOLABEL = 11     # svmlight line without a label
E_QUOTE = 12       # unterminated quote in CSV
E_QIDMIX = 13      # qid on some rows and not on others
E_FULL = 14        # output capacity too small: call again with the upper bound

# float32 max plus half an ulp: anything below rounds to a finite float32
F32_LIMIT = 3.4028235677973366e38

_POW10 = np.array([10.0 ** k for k in range(23)], dtype=np.float64)


@intrinsic
def _strtod(typingctx, buf_t, pos_t):
    """double strtod(buf + pos, NULL): the libc symbol, resolved by name."""
    sig = types.float64(buf_t, pos_t)

    def codegen(context, builder, signature, args):
        buf, pos = args
        ary = context.make_array(signature.args[0])(context, builder, buf)
        ptr = builder.gep(ary.data, [pos])
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.DoubleType(), [i8p, i8p.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "strtod")
        return builder.call(
            fn, [builder.bitcast(ptr, i8p), ir.Constant(i8p.as_pointer(), None)])

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13


@njit(cache=True, nogil=True)
def _lower(c):
    if 65 <= c <= 90:
        return c + 32
    return c


@njit(cache=True, nogil=True)
def _match_word(buf, i, end, word):
    """True if buf[i:i+len(word)] equals the lowercase ASCII word, ignoring case."""
    n = len(word)
    if i + n > end:
        return False
    for k in range(n):
        if _lower(buf[i + k]) != word[k]:
            return False
    return True


_NAN_W = np.frombuffer(b"nan", dtype=np.uint8).copy()
_INF_W = np.frombuffer(b"inf", dtype=np.uint8).copy()
_INFINITY_W = np.frombuffer(b"infinity", dtype=np.uint8).copy()


@njit(cache=True, nogil=True, inline="always")
def parse_float(buf, i, end):
    """Parse a decimal float starting at buf[i] (decimal point '.'): see
    :func:`parse_float_dec`."""
    return parse_float_dec(buf, i, end, 46)


@njit(cache=True, nogil=True)
def _strtod_dec(buf, start, stop, dec):
    """strtod of buf[start:stop] with the decimal mark ``dec`` read as '.'."""
    tmp = np.empty(stop - start + 1, np.uint8)
    for k in range(start, stop):
        c = buf[k]
        tmp[k - start] = 46 if c == dec else c
    tmp[stop - start] = 0
    return _strtod(tmp, 0)


@njit(cache=True, nogil=True, inline="always")
def parse_float_dec(buf, i, end, dec):
    """Parse a decimal float starting at buf[i]; ``dec`` is the byte of the
    decimal mark (46 '.', or 44 ',' for decimal commas).

    Returns (value, next_index, ok). The token is the longest prefix that fits
    ``[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`` or one of
    nan / inf / infinity (any case, with sign). ``ok`` is False when no number
    starts at i; the caller decides whether what follows is a valid separator.
    """
    start = i
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):  # - +
        neg = buf[i] == 45
        i += 1
    if i < end and ((buf[i] | 32) == 110 or (buf[i] | 32) == 105):  # n N i I
        if _match_word(buf, i, end, _NAN_W):
            return np.nan, i + 3, True
        if _match_word(buf, i, end, _INFINITY_W):
            return (-np.inf if neg else np.inf), i + 8, True
        if _match_word(buf, i, end, _INF_W):
            return (-np.inf if neg else np.inf), i + 3, True
        return 0.0, start, False
    # Digits go into an int64 mantissa without per-digit checks; a token of
    # more than 18 digits (which could overflow it) takes the exact slow path.
    mant = 0
    ds = i
    while i < end:
        d = np.int64(buf[i]) - 48
        if np.uint64(d) > 9:
            break
        mant = mant * 10 + d
        i += 1
    nd = i - ds
    exp10 = 0
    if i < end and buf[i] == dec:  # '.' (or the decimal comma)
        i += 1
        fs = i
        while i < end:
            d = np.int64(buf[i]) - 48
            if np.uint64(d) > 9:
                break
            mant = mant * 10 + d
            i += 1
        exp10 = fs - i
        nd += i - fs
    if nd == 0:
        return 0.0, start, False
    if i < end and (buf[i] | 32) == 101:  # e E
        j = i + 1
        eneg = False
        if j < end and (buf[j] == 45 or buf[j] == 43):
            eneg = buf[j] == 45
            j += 1
        if j < end and 48 <= buf[j] <= 57:
            e = 0
            while j < end and 48 <= buf[j] <= 57:
                if e < 100000:
                    e = e * 10 + (buf[j] - 48)
                j += 1
            exp10 += -e if eneg else e
            i = j
        # else: 'e' is not part of the number; the caller sees it as garbage
    if nd <= 18:
        if mant == 0:
            return (-0.0 if neg else 0.0), i, True
        if mant <= 9007199254740992 and -22 <= exp10 <= 22:
            v = np.float64(mant)
            if exp10 >= 0:
                v = v * _POW10[exp10]
            else:
                v = v / _POW10[-exp10]
            return (-v if neg else v), i, True
    # hard case: exact conversion by the C library (glibc rounds correctly);
    # the token is followed by a non-numeric byte, so strtod stops where this parser did.
    if dec != 46:
        return _strtod_dec(buf, start, i, dec), i, True
    return _strtod(buf, start), i, True


@njit(cache=True, nogil=True, inline="always")
def _check_value(v, allow_nan):
    """OK, E_NONFINITE or E_RANGE32 for a value that goes into float32 X."""
    if abs(v) < F32_LIMIT:      # False for NaN too: one compare on the fast path
        return OK
    if v != v or v == np.inf or v == -np.inf:
        return OK if allow_nan else E_NONFINITE
    return E_RANGE32


# ---------------------------------------------------------------------------
# svmlight / LIBSVM
# ---------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def parse_svmlight(buf, zero_based, n_features_limit, allow_nan, qid_mode, rcap, ncap):
    """Parse whole svmlight lines: ``label [qid:q] i:v i:v ... [# comment]``.

    Returns (n_rows, labels f64, qid i64 (-1 where absent), indptr i64,
    indices i32 (zero-based), data f32, max_col, n_lines, qid_rows,
    err, err_line, err_pos). Explicit zeros are dropped. ``n_features_limit``
    < 0 means unlimited. ``qid_mode``: 1 every row has a qid, 0 none has,
    -1 the first row decides; a row that breaks it is E_QIDMIX.
    ``rcap`` rows and ``ncap`` pairs of output are allocated (no counting
    pass); if the block holds more, the result is E_FULL and the caller
    parses again with the bounds of :func:`svmlight_bounds`.
    """
    end = len(buf)
    labels = np.empty(rcap, np.float64)
    qids = np.empty(rcap, np.int64)
    indptr = np.empty(rcap + 1, np.int64)
    indices = np.empty(ncap, np.int32)
    data = np.empty(ncap, np.float32)
    indptr[0] = 0
    row = 0
    nnz = 0
    line = 0
    max_col = -1
    qid_rows = 0
    offset = 0 if zero_based else 1
    i = 0
    while i < end:
        # one line: skip leading blanks
        while i < end and _is_space(buf[i]):
            i += 1
        if i >= end:
            break
        c = buf[i]
        if c == 10:
            line += 1
            i += 1
            continue
        if c == 35:  # '#': comment line
            while i < end and buf[i] != 10:
                i += 1
            continue
        # label
        v, j, ok = parse_float(buf, i, end)
        if not ok:
            return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_NOLABEL, line, i
        if j < end and buf[j] == 44:  # ','
            return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_MULTILABEL, line, i
        if j < end and not (_is_space(buf[j]) or buf[j] == 10 or buf[j] == 35):
            return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_NOLABEL, line, i
        if v != v or v == np.inf or v == -np.inf:
            if not allow_nan:
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_NONFINITE, line, i
        if row >= rcap:
            return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_FULL, line, i
        labels[row] = v
        qids[row] = -1
        i = j
        prev = -1
        first_pair = True
        while True:
            while i < end and _is_space(buf[i]):
                i += 1
            if i >= end or buf[i] == 10:
                break
            if buf[i] == 35:  # trailing comment
                while i < end and buf[i] != 10:
                    i += 1
                break
            tok = i
            # qid:...
            if first_pair and buf[i] == 113 and i + 3 < end and buf[i + 1] == 105 \
                    and buf[i + 2] == 100 and buf[i + 3] == 58:
                i += 4
                q = 0
                nd = 0
                while i < end and 48 <= buf[i] <= 57:
                    q = q * 10 + (buf[i] - 48)
                    nd += 1
                    i += 1
                if nd == 0 or nd > 18 or (i < end and not (_is_space(buf[i]) or buf[i] == 10 or buf[i] == 35)):
                    return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_QID, line, tok
                qids[row] = q
                qid_rows += 1
                first_pair = False
                continue
            first_pair = False
            idx = 0
            nd = 0
            while i < end and 48 <= buf[i] <= 57:
                if nd < 11:
                    idx = idx * 10 + (buf[i] - 48)
                nd += 1
                i += 1
            if nd == 0 or i >= end or buf[i] != 58:
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_PAIR, line, tok
            i += 1
            col = idx - offset
            if col < 0:
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_INDEX_ZERO, line, tok
            if nd > 10 or col > 2147483646 or (n_features_limit >= 0 and col >= n_features_limit):
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_INDEX_RANGE, line, tok
            if col <= prev:
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_ORDER, line, tok
            prev = col
            v, j, ok = parse_float(buf, i, end)
            if not ok or (j < end and not (_is_space(buf[j]) or buf[j] == 10 or buf[j] == 35)):
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_NUMBER, line, i
            err = _check_value(v, allow_nan)
            if err != OK:
                return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, err, line, i
            i = j
            if v != 0.0:
                if nnz >= ncap:
                    return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_FULL, line, i
                indices[nnz] = col
                data[nnz] = v
                nnz += 1
            if col > max_col:
                max_col = col
        has_q = qids[row] >= 0
        if qid_mode < 0:
            qid_mode = 1 if has_q else 0
        elif has_q != (qid_mode == 1):
            return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, E_QIDMIX, line, i
        row += 1
        indptr[row] = nnz
    return row, labels, qids, indptr, indices, data, max_col, line, qid_rows, OK, line, end


# ---------------------------------------------------------------------------
# CSV / TSV / whitespace-separated
# ---------------------------------------------------------------------------

ROLE_LABEL = -1
ROLE_QID = -2
ROLE_WEIGHT = -3
ROLE_SKIP = -4


@njit(cache=True, nogil=True)
def _fnv1a(buf, a, b):
    h = np.uint64(14695981039346656037)
    for k in range(a, b):
        h = (h ^ np.uint64(buf[k])) * np.uint64(1099511628211)
    return np.int64(h)


@njit(cache=True, nogil=True)
def parse_csv(buf, delim, roles, d, label_text, allow_nan, cap, decimal=46):
    """Parse whole delimited lines into a dense float32 block.

    ``delim``: a byte (44 ',', 9 tab, 59 ';', ...) or 0 for runs of blanks.
    ``roles[c]`` for each field c: a feature index >= 0, or ROLE_LABEL,
    ROLE_QID, ROLE_WEIGHT, ROLE_SKIP. ``d`` features per row. With
    ``label_text`` the label field is kept as text: its FNV-1a hash goes to
    ``label_hash`` and its byte span to ``label_span`` (for the dictionary).
    ``decimal``: the byte of the decimal mark in numbers (46 '.', 44 ',').

    Returns (n_rows, X, labels f64, label_hash i64, label_span i64[n,2],
    qid i64, weight f32, nonzeros of X, n_lines, err, err_line, err_pos,
    err_field).
    """
    end = len(buf)
    n_fields = len(roles)
    # ``cap`` rows are allocated (see parse_svmlight on E_FULL); only the
    # outputs that the roles name are filled in
    X = np.empty((cap, max(d, 1)), np.float32)
    labels = np.empty(cap, np.float64)
    label_hash = np.empty(cap, np.int64)
    label_span = np.empty((cap, 2), np.int64)
    qids = np.empty(cap, np.int64)
    weights = np.empty(cap, np.float32)
    row = 0
    nz = 0
    line = 0
    i = 0
    ws = delim == 0
    while i < end:
        # skip blank lines (only blanks before the newline)
        k = i
        while k < end and _is_space(buf[k]):
            k += 1
        if k >= end:
            break
        if buf[k] == 10:
            line += 1
            i = k + 1
            continue
        if ws:
            i = k
        if row >= cap:
            return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_FULL, line, i, 0
        f = 0
        while True:
            # one field starting at i
            while i < end and buf[i] == 32:
                i += 1
            if f >= n_fields:
                return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_RAGGED, line, i, f
            role = roles[f]
            quoted = i < end and buf[i] == 34
            if quoted:
                i += 1
            fs = i
            if role == ROLE_LABEL and label_text:
                if quoted:
                    while i < end and buf[i] != 34 and buf[i] != 10:
                        i += 1
                    if i >= end or buf[i] != 34:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_QUOTE, line, fs, f
                    fe = i
                    i += 1
                else:
                    while i < end and buf[i] != 10 and buf[i] != delim and not (ws and buf[i] == 9):
                        if ws and buf[i] == 32:
                            break
                        i += 1
                    fe = i
                    while fe > fs and _is_space(buf[fe - 1]):
                        fe -= 1
                label_hash[row] = _fnv1a(buf, fs, fe)
                label_span[row, 0] = fs
                label_span[row, 1] = fe
            elif role == ROLE_SKIP:
                while i < end and buf[i] != 10 and buf[i] != delim and not (ws and (buf[i] == 32 or buf[i] == 9)):
                    i += 1
            else:
                v, j, ok = parse_float_dec(buf, i, end, decimal)
                if not ok:
                    # an empty field is a missing value
                    k = i
                    while k < end and _is_space(buf[k]):
                        k += 1
                    if allow_nan and (k >= end or buf[k] == 10 or buf[k] == delim or (quoted and buf[k] == 34)):
                        v = np.nan
                        j = k
                    else:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_NUMBER, line, fs, f
                i = j
                if quoted:
                    if i >= end or buf[i] != 34:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_NUMBER, line, fs, f
                    i += 1
                if role >= 0:
                    err = _check_value(v, allow_nan)
                    if err != OK:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, err, line, fs, f
                    X[row, role] = v
                    nz += v != 0.0
                elif role == ROLE_LABEL:
                    if (v != v or v == np.inf or v == -np.inf) and not allow_nan:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_NONFINITE, line, fs, f
                    labels[row] = v
                elif role == ROLE_QID:
                    if v != np.floor(v) or v < 0 or v > 9e18:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_QID, line, fs, f
                    qids[row] = np.int64(v)
                else:
                    err = _check_value(v, False)
                    if err != OK:
                        return row, X, labels, label_hash, label_span, qids, weights, nz, line, err, line, fs, f
                    weights[row] = v
            # after the field: the delimiter right away (the common case), or
            # blanks, then the delimiter or the end of the line
            if i < end and buf[i] == delim:
                f += 1
                i += 1
                continue
            while i < end and _is_space(buf[i]) and buf[i] != delim:
                i += 1
            f += 1
            if i >= end or buf[i] == 10:
                break
            if ws:
                continue
            if buf[i] != delim:
                return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_NUMBER, line, fs, f - 1
            i += 1
        if f != n_fields:
            return row, X, labels, label_hash, label_span, qids, weights, nz, line, E_RAGGED, line, i, f
        line += 1
        i += 1
        row += 1
    return row, X, labels, label_hash, label_span, qids, weights, nz, line, OK, line, end, 0


@njit(cache=True, nogil=True)
def csr_to_dense(indptr, indices, data, d):
    """Scatter a CSR block into a dense float32 [n, d] array."""
    n = len(indptr) - 1
    X = np.zeros((n, d), np.float32)
    for r in range(n):
        for k in range(indptr[r], indptr[r + 1]):
            X[r, indices[k]] = data[k]
    return X


def svmlight_bounds(nbytes, exact=False):
    """(rows, pairs) to allocate for a block: a guess, or sure upper bounds
    (a line takes at least 2 bytes, a pair at least 4: "1:1 ")."""
    if exact:
        return nbytes // 2 + 1, nbytes // 4 + 1
    return nbytes // 16 + 16, nbytes // 6 + 16


def csv_bound(nbytes, n_fields, exact=False):
    """Rows to allocate for a block (a row of n fields takes >= 2n bytes)."""
    return nbytes // (2 * n_fields) + 1 if exact else nbytes // (4 * n_fields) + 16
