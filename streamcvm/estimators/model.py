"""Trained models on disk, without pickle: a JSON manifest plus .npy arrays.

A model is a folder::

    model.json          format version, library versions, estimator, params,
                        kernel, classes, one record per machine, checksums
    m{k}_coef.npy       alpha_i y_i of machine k
    m{k}_sv.npy         its support rows (dense), or
    m{k}_sv_indptr.npy / _indices.npy / _data.npy   (CSR)
    m{k}_ids.npy        the support rows' ids in the training store
    {name}.npy          the estimator's own arrays, listed in model.json's
                        "arrays" (a one-vs-rest classifier: support_classes,
                        the class of each distinct support row)

It is written under a temporary name next to the destination and renamed
(a model that exists is complete; :mod:`streamcvm.data.atomic`). The folder may
also be an fsspec URL (``s3://``, ``gs://``, ``memory://`` ...): the arrays
are uploaded first, model.json last. ``load_model`` checks the format
version (a newer one is refused), model.json's own checksum and fields,
and every array's XXH3 checksum: a damaged or edited model is refused in
one line (:class:`ModelError`), never half-read.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import __version__
from ..data.snapshots import file_digest as _digest
from ..options import recorded
from ..solvers.kernels import Kernel
from ..problems.machine import COMPACT_ARRAYS, has_compact, machine_arrays, machine_from

if TYPE_CHECKING:
    from typing import TypeAlias

    from ..data.outputs import Target
    from ..problems.machine import Machine
    from .classifier import CVMClassifier
    from .mmda import MMDATransformer
    from .oneclass import CVMOneClass
    from .ranker import CVMRanker
    from .regressor import CVMRegressor

    # what a model folder holds
    Model: TypeAlias = CVMClassifier | CVMOneClass | CVMRegressor | CVMRanker | MMDATransformer

FORMAT_VERSION = 1


class ModelError(Exception):
    """A path that is not a readable model (one-line message)."""


def stage_summary(history):
    """A progressive fit's stages, from its per-level history: for each, its
    rows, the route its steps took (the exact pass over every row, sampled, or
    sampled then exact), its steps, its core set and validation loss at its
    end; [] for a fit without stages."""
    out = []
    for h in history:
        rows = h.get("stage_rows")
        if rows is None or "full_pass_violators" in h:
            continue
        if not out or out[-1]["rows"] != rows:
            out.append({"rows": int(rows), "exact": False, "sampled": False, "first": None})
        st = out[-1]
        st["exact" if h.get("exact") else "sampled"] = True
        if st["first"] is None:
            st["first"] = out[-2]["iteration"] if len(out) > 1 else 0
        st["iteration"] = int(h.get("iteration", 0))
        st["core_size"] = int(h.get("core_size", 0))
        for k in ("stage_validation_error", "stage_validation_rmse"):
            if k in h:
                st[k] = float(h[k])
    for st in out:
        # solver counts its steps from 0)
        st["route"] = ("sampled, then exact" if st["sampled"] and st["exact"] else
                       "exact" if st["exact"] else "sampled")
        first = st.pop("first")      # (a stage that did not continue the last one's
        st["steps"] = st["iteration"] - first if st["iteration"] >= first else st["iteration"]
        del st["exact"], st["sampled"], st["iteration"]
    return out


def machine_route(history, stages):
    """How a machine was trained, from its history: "progressive" (stages of
    a sample), "exact smo", or the route of its last solve ("exact",
    "sampled", "sampled, then exact"; "sampled" when none is recorded)."""
    if stages:
        return "progressive"
    last = history[-1] if history else {}
    return (last.get("dispatch") or {}).get("path") or "sampled"


def save_model(est: Model, path: str | os.PathLike[str], overwrite: bool = False,
               target: Target | None = None) -> str:
    """Write a fitted estimator to a model folder (JSON manifest and .npy arrays, no pickle).

    The folder is written under a temporary name next to ``path`` and
    renamed, so a model that exists is complete; to an fsspec URL the arrays
    are uploaded first, model.json last.

    Parameters
    ----------
    est : CVMClassifier, CVMRegressor, CVMOneClass, CVMRanker or MMDATransformer
        The fitted estimator.
    path : str or os.PathLike
        The model folder: a local path or an fsspec URL (``s3://``,
        ``memory://`` ...).
    overwrite : bool, default False
        Replace any other existing file or streamcvm output at ``path``. An
        existing model folder is replaced without it; a folder of other
        files never is (:func:`streamcvm.data.outputs.check_output`).
    target : Target, optional
        That check's answer when it was made before training (the command
        line): a model another run wrote there since is then not replaced.
        None: the check is made now.

    Returns
    -------
    str
        The model folder written (a local path made absolute, or the URL).

    Raises
    ------
    TypeError
        ``est`` is not a streamcvm estimator.
    ValueError
        The model's decision values on its own support rows are not finite
        (:func:`~streamcvm.estimators.feature_range.check_finite`).
    streamcvm.data.outputs.OutputError
        ``path`` may not be written (see ``overwrite``).
    """
    from ..data.atomic import atomic_dir, is_url
    from ..data.outputs import check_output
    kind = type(est).__name__
    if _estimators().get(kind) is not type(est):
        raise TypeError(f"cannot save {kind}: not a streamcvm estimator")
    machines, fields = est._model_record()
    from .feature_range import check_finite
    check_finite(est)       # decision values not finite on its own rows: never written
    path = os.fspath(path)
    if target is None:
        target = check_output(path, what="model folder", own_kind="model",
                              overwrite=overwrite, url_ok=True)
    if not is_url(path):
        path = os.path.abspath(path)
    with atomic_dir(path, last="model.json", replace=target.replace) as tmp:
        files = {}

        def put(name, arr):
            fn = os.path.join(tmp, name + ".npy")
            np.save(fn, np.ascontiguousarray(arr), allow_pickle=False)
            files[name + ".npy"] = _digest(fn)

        bases: dict[int, int]       # id(a shared basis): the machine written with it
        recs, bases = [], {}
        for k, m in enumerate(machines):
            rec, arrays = machine_arrays(m)
            if m.compact is not None and rec["compact"].get("shared"):
                # one basis for all machines: written once, with the first of them
                first = bases.setdefault(id(m.compact.sv), k)
                if first != k:
                    del arrays["compact_sv"]
                    rec["compact"]["basis_of"] = first
            hist = rec.pop("history")        # not part of a model; what it reached is
            last = hist[-1] if hist else {}
            rec["eps_reached"] = last.get("certified_eps", last.get("eps"))
            rec["stage_rows"] = last.get("stage_rows")
            if last.get("stopped_by"):
                rec["stages_stopped_by"] = last["stopped_by"]
            if last.get("gain_left") is not None:    # what stopping there gave up (estimated)
                rec["stages_gain_left"] = last["gain_left"]
            stages = stage_summary(hist)
            if stages:
                rec["stages"] = stages
            rec["route"] = machine_route(hist, stages)
            for name, arr in arrays.items():
                put(f"m{k}_{name}", arr)
            recs.append(rec)
        extra: dict[str, Any] = getattr(est, "_model_arrays", dict)()  # the estimator's own arrays
        for name, arr in extra.items():
            put(name, arr)
        scaler = getattr(est, "scaler_", None)
        if scaler is not None:          # scale=True: the transform predict applies
            put("scale_scale", scaler.scale)
            if scaler.offset is not None:
                put("scale_offset", scaler.offset)
        manifest = {
            "streamcvm_model_format": FORMAT_VERSION,
            "created_by": f"streamcvm {__version__}",
            "library_versions": {"numpy": np.__version__},
            "estimator": kind,
            "params": recorded(est.get_params()),
            "kernel": {"name": est.kernel_.name, "gamma": est.kernel_.gamma,
                       "coef0": est.kernel_.coef0, "degree": est.kernel_.degree},
            "n_features_in": int(est.n_features_in_),
            # the estimator's own fields (_model_record), None where it has none
            "classes": None, "offset": None, "C_": None, "mu_": None, "target_type": None,
            "n_support": None,      # a classifier's distinct support rows per class
            "training": getattr(est, "training_", None),   # seconds, rows, store fingerprint
            # hyperparameters chosen on held-out rows: every candidate and its score
            "selection": getattr(est, "selection_", None),
            "scaler": None if scaler is None else {"centred": scaler.offset is not None},
            "probability": None,
            "arrays": sorted(extra),
            "machines": recs,
            "files": files,
        }
        manifest.update(fields)
        manifest = json.loads(json.dumps(manifest))     # as a reader will see it
        manifest[DIGEST_KEY] = manifest_digest(manifest)
        with open(os.path.join(tmp, "model.json"), "w") as f:
            json.dump(manifest, f, indent=1)
    return path


DIGEST_KEY = "manifest_xxh3_128"





def manifest_digest(man):
    """XXH3-128 of a manifest's canonical JSON (sorted keys, no blanks),
    without its own checksum: model.json carries it, so an edited or damaged
    manifest is refused, as a damaged array file is."""
    import xxhash
    body = {k: v for k, v in man.items() if k != DIGEST_KEY}
    return xxhash.xxh3_128(json.dumps(body, sort_keys=True, separators=(",", ":"))
                           .encode()).hexdigest()


def _reader(path):
    """``read(name)``: the bytes of a file of the model folder ``path`` (a
    local path or an fsspec URL), or None if it is not there."""
    from ..data.atomic import is_url
    if is_url(path):
        import fsspec
        fs, root = fsspec.core.url_to_fs(path)

        def read(name):
            p = root.rstrip("/") + "/" + name
            return fs.cat_file(p) if fs.isfile(p) else None
    else:
        def read(name):
            fn = os.path.join(path, name)
            if not os.path.isfile(fn):
                return None
            with open(fn, "rb") as f:
                return f.read()
    return read


def read_manifest(path):
    """(model.json of the model folder ``path``, a reader of its files),
    checked whole before anything trusts it: JSON, a format this streamcvm
    reads, its own checksum (models written since it was added) and fields
    that agree with each other. :class:`ModelError`, one line, otherwise."""
    path = os.fspath(path)
    read = _reader(path)
    mf = os.path.join(path, "model.json")
    text = read("model.json")
    if text is None:
        raise ModelError(f"{path}: not a streamcvm model (no model.json)")
    try:
        man = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{mf}: damaged (not JSON: {e})") from None
    if not isinstance(man, dict):
        raise ModelError(f"{mf}: damaged (not a JSON object)")
    ver = man.get("streamcvm_model_format")
    if not isinstance(ver, int) or ver > FORMAT_VERSION:
        raise ModelError(f"{path}: model format {ver!r} is not readable by this streamcvm "
                         f"(reads {FORMAT_VERSION}); upgrade streamcvm")
    want = man.get(DIGEST_KEY)
    if want is not None and want != manifest_digest(man):
        raise ModelError(f"{mf}: damaged or edited since it was written (its checksum does "
                         f"not match); retrain or restore the model")
    try:
        _check_fields(man)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        why = f"no field {e}" if isinstance(e, KeyError) else str(e)
        raise ModelError(f"{mf}: damaged ({why})") from None
    return man, read


def _check_fields(man):
    """The manifest's fields, each of the type it must have and consistent
    with the others (a model of an older streamcvm carries no checksum:
    this is what is checked there). Raises KeyError / TypeError / ValueError."""
    import math
    from ..solvers.kernels import kernel_names

    def number(v, what, positive=False):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{what} is {v!r}, not a finite number")
        if positive and v <= 0:
            raise ValueError(f"{what} is {v!r}, not positive")
        return v

    kind = man["estimator"]
    if kind not in _estimators():
        raise ValueError(f"unknown estimator {kind!r}")
    if not isinstance(man["params"], dict):
        raise TypeError("params is not an object")
    k = man["kernel"]
    if k["name"] not in kernel_names():
        raise ValueError(f"unknown kernel {k['name']!r}")
    number(k["gamma"], "the kernel's gamma", positive=True)
    number(k["coef0"], "the kernel's coef0")
    number(k["degree"], "the kernel's degree", positive=True)
    d = man["n_features_in"]
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"n_features_in is {d!r}, not a positive integer")
    machines, files = man["machines"], man["files"]
    if not isinstance(machines, list) or not machines:
        raise ValueError("no machines")
    if not isinstance(files, dict):
        raise TypeError("files is not an object")
    for j, r in enumerate(machines):
        shape = r["shape"]
        if not (isinstance(shape, list) and len(shape) == 2 and shape[1] == d):
            raise ValueError(f"machine {j} has support rows of shape {shape!r}, the model "
                             f"{d} features")
        number(r["intercept"], f"machine {j}'s intercept")
        if r.get("target") is not None:     # a regression's standardised targets
            number(r["target"]["mean"], f"machine {j}'s target mean")
            number(r["target"]["sd"], f"machine {j}'s target sd", positive=True)
        names = _array_names(r)
        for n in names:
            if f"m{j}_{n}.npy" not in files:
                raise ValueError(f"machine {j} has no {n} file")
        if has_compact(r):
            number(r["compact"]["intercept"], f"machine {j}'s compact intercept")
            of = r["compact"].get("basis_of")
            if of is not None and not (isinstance(of, int) and 0 <= of < j and has_compact(
                    machines[of]) and machines[of]["compact"].get("basis_of") is None):
                raise ValueError(f"machine {j}'s compact basis is that of machine {of!r}, "
                                 "which has none of its own")
    classes = man.get("classes")
    if kind in ("CVMClassifier", "MMDATransformer"):
        if not isinstance(classes, list) or len(classes) < 2:
            raise ValueError(f"classes is {classes!r}, not a list of at least 2")
    if kind == "CVMClassifier":
        c = len(classes)
        ovr = man["params"].get("multi_class") == "ovr" and c > 2
        want = c if ovr else c * (c - 1) // 2
        if len(machines) != want:
            raise ValueError(f"{c} classes need {want} machines "
                             f"({'one-vs-rest' if ovr else 'one-vs-one'}), the model has "
                             f"{len(machines)}")
        pr = man.get("probability")
        if pr is not None and not (len(pr["A"]) == len(pr["B"]) == len(machines)):
            raise ValueError("the probability sigmoids do not match the machines")
    elif kind != "MMDATransformer" and len(machines) != 1:
        raise ValueError(f"a {kind} has one machine, the model has {len(machines)}")
    extra = man.get("arrays") or []
    if not isinstance(extra, list):
        raise TypeError("arrays is not a list")
    for n in extra:
        if f"{n}.npy" not in files:
            raise ValueError(f"no {n} file")
    sc = man.get("scaler")
    if sc is not None:
        for n in ["scale_scale"] + (["scale_offset"] if sc["centred"] else []):
            if f"{n}.npy" not in files:
                raise ValueError(f"no {n} file")


def _array_names(r):
    """The array files of machine record ``r`` (``m<k>_<name>.npy``)."""
    names = ["coef", "ids"] + (["sv_data", "sv_indices", "sv_indptr"] if r["sparse"] else ["sv"])
    if has_compact(r):
        names += [n for n in COMPACT_ARRAYS
                  if not (n == "compact_sv" and r["compact"].get("basis_of") is not None)]
    return names


def verify_model(path):
    """model.json of the model folder ``path`` after checking it whole
    (:func:`read_manifest`) and every array file against its checksum:
    what ``streamcvm info`` describes. :class:`ModelError` otherwise."""
    man, read = read_manifest(path)
    for name in man["files"]:
        _array(path, man, read, name[:-len(".npy")])
    return man


def _array(path, man, read, name):
    """Array ``name`` of the model folder, checked against its checksum."""
    import io
    import xxhash
    data = read(name + ".npy")
    want = man["files"].get(name + ".npy")
    where = os.path.join(path, name + ".npy")
    if data is None:
        raise ModelError(f"{where}: missing")
    if want is None or xxhash.xxh3_128(data).hexdigest() != want:
        raise ModelError(f"{where}: damaged (checksum mismatch)")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ModelError(f"{where}: damaged ({e})") from None


def load_model(path: str | os.PathLike[str]) -> Model:
    """Read a model folder written by :func:`save_model`.

    The folder is checked whole first (:func:`read_manifest`: the format
    version, model.json's own checksum and fields), every array against its
    checksum: a damaged or edited model is refused, never half-read.

    Parameters
    ----------
    path : str or os.PathLike
        The model folder: a local path or an fsspec URL.

    Returns
    -------
    CVMClassifier, CVMRegressor, CVMOneClass, CVMRanker or MMDATransformer
        The fitted estimator, ready to predict (or transform).

    Raises
    ------
    ModelError
        ``path`` is not a readable model, or it is damaged (one line).
    """
    path = os.fspath(path)
    man, read = read_manifest(path)

    def get(name):
        return _array(path, man, read, name)

    machines: list[Machine] = []
    for k, r in enumerate(man["machines"]):
        arrays = {n: get(f"m{k}_{n}") for n in _array_names(r)}
        of = r["compact"].get("basis_of") if has_compact(r) else None
        if of is not None:              # a shared basis: the same array as machine ``of``'s
            arrays["compact_sv"] = machines[of].compact.sv
        m = machine_from(r, arrays)
        c = m.compact
        if m.sv.shape[0] != len(m.coef) or m.sv.shape[1] != man["n_features_in"] or (
                c is not None and (c.sv.ndim != 2 or c.sv.shape[0] != len(c.coef)
                                   or c.sv.shape[1] != man["n_features_in"])):
            raise ModelError(f"{os.path.join(path, 'model.json')}: damaged (machine {k}'s "
                             f"arrays do not match its record)")
        machines.append(m)
    cls = _estimators()[man["estimator"]]
    params = dict(man["params"])
    if params.get("options") is not None:
        from ..options import Options
        try:
            params["options"] = Options.from_dict(params["options"])
        except ValueError as e:
            raise ModelError(f"{os.path.join(path, 'model.json')}: {e}") from None
    if isinstance(params.get("class_weight"), dict):
        params["class_weight"] = _class_weight_keys(params["class_weight"], man["classes"])
    est = cls(**params)
    kp = man["kernel"]
    est.kernel_ = Kernel(kp["name"], gamma=kp["gamma"], coef0=kp["coef0"], degree=kp["degree"])
    est.gamma_ = kp["gamma"]
    est.n_features_in_ = man["n_features_in"]
    est.n_iter_ = sum(m.n_iter for m in machines)
    est.core_set_size_ = sum(m.core_size for m in machines)
    est.history_ = []
    est.training_ = man.get("training")
    est.selection_ = man.get("selection")
    est.scaler_ = None
    if man.get("scaler") is not None:
        from ..data.scaling import Scaler
        est.scaler_ = Scaler(get("scale_offset") if man["scaler"]["centred"] else None,
                             get("scale_scale"))
    extra = {n: get(n) for n in man.get("arrays") or []}
    if extra:
        est._model_restore(machines, man, extra)
    else:
        est._model_restore(machines, man)
    return est


def _estimators():
    """Estimator name -> class, for the names model.json records."""
    from .. import estimators
    return {**{name: getattr(estimators, name) for name in estimators.ESTIMATORS},
            "MMDATransformer": estimators.MMDATransformer}


def _class_weight_keys(cw, classes):
    """JSON makes a class_weight dict's keys strings: map each back to the
    model's class it names (by value for numeric labels)."""
    out = {}
    for key, w in cw.items():
        match = [c for c in classes if str(c) == key]
        if not match:
            try:
                match = [c for c in classes if isinstance(c, (int, float)) and c == float(key)]
            except ValueError:
                match = []
        out[match[0] if match else key] = w
    return out
