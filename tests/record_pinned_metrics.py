"""Re-record tests/fixtures/pinned_metrics.json: run the pinned pipeline (tests/integration/conftest.py's
``pinned_run``) and write what it gives. Only after a *deliberate* change of behaviour (new defaults), and
say so in the commit; a refactoring must leave the pinned numbers alone.

    python tests/record_pinned_metrics.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "integration"))

from conftest import PINNED_COMMON, PINNED_LM  # noqa: E402
from support import ROOT, run_script, write_tiny_agnews  # noqa: E402

from elmo.model.mix import LAYER_MIXES  # noqa: E402


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="pinned"))
    data, out = write_tiny_agnews(root / "data"), root / "run"
    for script, flags in (("ELMO.py", [*PINNED_COMMON, *PINNED_LM]), ("classification.py", PINNED_COMMON)):
        done = run_script(script, out, data, *flags)
        if done.returncode:
            raise SystemExit(done.stderr)
    lm = json.loads((out / "results" / "lm.json").read_text())
    cls = json.loads((out / "results" / "classification.json").read_text())
    pinned = {"lm": {f"{s}_{d}_perplexity": lm[s][f"{d}_perplexity"] for s in ("val", "test")
                     for d in ("forward", "backward")},
              "classification": {s: {"test_accuracy": cls[s]["test"]["accuracy"], "test_f1": cls[s]["test"]["f1"],
                                     "val_f1": cls[s]["val"]["f1"],
                                     "train_loss": [row["train_loss"] for row in cls[s]["history"]]}
                                 for s in LAYER_MIXES}}
    path = ROOT / "tests" / "fixtures" / "pinned_metrics.json"
    path.write_text(json.dumps(pinned, indent=1) + "\n")
    print(f"wrote {path}:\n{json.dumps(pinned, indent=1)}")


if __name__ == "__main__":
    main()
