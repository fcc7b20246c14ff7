"""Training the AG News classifier on frozen ELMo features (what ``python classification.py`` runs).

For each layer mix in turn (``--mixes``, :mod:`elmo.model.mix`) an :class:`~elmo.model.classifier.ElmoClassifier`
is trained by :func:`elmo.pipelines.task.train_and_evaluate`, the recipe ``baselines.py`` also applies. Writes the
files ``docs/artifacts.md`` lists for ``classification.py`` (``models/classifier.pt``: the mix best on validation).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..artifacts import environment_info, save_checkpoint
from ..data.agnews import CLASS_NAMES
from ..errors import ElmoError
from ..inference.layer_cache import CACHE_MODES, cache_dtype, compute_layers, should_cache
from ..model.classifier import ClassifierConfig, ElmoClassifier, classifier_checkpoint, published_record
from ..model.lstm import lstm_compute_dtypes, summary_dtype
from ..model.mix import LAYER_MIXES, LEARNED_FUNCTIONS, mix_summary
from ..runtime import distributed
from ..runtime.device import set_seed
from .common import (
    at_least,
    checkpointing,
    command_line,
    format_results_table,
    option,
    phase,
    refuse_overwriting,
    write_results,
)
from .plots import plot_curves
from .task import HeadArgs, TaskData, prepare, report_test, train_and_evaluate


@dataclass
class ClassifyArgs(HeadArgs):
    """Flags of ``classification.py`` (``python -m elmo classify``), whose output ``python -m elmo predict`` uses. What
    each does: ``docs/commands.md``; the mixes :mod:`elmo.model.mix`, ``--mix-l2`` after §3.3 and §5.2,
    ``--unfreeze-bilm`` :func:`~elmo.pipelines.task.fine_tuning`, ``--cache-layers``
    :func:`~elmo.inference.layer_cache.should_cache`."""

    mixes: tuple[str, ...] = option(LAYER_MIXES, "layer mixes to train, in turn", choices=LAYER_MIXES, metavar="MIX")
    learned_function: str = option("gate", "the learned_function mix's network", choices=LEARNED_FUNCTIONS)
    elmo_dropout: float = option(0.0, "dropout on the ELMo vector itself")
    mix_l2: float = option(0.0, "L2 penalty on the scalar-mix weights")
    unfreeze_bilm: bool = option(False, "train the biLM with the classifier")
    lr_decay: float = option(2.6, "--unfreeze-bilm: lr ratio between biLM layers")
    options_file: str | None = option(None, "a published ELMo's options.json instead")
    weight_file: str | None = option(None, "its weights.hdf5 (with --options-file)")
    cache_layers: str = option("auto", "compute the frozen biLM's layers once", choices=CACHE_MODES)

    def check(self) -> None:
        super().check()
        if not self.mixes:
            raise ElmoError("--mixes needs at least one layer mix")
        at_least(self, 1, "lr_decay")
        if (self.options_file is None) != (self.weight_file is None):
            raise ElmoError("give both --options-file and --weight-file (the published ELMo's two files)")
        self.classifier_config(self.mixes[0])

    def classifier_config(self, mix: str) -> ClassifierConfig:
        """The :class:`~elmo.model.classifier.ClassifierConfig` of the layer mix ``mix``: the head's sizes plus the ELMo
        options. Raises :class:`ElmoError` on a bad size, an unknown mix or a value out of range, naming the field."""
        return ClassifierConfig(mix=mix, layer_norm=self.layer_norm, elmo_dropout=self.elmo_dropout, mix_l2=self.mix_l2,
                                unfreeze_bilm=self.unfreeze_bilm, learned_function=self.learned_function,
                                **self.head_sizes())


def attach_layer_cache(task: TaskData, mode: str) -> float | None:
    """Apply ``--cache-layers`` ``mode``: attach the frozen biLM's LSTM layers of every split to ``task.data``
    (:func:`elmo.inference.layer_cache.compute_layers`); returns the seconds spent, or ``None`` when not caching."""
    run = task.run
    num_tokens = sum(d.num_tokens for d in task.data.values())
    kind, why = should_cache(mode, task.bilm, num_tokens, cache_dtype(run.amp_dtype), device=run.device)
    run.say(why)
    if kind is None:
        return None
    started = time.perf_counter()
    for corpus in task.data.values():
        corpus.attach_layers(compute_layers(task.bilm, corpus, run.device, run.amp_dtype, kind))
    seconds = time.perf_counter() - started
    run.say(f"biLM layers of {num_tokens:,} tokens computed in {seconds:.0f} s")
    return seconds


def train_mix(task: TaskData, config: ClassifyArgs, mix: str) -> tuple[dict, ElmoClassifier]:
    """Train and evaluate the ELMo classifier of one layer ``mix``; returns its results entry (with the mix's λ and γ)
    and the trained model."""
    checkpoint = checkpointing(config, f"classifier_{mix}", bilm=task.fingerprint)
    head = config.classifier_config(mix)
    set_seed(config.seed)
    # An unfrozen biLM trains in place: give each mix its own copy of the pre-trained one.
    bilm = copy.deepcopy(task.bilm) if config.unfreeze_bilm else task.bilm
    model = task.to_device(ElmoClassifier(bilm, head, vocab_size=len(task.vocab)))
    if task.run.ctx.rank:  # one dropout stream per rank (DDP gives every rank rank 0's initial weights)
        torch.manual_seed(config.seed + task.run.ctx.rank)
    entry = train_and_evaluate(model, task.data, config, task.run, checkpoint)
    entry.update(mix_summary(model.mix))
    return entry, model


def classify(config: ClassifyArgs) -> dict:
    """Train and evaluate one classifier per layer mix; returns the ``classification.json`` content. Raises
    :class:`ElmoError` on missing biLM files (run ``python ELMO.py`` first), bad data or flags, or an output (the
    classifiers, their checkpoints, ``classification.json``, the plots) that is an input (the biLM's files, AG News),
    naming both before anything is written."""
    files = config.outputs
    published = None if config.options_file is None else (config.options_file, config.weight_file)  # else bilstm.pt
    written = [files.classifier(), files.result("classification"), files.image("classifier_val_f1")]
    for mix in config.mixes:
        written += [files.classifier(mix), files.checkpoint(f"classifier_{mix}"), files.image(f"confusion_{mix}")]
    refuse_overwriting(config, {"--options-file": config.options_file, "--weight-file": config.weight_file,
                                "--models-dir (bilstm.pt)": None if published else files.bilm}, written)
    phases: dict[str, Any] = {}
    with phase(phases, "data"):  # the biLM and the splits, read and encoded (Word2Vec's x_k included)
        task = prepare(config, published)
    run, outputs = task.run, task.run.outputs
    with phase(phases, "layer_cache"):
        cache_seconds = None if config.unfreeze_bilm else attach_layer_cache(task, config.cache_layers)
    out: dict[str, Any] = {}
    payloads: dict[str, dict[str, Any]] = {}  # checkpoint contents per mix; the best is also classifier.pt
    for mix in config.mixes:
        with phase(phases, "training"):  # and each split's metrics after it
            out[mix], model = train_mix(task, config, mix)
        if run.ctx.is_main:
            with phase(phases, "saving"):  # the model card's facts (elmo.model.hub): data, scores, command
                card = {"text": f"AG News ({Path(config.data_dir) / 'train.csv'}), {len(task.corpora['train']):,} "
                                "labelled training documents", "command": command_line("classify", config),
                        "accuracy": {k: {"accuracy": out[mix][k]["accuracy"], "macro_f1": out[mix][k]["f1"]}
                                     for k in ("val", "test")}}
                payloads[mix] = classifier_checkpoint(model, task.fingerprint, CLASS_NAMES, {
                    "mix_results": {k: out[mix][k]["f1"] for k in ("val", "test")}, "card": card,
                    **published_record(task.bilm, task.vocab)})
                save_checkpoint(payloads[mix], outputs.classifier(mix))
            with phase(phases, "plots"):  # and the printed result
                report_test(run, mix, out[mix])
    if run.ctx.is_main:  # the others wait for rank 0's files below, so the job ends as one
        out["best_mix"] = best = max(config.mixes, key=lambda m: out[m]["val"]["f1"])
        table = format_results_table(out, config.mixes) + f"\nbest on validation: {best}"
        out["precision"], out["layer_cache_seconds"] = run.precision, cache_seconds
        out["lstm_dtype"] = {"bilm": summary_dtype(lstm_compute_dtypes(task.bilm)),  # the layer cache's (or training's)
                             **{mix: out[mix]["history"][-1].get("lstm_dtype") if out[mix]["history"] else None
                                for mix in config.mixes}}
        out["labelled_documents"] = len(task.corpora["train"])
        with phase(phases, "saving"):
            save_checkpoint(payloads[best], outputs.classifier())
        with phase(phases, "plots"):
            plot_curves({m: [row["val_f1"] for row in out[m]["history"]] for m in config.mixes},
                        outputs.image("classifier_val_f1"), "Classifier validation macro-F1", "macro-F1")
        out["phase_seconds"] = phases["phase_seconds"]
        write_results(config, "classification", out, {**environment_info(config.seed), "bilm_fingerprint": task.fingerprint},
                      [f"classifier_{m}" for m in config.mixes], table, run.say)
    distributed.barrier()
    return out
