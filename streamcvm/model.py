"""Trained models on disk, without pickle: a JSON manifest plus .npy arrays.

A model is a folder::

    model.json          format version, library versions, estimator, params,
                        kernel, classes, one record per machine, checksums
    m{k}_coef.npy       alpha_i y_i of machine k
    m{k}_sv.npy         its support rows (dense), or
    m{k}_sv_indptr.npy / _indices.npy / _data.npy   (CSR)
    m{k}_ids.npy        the support rows' ids in the training store

It is written under a temporary name next to the destination and renamed
(a model that exists is complete; :mod:`streamcvm.atomic`). The folder may
also be an fsspec URL (``s3://``, ``gs://``, ``memory://`` ...): the arrays
are uploaded first, model.json last. ``load_model`` checks the format
version (a newer one is refused) and every array's XXH3 checksum.
"""
import json
import os

import numpy as np

from . import __version__
from .checkpoint import file_digest as _digest
from .kernels import Kernel
from .problems.machine import machine_arrays, machine_from

FORMAT_VERSION = 1


class ModelError(Exception):
    """A path that is not a readable model (one-line message)."""


def save_model(est, path, overwrite=False):
    """Write a fitted CVMClassifier / CVMRegressor / CVMOneClass / CVMRanker /
    MMDATransformer to the folder ``path``. An existing model folder there is
    replaced; any other existing file or streamcvm output only with
    ``overwrite=True``, and a folder of other files never (:func:`streamcvm.outputs.check_output`)."""
    from .atomic import atomic_dir, is_url
    from .outputs import check_output
    kind = type(est).__name__
    if _estimators().get(kind) is not type(est):
        raise TypeError(f"cannot save {kind}: not a streamcvm estimator")
    machines, fields = est._model_record()
    path = os.fspath(path)
    if not is_url(path):
        path = os.path.abspath(path)
    check_output(path, what="model folder", own_kind="model", overwrite=overwrite)
    with atomic_dir(path, last="model.json") as tmp:
        files = {}

        def put(name, arr):
            fn = os.path.join(tmp, name + ".npy")
            np.save(fn, np.ascontiguousarray(arr), allow_pickle=False)
            files[name + ".npy"] = _digest(fn)

        recs = []
        for k, m in enumerate(machines):
            rec, arrays = machine_arrays(m)
            hist = rec.pop("history")        # not part of a model; what it reached is
            last = hist[-1] if hist else {}
            rec["eps_reached"] = last.get("certified_eps", last.get("eps"))
            rec["stage_rows"] = last.get("stage_rows")
            for name, arr in arrays.items():
                put(f"m{k}_{name}", arr)
            recs.append(rec)
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
            "params": {k: v for k, v in est.get_params().items()},
            "kernel": {"name": est.kernel_.name, "gamma": est.kernel_.gamma,
                       "coef0": est.kernel_.coef0, "degree": est.kernel_.degree},
            "n_features_in": int(est.n_features_in_),
            # the estimator's own fields (_model_record), None where it has none
            "classes": None, "offset": None, "C_": None, "mu_": None, "target_type": None,
            "training": getattr(est, "training_", None),   # seconds, rows, store fingerprint
            "scaler": None if scaler is None else {"centred": scaler.offset is not None},
            "probability": None,
            "machines": recs,
            "files": files,
        }
        manifest.update(fields)
        with open(os.path.join(tmp, "model.json"), "w") as f:
            json.dump(manifest, f, indent=1)
    return path


def _reader(path):
    """``read(name)``: the bytes of a file of the model folder ``path`` (a
    local path or an fsspec URL), or None if it is not there."""
    from .atomic import is_url
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


def load_model(path):
    """Read a model folder written by :func:`save_model` (a path or an fsspec URL)."""
    import io
    import xxhash
    path = os.fspath(path)
    read = _reader(path)
    mf = os.path.join(path, "model.json")
    text = read("model.json")
    if text is None:
        raise ModelError(f"{path}: not a streamcvm model (no model.json)")
    try:
        man = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelError(f"{mf}: corrupt manifest ({e})") from None
    ver = man.get("streamcvm_model_format")
    if ver is None or ver > FORMAT_VERSION:
        raise ModelError(f"{path}: model format {ver} is not readable by this streamcvm "
                         f"(reads {FORMAT_VERSION}); upgrade streamcvm")

    def get(name):
        data = read(name + ".npy")
        want = man["files"].get(name + ".npy")
        if want is None or data is None or xxhash.xxh3_128(data).hexdigest() != want:
            raise ModelError(f"{os.path.join(path, name + '.npy')}: missing or corrupt "
                             f"(checksum mismatch)")
        return np.load(io.BytesIO(data), allow_pickle=False)

    machines = []
    for k, r in enumerate(man["machines"]):
        names = ["coef", "ids"] + (["sv_data", "sv_indices", "sv_indptr"] if r["sparse"]
                                   else ["sv"])
        machines.append(machine_from(r, {n: get(f"m{k}_{n}") for n in names}))
    cls = _estimators().get(man["estimator"])
    if cls is None:
        raise ModelError(f"{path}: unknown estimator {man['estimator']!r}")
    params = dict(man["params"])
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
    est.scaler_ = None
    if man.get("scaler") is not None:
        from .scaling import Scaler
        est.scaler_ = Scaler(get("scale_offset") if man["scaler"]["centred"] else None,
                             get("scale_scale"))
    est._model_restore(machines, man)
    return est


def _estimators():
    """Estimator name -> class, for the names model.json records."""
    from . import estimators
    from .transformers import MMDATransformer
    return {**{name: getattr(estimators, name) for name in estimators.ESTIMATORS},
            "MMDATransformer": MMDATransformer}


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
