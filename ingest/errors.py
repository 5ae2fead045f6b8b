"""User-facing ingest errors: one line, ``file:line: what is wrong``."""
from . import _parse as P


class IngestError(Exception):
    """Bad input. ``str(err)`` is the one line the CLI prints."""

    def __init__(self, path, message, line=None):
        self.path = str(path)
        self.line = line
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")


def _token(buf, pos, limit=40):
    """The text of the token that starts at ``pos`` (for messages)."""
    end = pos
    n = len(buf)
    while end < n and end - pos < limit and buf[end] not in (10, 13, 32, 9, 44, 59):
        end += 1
    return bytes(buf[pos:end]).decode("utf-8", "replace")


def describe(code, buf, pos, field=None, fmt="svmlight", n_features=None):
    """Human message for a parser error code."""
    tok = _token(buf, pos) if pos < len(buf) else ""
    where = f"field {field + 1}: " if field is not None and fmt == "csv" else ""
    if code == P.E_NUMBER:
        if tok == "":
            return f"{where}empty value (use --allow-nan to read missing values as NaN)"
        return f"{where}'{tok}' is not a number"
    if code == P.E_ORDER:
        return (f"feature index in '{tok}' is not greater than the previous one "
                "(indices must be sorted and unique)")
    if code == P.E_INDEX_ZERO:
        return (f"feature index 0 in '{tok}' but indices are one-based "
                "(pass --zero-based for zero-based files)")
    if code == P.E_INDEX_RANGE:
        lim = f" (--n-features {n_features})" if n_features is not None else ""
        return f"feature index in '{tok}' is beyond the number of features{lim}"
    if code == P.E_NONFINITE:
        if not any(ch in tok.lower() for ch in "ni"):
            return f"{where}value '{tok}' overflows float64"
        return f"{where}non-finite value '{tok}' (pass --allow-nan to keep NaN/inf)"
    if code == P.E_RANGE32:
        return f"{where}value '{tok}' overflows float32"
    if code == P.E_RAGGED:
        return f"row has a different number of fields than the first row ({field} fields read so far)"
    if code == P.E_PAIR:
        return f"'{tok}' is not an index:value pair"
    if code == P.E_QID:
        if fmt == "csv":
            return f"{where}bad qid '{tok}' (the qid column holds non-negative integers)"
        return f"bad qid '{tok}' (expected qid:<non-negative integer>)"
    if code == P.E_QIDMIX:
        return "qid on some rows but not on others (every row needs one, or none)"
    if code == P.E_MULTILABEL:
        return "multilabel rows ('1,2 ...') are not supported"
    if code == P.E_NOLABEL:
        return f"line does not start with a numeric label (found '{tok}')"
    if code == P.E_QUOTE:
        return f"{where}unterminated quoted field"
    return f"parse error {code} at '{tok}'"
