"""``ingest._parse.parse_float`` reads decimal text exactly as ``float()`` does.

``parse_float(buf, i, end)`` returns ``(value, next_index, ok)``. Kernels
always hand it a block that ends with a newline (the slow path calls the C
library's ``strtod``, which stops at the first byte that cannot continue the
number), so every buffer here is ``token + b"\\n"``; ``end`` is the length of
the buffer, and a whole token is consumed when ``next_index == len(token)``.
"""
import math
import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from streamcvm.ingest._parse import parse_float

# Hypothesis caches (constants, unicode tables) go to a temporary folder, not
# to .hypothesis/ in the checkout; there is no example database (database=None).
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "streamcvm-tests-hypothesis"))


def parse(text, end=None):
    tok = text.encode() if isinstance(text, str) else text
    buf = np.frombuffer(tok + b"\n", dtype=np.uint8)
    v, nxt, ok = parse_float(buf, 0, len(buf) if end is None else end)
    return float(v), int(nxt), bool(ok)


def bits(x):
    return struct.pack("<d", x)


def assert_parses_like_float(text):
    v, nxt, ok = parse(text)
    assert ok, text
    assert nxt == len(text), (text, nxt)
    ref = float(text)
    if math.isnan(ref):
        assert math.isnan(v), text
    else:
        # bit-exact: same value, same sign of zero
        assert bits(v) == bits(ref), (text, v, ref)


FORMATS = [repr, str, lambda x: format(x, ".17g"), lambda x: format(x, ".16g"),
           lambda x: format(x, ".15g"), lambda x: format(x, ".6e"), lambda x: format(x, ".9g"),
           lambda x: format(x, ".3f"), lambda x: format(x, ".20e"), lambda x: format(x, "e"),
           lambda x: format(x, "E"), lambda x: format(x, ".25f"),
           lambda x: repr(float(np.float32(x))) if abs(x) < 3e38 else repr(x),
           lambda x: str(np.float32(x)) if abs(x) < 3e38 else repr(x)]


@settings(deadline=None, max_examples=300, database=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False))
@example(x=0.0)
@example(x=-0.0)
@example(x=5e-324)
@example(x=2.2250738585072014e-308)
@example(x=1.7976931348623157e308)
@example(x=9007199254740993.0)
@example(x=0.1)
@example(x=1e23)
@example(x=8.98846567431158e307)
def test_formatted_floats(x):
    for fmt in FORMATS:
        assert_parses_like_float(fmt(x))


@settings(deadline=None, max_examples=300, database=None)
@given(x=st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_values(x):
    """What a float32 dataset written with repr/str/%.9g looks like."""
    for text in (repr(x), str(np.float32(x)), format(x, ".9g"), format(x, ".8e")):
        assert_parses_like_float(text)


digits = st.text(alphabet="0123456789", min_size=0, max_size=30)


@settings(deadline=None, max_examples=300, database=None)
@given(sign=st.sampled_from(["", "-", "+"]), ip=digits, fp=st.none() | digits,
       exp=st.none() | st.tuples(st.sampled_from("eE"), st.sampled_from(["", "-", "+"]),
                                 st.integers(0, 400)))
@example(sign="", ip="9007199254740993", fp=None, exp=None)
@example(sign="", ip="9007199254740992", fp=None, exp=None)
@example(sign="", ip="179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531706445773437", fp=None, exp=None)
@example(sign="", ip="2", fp="4703282292062327208828439643411068618252990130716238221279284125033775363510437593264991818081799618989828234772285886546332835517796989819938739800539093906315035659515570226392290858392449105184435931802849936536152500319370457678249219365623669863658480757001585769269903706311928279558551332927834338409351978015531246597263579574622766465272827220056374006485499977096599470454020828166226237857393450736339007967761930577506740176324673600968951340535537458516661134223766678604162159680461914467291840300530057530849048765391711386591646239524912623653881879636239373280423891018672348497668235089863388587925628302755995657524455507255189313690836254779186948667994968324049705821028513185451396213837722826145437693412532098591327667236328125", exp=("e", "-", 308))
def test_decimal_strings(sign, ip, fp, exp):
    """Arbitrary digit strings: long mantissas, leading/trailing zeros, huge and
    tiny exponents (the exact slow path), all as ``float()`` reads them."""
    text = sign + ip
    if fp is not None:
        text += "." + fp
    assume(any(c.isdigit() for c in text))
    if exp is not None:
        text += exp[0] + exp[1] + str(exp[2])
    assert_parses_like_float(text)


@pytest.mark.parametrize("text", [
    "0", "-0", "+0", "0.0", "-0.0", "00", "007", "1e-320", "4.9e-324", "2.4e-324",
    "1.7976931348623157e308", "123456789012345678901234567890",
    "0.000000000000000000000000000001", "-0", ".5", "5.", "-.5", "+3", "1E+10", "1e-10",
    "1e22", "1e23", "9007199254740993", "9007199254740992", "9007199254740991e-22",
    "123456789012345678", "1234567890123456789", "12345678901234567890",
    "0.1", "0.30000000000000004", "2.2250738585072011e-308", "1e400", "-1e400",
    "1e-400", "000000000000000000000000000000000001", "1" + "0" * 40 + "e-40",
    "3.4028235e+38", "1.17549435e-38", "1.401298464324817e-45",
    "nan", "NaN", "-nan", "+nan", "inf", "-inf", "+inf", "Inf", "INF", "infinity",
    "Infinity", "-Infinity", "INFINITY",
])
def test_tokens(text):
    assert_parses_like_float(text)


@pytest.mark.parametrize("text", ["abc", "", "-", "+", ".", "-.", "+.", "e5", ".e5", "-e5",
                                  "x1", "in", "na", "--1", "+-1", " 1", ":1", "#"])
def test_not_a_number(text):
    v, nxt, ok = parse(text)
    assert not ok
    assert nxt == 0


@pytest.mark.parametrize("text,value,used", [
    ("1e", 1.0, 1), ("1e+", 1.0, 1), ("1E-x", 1.0, 1), ("2.5x", 2.5, 3), ("7:3", 7.0, 1),
    ("1,2", 1.0, 1), ("3 4", 3.0, 1), ("1.2.3", 1.2, 3), ("infx", math.inf, 3),
    ("nano", math.nan, 3), ("1_000", 1.0, 1), ("0x10", 0.0, 1), ("12e3e4", 12e3, 4),
    ("-0.0e", -0.0, 4), ("1" * 25 + "x", float("1" * 25), 25),
])
def test_longest_numeric_prefix(text, value, used):
    """The token stops where the number does; the caller judges what follows."""
    v, nxt, ok = parse(text)
    assert ok
    assert nxt == used
    if math.isnan(value):
        assert math.isnan(v)
    else:
        assert bits(v) == bits(value)


def test_end_limits_the_token():
    buf = np.frombuffer(b"12345\n", dtype=np.uint8)
    v, nxt, ok = parse_float(buf, 0, 3)
    assert ok and v == 123.0 and nxt == 3
    v, nxt, ok = parse_float(buf, 2, 5)
    assert ok and v == 345.0 and nxt == 5
    buf = np.frombuffer(b"x-2.5e3\n", dtype=np.uint8)
    v, nxt, ok = parse_float(buf, 1, len(buf))
    assert ok and v == -2500.0 and nxt == 7
    v, nxt, ok = parse_float(buf, 1, 2)     # just "-"
    assert not ok


@settings(deadline=None, max_examples=40, database=None)
@given(xs=st.lists(st.floats(allow_nan=False, allow_infinity=False,
                             min_value=-3e38, max_value=3e38), min_size=1, max_size=60),
       fmt=st.sampled_from(["r", ".17g", ".6e", ".3f"]))
def test_ingested_values_are_float32_of_float(tmp_path_factory, xs, fmt):
    """Through ingest(): X is float32(float(text)), y is float(text), exactly,
    as scikit-learn's loader followed by ``.astype(np.float32)``."""
    from streamcvm.ingest import ingest
    from streamcvm import open_store
    d = tmp_path_factory.mktemp("num")
    texts = [repr(x) if fmt == "r" else format(x, fmt) for x in xs]
    lines = [f"{t},{t},{texts[k - 1]}" for k, t in enumerate(texts)]
    (d / "v.csv").write_text("\n".join(lines) + "\n")
    ingest(d / "v.csv", d / "v.zarr", header=False)
    s = open_store(d / "v.zarr")
    c = s.chunk(0)
    ref = np.array([float(t) for t in texts])
    np.testing.assert_array_equal(c.y, ref)
    assert c.y.view(np.int64).tolist() == ref.view(np.int64).tolist()   # -0.0 too
    np.testing.assert_array_equal(c.X[:, 0], ref.astype(np.float32))
    np.testing.assert_array_equal(c.X[:, 1], np.roll(ref, 1).astype(np.float32))
