"""Rebuild the study's ``--out-dir`` from the committed per-part files, so that the study resumes from them.

The seeds study, the labelled-data curve and the pre-training-text curve commit each part's JSON and log
(``results/study/``, ``results/learning_curve/``, ``results/pretraining_text_curve/``) but not the models. This
script puts them back where ``python -m lab study`` looks for finished parts, and writes ``parts.json`` from
``results/pretraining_text_curve.json``; a study run on the result then runs only the parts whose file is absent.

A pre-training text whose classifiers are not all finished needs its biLM again, and the biLM is not
committed: for such a text (``--retrain-text``, default ``extra``) ``lm.json`` is left out, so the study trains
its biLM again with the same seed. Run the study at the precision of the committed parts (the study refuses
another, ``--precision``): they were trained in bf16, so on a CPU with native bf16 (AVX512-BF16 or AMX-BF16).

    python results/pretraining_text_curve/restore_out_dir.py runs/study
    python -m lab study --seeds 0 1 2 --pretraining-texts extra --labelled-fractions 0.1 1 \\
        --parts pretrain classify baselines --head-extra "--epochs 5" --out-dir runs/study
    python -m lab study --seeds 0 1 2 --pretraining-texts extra 0.25 0.5 1 --labelled-fractions 0.1 1 \\
        --head-extra "--epochs 5" --out-dir runs/study --aggregate-only --results results/pretraining_text_curve.json
"""

import argparse
import json
import shutil
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1]


def copy_part_files(source: Path, target: Path, skip: tuple[str, ...] = ()) -> int:
    """Copy ``source``'s ``*.json`` to ``target/results/`` and its ``logs/`` to ``target/logs/``; the count copied."""
    copied = 0
    for path in sorted(source.glob("*.json")):
        if path.name not in skip:
            folder = target / ("results_mlp" if path.name.startswith("mlp_") else "results")
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, folder / path.name.removeprefix("mlp_"))
            copied += 1
    if (source / "logs").is_dir():
        shutil.copytree(source / "logs", target / "logs", dirs_exist_ok=True)
    return copied


def restore(out_dir: Path, retrain_texts: tuple[str, ...]) -> int:
    """Rebuild ``out_dir``; the number of part files restored."""
    copied = 0
    for seed_dir in sorted((RESULTS / "study").glob("seed_*")):
        copied += copy_part_files(seed_dir, out_dir / seed_dir.name)
    for share_dir in sorted((RESULTS / "learning_curve").glob("seed_*/labelled_*")):
        copied += copy_part_files(share_dir, out_dir / share_dir.relative_to(RESULTS / "learning_curve"))
    curve = RESULTS / "pretraining_text_curve"
    for seed_dir in sorted(curve.glob("text_*/seed_*")):
        text = seed_dir.parent.name.removeprefix("text_")
        skip = ("lm.json",) if text in retrain_texts else ()
        copied += copy_part_files(seed_dir, out_dir / seed_dir.relative_to(curve), skip)
        for share_dir in sorted(seed_dir.glob("labelled_*")):
            copied += copy_part_files(share_dir, out_dir / share_dir.relative_to(curve))
    parts = json.loads((RESULTS / "pretraining_text_curve.json").read_text())["parts"]
    (out_dir / "parts.json").write_text(json.dumps(parts, indent=2) + "\n")
    return copied


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="the study's --out-dir to rebuild (must not exist yet)")
    parser.add_argument("--retrain-text", nargs="*", default=["extra"],
                        help="pre-training texts whose biLM is trained again (their lm.json is left out)")
    args = parser.parse_args()
    if args.out_dir.exists():
        parser.error(f"{args.out_dir} exists; give a new folder so nothing in it is written over")
    print(f"{restore(args.out_dir, tuple(args.retrain_text))} part files restored under {args.out_dir}")
