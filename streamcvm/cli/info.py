"""``streamcvm info``: what a store, a model folder or a checkpoint folder holds."""
import os


def add(sub):
    p = sub.add_parser("info", help="describe a store, a model, a checkpoint folder or a text file",
                       description="Rows, features, density, classes or target range, "
                                   "chunking and sizes of a store; a model's estimator, "
                                   "kernel, parameters, classes, machines, core sets, eps "
                                   "reached and training; or, for a folder of training "
                                   "checkpoints, the progress each one records. Of a text "
                                   "file (svmlight, CSV): what it is and how to make it a "
                                   "store.")
    p.add_argument("path", metavar="STORE|MODEL|CHECKPOINT_DIR", nargs="?",
                   help="a store (.zarr folder, .h5 file or URL), a model folder, a "
                        "checkpoint folder, or a text file")
    p.add_argument("--options", action="store_true",
                   help="list every setting of the solvers, samplers and surfaces (the "
                        "estimators' options=, train's --option NAME=VALUE): its default, "
                        "unit and what it trades; with a MODEL, the values it was trained "
                        "with")
    p.set_defaults(func=run)


def _human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{nbytes} B"
        nbytes /= 1024.0


def describe_store(path):
    """The text ``streamcvm info`` prints for a store."""
    from ..data.store import open_store
    s = open_store(path)
    stored, raw = s.sizes()
    cells = s.n * s.d
    nnz = s.nnz
    lines = [
        f"store      {s.path} ({s.backend}, format v{s.attrs['streamcvm_format']})",
        f"rows       {s.n:,}",
        f"features   {s.d:,}",
        f"layout     {'sparse (CSR)' if s.sparse else 'dense'}, "
        f"density {nnz / cells if cells else 0:.4f} ({nnz:,} nonzeros)",
        f"chunks     {s.n_chunks:,} x {s.chunk_rows:,} rows",
        f"size       {_human(stored)} on disk, {_human(raw)} raw "
        f"({raw / max(stored, 1):.2f}x compression)",
    ]
    if s.checksums:
        lines.append(f"integrity  {s.checksums} checksum on every chunk, missing chunks "
                     f"refused{', attributes checksummed' if s.attrs_checked else ''}")
    else:
        lines.append("integrity  none: written before stores carried checksums, so damaged "
                     "or missing chunks are not detected (re-ingest to add them)")
    if s.allow_nan:
        lines.append("values     ingested with --allow-nan: NaN / inf cells are refused "
                     "when read for training or prediction")
    extras = [n for n, f in (("qid", s.has_qid), ("weight", s.has_weight)) if f]
    if extras:
        lines.append(f"columns    {', '.join(extras)}")
    if s.has_qid:
        q = s.rows(0, s.n).qid if s.n <= 10_000_000 else None
        if q is not None:
            lines.append(f"queries    {len(set(q.tolist())):,}")
    if s.classes is not None:
        totals = s.attrs.get("class_totals") or []
        names = s.label_names
        parts = []
        for k, (c, t) in enumerate(zip(s.classes, totals)):
            lab = names[int(c)] if names and 0 <= int(c) < len(names) else f"{c:g}"
            parts.append(f"{lab}: {t:,}")
        shown = parts if len(parts) <= 30 else parts[:30] + [f"... ({len(parts) - 30} more)"]
        lines.append(f"classes    {len(parts)}  (" + ", ".join(shown) + ")")
    elif s.attrs.get("y_min") is not None:
        lines.append(f"target     [{s.attrs['y_min']:g}, {s.attrs['y_max']:g}]")
    for src in s.attrs.get("sources") or []:
        lines.append(f"source     {src['path']} ({src['format']}"
                     f"{', ' + src['compression'] if src.get('compression') else ''}, "
                     f"{src['rows']:,} rows, xxh3 {src['xxh3_128'][:16]})")
    if s.attrs.get("generator"):
        g = s.attrs["generator"]
        lines.append(f"generator  {g['kind']} (n={g['n']:,}, d={g['d']}, seed={g['seed']})")
    lines.append(f"fingerprint {s.fingerprint[:32]}")
    s.close()
    return "\n".join(lines)


def describe_model(path):
    """The text ``streamcvm info`` prints for a model folder: its manifest,
    after the whole model is checked (model.json's own checksum and fields,
    every array file's checksum; :func:`streamcvm.estimators.model.verify_model`)."""
    from ..estimators.model import verify_model
    man = verify_model(path)
    k = man["kernel"]
    kern = f"{k['name']} (gamma {k['gamma']:.6g}" + \
        (f", coef0 {k['coef0']:g}, degree {k['degree']}" if k["name"] in ("poly", "npoly")
         else "") + ")"
    params = ", ".join(f"{n}={v!r}" for n, v in sorted(man["params"].items())
                       if n not in ("verbose", "options"))
    changed = man["params"].get("options") or {}
    opts = "the defaults of " + man.get("created_by", "its streamcvm") if not changed else \
        ", ".join(f"{n}={_value(tuple(v) if isinstance(v, list) else v)}"
                  for n, v in changed.items()) + " (the rest the defaults)"
    lines = [f"model      {os.path.abspath(path)} (format v{man['streamcvm_model_format']}, "
             f"{man.get('created_by', '?')})",
             f"estimator  {man['estimator']}",
             f"kernel     {kern}",
             f"params     {params}",
             f"options    {opts} (streamcvm info --options lists them)",
             f"features   {man['n_features_in']:,}"]
    for name in ("C_", "mu_"):
        if man.get(name) is not None:
            lines.append(f"{name:<10} {man[name]:.6g}")
    cl = man.get("classes")
    if cl is not None:
        shown = ", ".join(str(c) for c in cl[:30]) + (f", ... ({len(cl) - 30} more)"
                                                       if len(cl) > 30 else "")
        lines.append(f"classes    {len(cl)}  ({shown})")
    ms = man["machines"]
    core = [m["core_size"] for m in ms]
    nsv = [m["shape"][0] for m in ms]
    reached = [m.get("eps_reached") for m in ms]
    sets = f"core set {core[0]:,}" if len(ms) == 1 else \
        f"core sets {min(core):,}-{max(core):,} ({sum(core):,} in all)"
    if man["estimator"] == "MMDATransformer":     # a machine per feature
        lines.append(f"output     {len(ms):,} features ({man['params']['n_components']} per "
                     f"class, one-vs-rest beyond two classes): {min(core):,}-{max(core):,} "
                     f"support rows per feature ({sum(core):,} in all)")
    else:
        distinct = man.get("n_support")     # classifiers: distinct rows per class
        svs = f"{sum(nsv):,} support vectors" if distinct is None or len(ms) == 1 else \
            f"{sum(distinct):,} support vectors ({sum(nsv):,} over the machines)"
        lines.append(f"machines   {len(ms):,}: {svs}, {sets}, "
                     f"{sum(m['n_iter'] for m in ms):,} iterations")
    if all(r is not None for r in reached) and reached:
        lines.append(f"eps        reached {min(reached):.3g}" +
                     (f"-{max(reached):.3g}" if max(reached) != min(reached) else "") +
                     f" (asked: {man['params'].get('eps')!r})")
    lines += describe_selection(man.get("selection"))
    stages = [m.get("stage_rows") for m in ms if m.get("stage_rows")]
    if stages:
        why = sorted({m["stages_stopped_by"] for m in ms if m.get("stages_stopped_by")})
        span = f"{min(stages):,}" + (f"-{max(stages):,}" if max(stages) != min(stages) else "")
        left = [m["stages_gain_left"] for m in ms if m.get("stages_gain_left") is not None]
        unit = "% of the validation MSE" if man["estimator"] == "CVMRegressor" else " points"
        lines.append(f"sample     progressive: the last stage trained on "
                     f"{span} sampled rows per machine"
                     + (f" (stopped by: {', '.join(why)})" if why else ""))
        if left:
            lines.append(f"           estimated gain left from the rest of the sample: "
                         f"{max(left):.3g}{unit} (tolerance "
                         f"{man['params'].get('stage_tol', '?')})")
    routes = [m.get("route") for m in ms]
    if len(ms) > 1 and all(routes):         # how many machines took each route
        from collections import Counter
        lines.append(f"routes     {len(ms):,} machines: " + ", ".join(
            f"{n:,} {r}" for r, n in Counter(routes).most_common()))
    staged = [m for m in ms if m.get("stages")]
    if staged:          # the stages of the first machine that has them: their routes and cost
        m = staged[0]
        who = "" if len(ms) == 1 else f" (machine {ms.index(m) + 1} of {len(ms)})"
        for j, st in enumerate(m["stages"]):
            err = (f", validation error {100 * st['stage_validation_error']:.2f}%"
                   if "stage_validation_error" in st else
                   f", validation RMSE {st['stage_validation_rmse']:.4g}"
                   if "stage_validation_rmse" in st else "")
            lines.append(("stages" + who + " " if j == 0 else "").ljust(11)
                         + f"{st['rows']:,} rows: {st['route']}, {st['steps']:,} steps, core "
                         f"set {st['core_size']:,}{err}")
    comp = [m.get("compact") for m in ms if isinstance(m.get("compact"), dict)]
    kept = [c for c in comp if c.get("intercept") is not None]
    if kept and all(c.get("shared") for c in kept):
        c = kept[0]
        feats = man["estimator"] == "MMDATransformer"
        what = "features are computed" if feats else "machines predict"
        lines.append(f"compact    the {len(ms)} {what} with one basis of B = {c['B']:,} points "
                     f"instead of "
                     f"{c['support_vectors']:,} support rows "
                     f"('{'features' if feats else 'predict'} --exact': the full expansion)")
    elif kept:
        bs = ", ".join(format(c["B"], ",") for c in kept)
        svs = ", ".join(format(c["support_vectors"], ",") for c in kept)
        lines.append(f"compact    {len(kept)} of {len(ms)} machine(s) predict with B = "
                     f"{bs} basis points instead of {svs} support vectors "
                     f"('predict --exact': the full expansion)")
    elif comp:
        lines.append("compact    none: every machine predicts with its full expansion")
    for c in comp[:1] if len({c.get("decision") for c in comp}) == 1 else comp:
        rows = (f"{c['validation_rows']:,} validation rows" if "validation_rows" in c
                else f"{c['check_rows']:,} training rows checked: {c['rule']}"
                if "check_rows" in c else None)
        if "seconds" in c:      # what the tries cost, against the whole fit
            fit_s = (man.get("training") or {}).get("seconds")
            rows = ((rows + "; ") if rows else "") + f"the tries took {c['seconds']:.1f} s" + (
                f" of the fit's {fit_s:.1f} s" if fit_s else "")
        lines.append(f"           {c.get('decision', '')}" + (f" ({rows})" if rows else ""))
    if ms[0].get("epsilon_bar") is not None and man["estimator"] == "CVMRegressor":
        lines.append(f"tube       half width {ms[0]['epsilon_bar']:.6g}")
    t = ms[0].get("target") if man["estimator"] == "CVMRegressor" else None
    if t:
        lines.append(f"targets    standardised for the fit (mean {t['mean']:.6g}, sd "
                     f"{t['sd']:.6g}); mu_, the tube and predictions are in the targets' units")
    if man.get("scaler"):
        scale = man["params"].get("scale")
        lines.append("scaling    " + (
            "each feature mapped to [-1, 1] from its min and max (svm-scale)"
            if man["scaler"]["centred"] and scale == "range" else
            "standardised features ((x - mean) / sd)" if man["scaler"]["centred"] else
            "x / max |x| per feature (sparse rows: no centring)" if scale else
            "x times a power of two (rows beyond float32's safe range; gamma is for the "
            "scaled rows)"))
    t = man.get("training")
    if t:
        lines.append(f"training   {t['seconds']:.1f} s on {t['rows']:,} rows x "
                     f"{t['features']:,} features, finished {t.get('finished', '?')}")
        lines.append(f"data       {t.get('store') or '(arrays)'}, fingerprint "
                     f"{(t.get('store_fingerprint') or '?')[:32]}")
        r = t.get("resumed_from")
        if r:
            lines.append(f"resumed    from a snapshot: {r['machines_done']} machine(s) done"
                         + (f", {r['n_iter']:,} iterations into the next" if r.get("n_iter")
                            else ""))
    else:
        lines.append("training   not recorded (a model of an older streamcvm)")
    return "\n".join(lines)


def describe_selection(sel):
    """Lines on the hyperparameter search a model records (``selection_``):
    the chosen point, how it was chosen, and the last rung's candidates."""
    if not sel:
        return []
    if isinstance(sel, list):           # a regressor's trials: mu and gamma
        best = min(sel, key=lambda t: t["val_rmse"])
        return [f"search     {len(sel)} (mu, gamma) trials on held-out rows; best validation "
                f"RMSE {best['val_rmse']:.4g} at mu {best['mu']:.4g}, gamma {best['gamma']:.4g}"]
    c = sel["chosen"]
    trials = sel["trials"]
    if sel.get("reason") or not trials:     # no search: too few rows to hold out
        return [f"search     none ({sel.get('reason', 'no candidate tried')}): C "
                f"{c['C']:.4g}, gamma {c['gamma_x']:.4g} / beta ({c['gamma']:.4g})"]
    last = max(t["rung"] for t in trials)
    fin = sorted((t for t in trials if t["rung"] == last), key=lambda t: t["val_loss"])
    won = next(t for t in fin if t["C"] == c["C"] and t["gamma_x"] == c["gamma_x"])
    per = " / ".join(f"{sum(t['rows'] == r for t in trials)} x {r:,}" for r in sel["rungs"])
    out = [f"search     chose C {c['C']:.4g}, gamma {c['gamma_x']:.4g} / beta ({c['gamma']:.4g}) "
           f"on {sel['validation_rows']:,} held-out rows: validation error "
           f"{100 * won['val_loss']:.2f}% (+- {100 * won['val_se']:.2f}); fits: {per} rows",
           "           last rung: " + ", ".join(
               f"C {t['C']:.3g} gamma {t['gamma_x']:.3g} {100 * t['val_loss']:.2f}%"
               + (" (tied)" if t.get("tied") else "") for t in fin[:6])]
    return out


def describe_text(path, fmt):
    """What ``streamcvm info`` says of a text file: what it is, and how to
    make it a store."""
    from ..ingest.cache import cache_path
    from ..ingest.sources import compression_of
    comp = compression_of(path)
    cached = cache_path(path)
    return "\n".join([
        f"text file  {path} ({fmt}{', ' + comp if comp else ''}, "
        f"{_human(os.path.getsize(path))}): data, not a store",
        f"ingest     streamcvm ingest {path} -o STORE.zarr   (then 'streamcvm info "
        f"STORE.zarr')",
        "directly   train, predict and evaluate read it as it is: ingested once with "
        "ingest's defaults into a cache folder",
        f"cached     {cached}" if os.path.isdir(cached) else
        "cached     not yet (no command has read it since it last changed)"])


def model_options(path):
    """The options a model folder was trained with (verified first)."""
    from ..estimators.model import verify_model
    from ..options import Options
    man = verify_model(path)
    return Options.from_dict(man["params"].get("options") or {}), Options


def run(args):
    from ..data import snapshots
    if args.options:
        if args.path is None:
            print(describe_options())
            return 0
        if not os.path.isfile(os.path.join(args.path, "model.json")):
            raise SystemExit(f"streamcvm info: error: {args.path}: --options takes a model "
                             f"folder (or nothing: the defaults)")
        values, kind = model_options(args.path)
        print(describe_options(values, kind))
        return 0
    if args.path is None:
        raise SystemExit("streamcvm info: error: give a store, a model, a checkpoint folder "
                         "or a text file (or --options)")
    if snapshots.is_checkpoint_dir(args.path):
        print("\n".join(snapshots.info(args.path)))
        return 0
    if os.path.isfile(os.path.join(args.path, "model.json")):
        print(describe_model(args.path))
        return 0
    if os.path.isfile(args.path):
        with open(args.path, "rb") as f:
            hdf5 = f.read(4) == b"\x89HDF"
        from ..ingest.cache import text_format
        fmt = None if hdf5 else text_format(args.path)
        if fmt is not None:
            print(describe_text(args.path, fmt))
            return 0
        if not hdf5:
            from .common import neither
            raise neither(args.path)
    print(describe_store(args.path))
    return 0


def describe_options(values=None, kind=None, title="options"):
    """The text ``streamcvm info --options`` prints: every setting of the
    solvers and samplers (and of surfaces), section by section, with its
    value (``values``: a model's; default the defaults), default, unit and
    what it trades."""
    import dataclasses
    import textwrap

    from .. import options as O
    out = []
    kinds = [O.Options, O.SurfaceOptions] if kind is None else [kind]
    for k in kinds:
        current = values if values is not None and isinstance(values, k) else k()
        sections = [c for c in reversed(k.__mro__) if dataclasses.is_dataclass(c)
                    and c is not k and c.__dict__.get("__dataclass_fields__")] or [k]
        out.append(f"{k.__name__} ({k.__module__}.{k.__name__}: the estimators' options=, "
                   f"the command line's --option NAME=VALUE)" if k is O.Options else
                   f"{k.__name__} (streamcvm.surface's options=, streamcvm surface --option)")
        fields = {f.name: f for f in dataclasses.fields(k)}
        seen = set()
        for sec in sections:
            names = [f for f in sec.__dataclass_fields__ if f not in seen]
            if not names:
                continue
            seen.update(names)
            doc = (sec.__doc__ or "").strip().splitlines()[0] if sec is not k else ""
            if doc:
                out.append(f"  {doc}")
            for n in names:
                f = fields[n]
                v = getattr(current, n)
                shown = f"{_value(v)}" + ("" if v == f.default else
                                          f"   (default {_value(f.default)})")
                out.append(f"    {n} = {shown}  [{f.metadata['unit']}]")
                out += textwrap.wrap(f.metadata["doc"], 88, initial_indent="        ",
                                     subsequent_indent="        ")
        out.append("")
    return "\n".join(out).rstrip()


def _value(v):
    if isinstance(v, tuple):
        return ",".join(_value(x) for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10000:
        return f"{v:_}"
    return str(v)
