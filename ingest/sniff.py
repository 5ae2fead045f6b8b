"""What an input file is, read from its first lines: svmlight or CSV
(:func:`sniff_format`), the CSV delimiter (:func:`sniff_delimiter`), whether
its first line is a header, and which columns hold the label, query id and
weight (:class:`CsvLayout`)."""
import numpy as np

from . import _parse as P
from .errors import IngestError

SPARSE_DENSITY = 0.25   # svmlight with --auto: dense when the first block is denser


def _first_lines(text, k=5, comments=True):
    """The first ``k`` data lines: blank lines (and '#' lines with
    ``comments``) are skipped, as the parsers skip them."""
    out = []
    for raw in text.split(b"\n"):
        s = raw.strip()
        if s and not (comments and s.startswith(b"#")):
            out.append(raw.rstrip(b"\r"))
        if len(out) >= k:
            break
    return out


def _header_lines(head):
    """Lines up to and including the first non-blank one (the CSV header)."""
    n = 0
    for raw in head.split(b"\n"):
        n += 1
        if raw.strip():
            return n
    return n


def is_number(tok):
    """True if ``tok`` (bytes or str) is a number as float() reads it."""
    try:
        float(tok)
        return True
    except ValueError:
        return False


def sniff_format(head):
    """'svmlight' if the first data line has index:value pairs, else 'csv'."""
    lines = _first_lines(head, 3)
    if not lines:
        return "svmlight"   # only blank and '#' lines: nothing to read either way
    for ln in lines:
        toks = ln.split(b"#", 1)[0].split()
        if len(toks) >= 2 and all(b":" in t for t in toks[1:]):
            return "svmlight"
        if len(toks) == 1 and is_number(toks[0]) and b"," not in ln:
            return "svmlight"   # a label with no features
    return "csv"


def sniff_delimiter(path, head):
    name = path.lower()
    for ext in (".gz", ".bz2"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    if name.endswith(".tsv"):
        return "\t"
    lines = _first_lines(head, 5, comments=False)
    first = lines[0] if lines else b""

    def steady(c):      # on every line, as often as on the first
        return first.count(c) > 0 and all(ln.count(c) == first.count(c) for ln in lines)
    if b";" in first and steady(b";") and not steady(b","):
        return ";"      # a ';' file, maybe with decimal commas (Excel's in many locales)
    if name.endswith(".csv") or b"," in first:
        return ","
    if b"\t" in first:
        return "\t"
    if b";" in first:
        return ";"
    return " "


LABEL_NAMES = ("label", "labels", "class", "target", "y")   # --label-col auto picks these


def _numeric_first_line(fields, rest, line, decimal="."):
    """(header?, doubt or None) for a CSV whose first line is all numbers,
    judged against the lines after it (``rest``, split). Column numbers
    (0..k-1 or 1..k, 3 or more fields) over rows that differ are a header;
    a first line of integers over columns of decimals, or out of the range
    of the rows below in most columns, is read as data with a doubt."""
    try:
        num = float if decimal == "." else (lambda f: float(f.replace(b",", b".")))
        first = np.array([num(f) for f in fields])
        below = np.array([[num(f) for f in r] for r in rest]) if rest else None
    except ValueError:
        return False, None
    if below is None or len(below) == 0:
        return False, None
    text = line.decode("utf-8", "replace")[:60]
    nf = len(first)
    counting = nf >= 3 and (np.array_equal(first, np.arange(nf))
                            or np.array_equal(first, np.arange(1, nf + 1)))
    if counting and not any(np.array_equal(r, first) for r in below):
        return True, (f"the first line ({text!r}) looks like column numbers: read as a "
                      f"header (pass --no-header to read it as data)")
    if len(below) < 20:
        return False, None
    # the share of columns where a row holds a nonzero integer although the
    # column has decimals: the first line against every row below it
    frac_cols = np.any(below != np.round(below), axis=0)

    def integer_share(r):
        return np.mean((r == np.round(r)) & (r != 0) & frac_cols)
    lo, hi = below.min(axis=0), below.max(axis=0)
    margin = 0.5 * (hi - lo)
    far = np.mean((first < lo - margin) | (first > hi + margin))
    why = None
    if integer_share(first) >= 0.5 and integer_share(first) > max(map(integer_share, below)):
        why = "integers where they have decimals"
    elif far >= 0.5:
        why = "values far outside their range"
    if why is None:
        return False, None
    return False, (f"the first line ({text!r}) differs from the rows after it ({why}): "
                   f"read as data; if it is a header, pass --header")


_is_number = is_number


class CsvLayout:
    """What the CSV reader needs: delimiter byte, header, roles of fields."""

    def __init__(self, src, head, *, delimiter, header, label_col, qid_col,
                 weight_col, skip_cols, decimal="."):
        path = src.path
        if decimal not in (".", ","):
            raise IngestError(path, f"decimal mark must be '.' or ',', got {decimal!r}")
        self.decimal_byte = ord(decimal)
        delim = delimiter if delimiter is not None else sniff_delimiter(path, head)
        if delim in ("\\t", "tab"):
            delim = "\t"
        if decimal == "," and delim == ",":
            raise IngestError(path, "decimal commas need a delimiter other than ',' "
                                    "(pass --delimiter ';', tab or space)")
        is_number = _is_number if decimal == "." else \
            (lambda tok: _is_number(tok.replace(b",", b".")))
        if delim in (" ", "whitespace", "space"):
            self.delim_byte = 0
            split = lambda s: s.split()
        else:
            if len(delim) != 1:
                raise IngestError(path, f"delimiter must be one character, got {delim!r}")
            self.delim_byte = ord(delim)
            split = lambda s: [t.strip().strip(b'"') for t in s.split(delim.encode())]
        lines = _first_lines(head, 2, comments=False)
        if not lines:
            raise IngestError(path, "empty input (no data rows)")
        fields = split(lines[0])
        nf = len(fields)
        self.warnings = []
        self.label_by_name = False
        if label_col == "auto":
            # a header field named like a label column is the label; else column 0
            named = [k for k, f in enumerate(fields)
                     if f.decode("utf-8", "replace").strip().lower() in LABEL_NAMES]
            label_col = 0
            if len(named) == 1 and not is_number(fields[named[0]]):
                label_col, self.label_by_name = named[0], True

        def col(c, what):
            if c is None:
                return None
            if isinstance(c, str):
                if c.lstrip("-").isdigit():
                    c = int(c)
                else:
                    names = [f.decode("utf-8", "replace") for f in fields]
                    if c not in names:
                        raise IngestError(path, f"{what} column {c!r} is not in the header")
                    return names.index(c)
            if not -nf <= c < nf:
                raise IngestError(path, f"{what} column {c} is out of range ({nf} fields)")
            return c % nf

        self.label_col = col(label_col, "label")
        qc = col(qid_col, "qid")
        wc = col(weight_col, "weight")
        skips = {col(c, "skip") for c in (skip_cols or [])}
        special = {self.label_col, qc, wc} - {None}
        if header == "auto":
            others = [f for k, f in enumerate(fields) if k not in special and k not in skips]
            has_header = any(not is_number(f) for f in others)
            if not has_header and self.label_col is not None and len(lines) > 1:
                # a text first field over a numeric label column is a header
                lab = fields[self.label_col]
                lab2 = split(lines[1])[self.label_col] if len(split(lines[1])) == nf else lab
                has_header = (not is_number(lab)) and is_number(lab2)
            if not has_header:
                rest = [r for r in (split(ln) for ln in _first_lines(head, 201,
                                                                     comments=False)[1:])
                        if len(r) == nf]
                has_header, doubt = _numeric_first_line(fields, rest, lines[0], decimal)
                if doubt:
                    self.warnings.append(f"{path}: {doubt}")
        else:
            has_header = bool(header)
        self.header = has_header
        self.header_lines = _header_lines(head) if has_header else 0
        self.names = [f.decode("utf-8", "replace") for f in fields] if has_header else None
        data_fields = split(lines[1]) if has_header and len(lines) > 1 else fields
        roles = np.empty(nf, np.int64)
        d = 0
        for k in range(nf):
            if k == self.label_col:
                roles[k] = P.ROLE_LABEL
            elif k == qc:
                roles[k] = P.ROLE_QID
            elif k == wc:
                roles[k] = P.ROLE_WEIGHT
            elif k in skips:
                roles[k] = P.ROLE_SKIP
            else:
                roles[k] = d
                d += 1
        self.roles = roles
        self.d = d
        self.has_qid = qc is not None
        self.has_weight = wc is not None
        self.label_text = (self.label_col is not None and len(data_fields) > self.label_col
                           and not is_number(data_fields[self.label_col]))
        self.feature_names = (None if self.names is None else
                              [self.names[k] for k in range(nf) if roles[k] >= 0])


# ---------------------------------------------------------------------------
# Parse tasks (run in worker threads; numba releases the GIL)
# ---------------------------------------------------------------------------
