"""`saliency batch`: a heatmap for every image in a folder, resumable, with a record of the run.

The output folder holds one PNG per image and `batch.json`: the options of the run, its state
("running", "complete" or "interrupted"), how many maps were written and which images failed
with what error. Every file appears whole (written beside its name, then renamed), so a run
stopped at any point leaves only complete maps; `--resume` skips the images whose map exists,
after checking that the record's options are the ones given.
"""
import json
from collections import Counter
from pathlib import Path

from saliency._write import write_text

from .mapping import IMAGE_SUFFIXES, MapError, render_one

RECORD = "batch.json"
SHOWN_FAILURES = 10


def batch_files(folder):
    """The image files (by suffix) directly inside `folder`, sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MapError(f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise MapError(f"{folder} holds no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return files


def output_names(files, method):
    """{file: PNG name}: STEM_METHOD.png, or STEM.EXT_METHOD.png for files whose stems are shared
    (x.png and x.jpg). No two images write the same map, even on a file system that ignores case:
    a name still taken (x.png beside x.jpg and x.png.png) gets _2, _3, ... before _METHOD."""
    stems = Counter(p.stem.lower() for p in files)
    names, used = {}, set()
    for p in files:
        base = p.stem if stems[p.stem.lower()] == 1 else p.name
        name, k = f"{base}_{method}.png", 1
        while name.lower() in used:
            k += 1
            name = f"{base}_{k}_{method}.png"
        used.add(name.lower())
        names[p] = name
    return names


def prepare_output(out, options, resume):
    """Create the output folder if needed; with `resume`, check the record of the earlier run."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise MapError(f"--out {out} is a file; batch writes one PNG per image into a folder (created if missing)")
    record = out / RECORD
    if resume:
        if not record.is_file():
            raise MapError(f"--resume: {out} holds no {RECORD} from an earlier run; run without --resume")
        try:
            earlier = json.loads(record.read_text(encoding="utf-8"))["options"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MapError(f"--resume: cannot read {record} ({exc}); run without --resume") from None
        changed = [f"--{k.replace('_', '-')} {earlier.get(k)!r} then, {v!r} now" for k, v in options.items() if earlier.get(k) != v]
        if changed:
            raise MapError(f"--resume: the maps in {out} were made with other options ({'; '.join(changed)}); "
                           f"give the same options, or run without --resume to overwrite them")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MapError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
    return out


class Run:
    """One batch run: which files are done, written, skipped or failed; kept in OUT/batch.json."""

    def __init__(self, files, out, options, method):
        self.files, self.out, self.options = files, Path(out), options
        self.names = output_names(files, method)
        self.written, self.skipped, self.failed = [], [], []
        self.state = "running"

    def target(self, path):
        return self.out / self.names[path]

    def save_record(self):
        record = {"options": self.options, "state": self.state, "images": len(self.files),
                  "written": len(self.written), "already_there": len(self.skipped),
                  "failed": [{"file": str(p), "error": e} for p, e in self.failed]}
        write_text(self.out / RECORD, json.dumps(record, indent=2) + "\n")

    def summary(self):
        """The lines that end a run: counts, then up to SHOWN_FAILURES failures."""
        done = len(self.written) + len(self.skipped)
        lines = []
        if self.state == "interrupted":
            lines.append(f"interrupted: {done} of {len(self.files)} maps are in {self.out}, each complete; "
                         f"run the same command with --resume to continue")
        else:
            kept = f" ({len(self.skipped)} already there)" if self.skipped else ""
            lines.append(f"wrote {len(self.written)} of {len(self.files)} maps to {self.out}{kept}")
        if self.failed:
            lines.append(f"{len(self.failed)} image{'s' if len(self.failed) > 1 else ''} failed (listed in "
                         f"{self.out / RECORD}):")
            lines += [f"  {p.name}: {e}" for p, e in self.failed[:SHOWN_FAILURES]]
            if len(self.failed) > SHOWN_FAILURES:
                lines.append(f"  ... and {len(self.failed) - SHOWN_FAILURES} more")
        return lines


def _stamp(path):
    """(size, mtime) of a file, or None when there is none: tells whether a map was written."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def run_batch(run, net, method, seed, sign, reduce, overlay, layer, resume=False, progress=iter):
    """Maps for every file of `run` not already done (with `resume`); a file that fails is recorded
    and the rest still run. Ctrl-C stops after the current file is written or abandoned; the record
    then says "interrupted" and KeyboardInterrupt propagates. `progress` wraps the file list."""
    run.save_record()
    target = before = None
    try:
        for path in progress(run.files):
            target = run.target(path)
            if resume and target.is_file():
                run.skipped.append(target)
                continue
            before = _stamp(target)
            try:
                render_one(net, path, method, seed, sign, reduce, overlay, target, layer)
            except Exception as exc:        # noqa: BLE001: any image may fail; the run goes on and says why
                user = isinstance(exc, (ValueError, OSError))
                run.failed.append((path, str(exc) if user else f"{type(exc).__name__}: {exc}"))
                continue
            run.written.append(target)
    except KeyboardInterrupt:
        # stopped between the map's rename into place and its count: it is complete, count it
        if target is not None and target not in run.written and _stamp(target) not in (None, before):
            run.written.append(target)
        run.state = "interrupted"
        run.save_record()
        raise
    run.state = "complete"
    run.save_record()
    return run
