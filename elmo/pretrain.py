"""Pre-training the biLM on AG News descriptions (what ``python ELMO.py`` runs).

Steps: read and split the data → build the vocabulary on the training split → initialise both LMs'
token embeddings from Word2Vec trained on the same text (``--init-embeddings word2vec``, the default;
``none`` keeps them random) → train the forward LM, then the backward LM, with :func:`elmo.train.fit` (early stopping on validation perplexity) →
exact full-vocabulary evaluation on validation and test → write ``word2idx.pkl``, ``forward.pt``,
``backward.pt``, ``bilstm.pt``, ``results/lm.json`` and the plots.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from .bilm import TOKEN_ENCODERS, BiLM, BiLMConfig, LanguageModel, lm_checkpoint, save_bilm
from .chars import DEFAULT_FILTERS
from .checkpoint import check_writable, environment_info, save_checkpoint, write_json
from .cli import CommonConfig, checkpointing, option, remove_checkpoints
from .data import Corpus, EncodedCorpus, load_agnews
from .errors import ElmoError
from .metrics import plot_confusion, plot_curves, top_words_confusion, word_prediction_metrics
from .train import (
    TrainConfig,
    cap_kernel_caches,
    configure_threads,
    fit,
    precision_name,
    resolve_device,
    resolve_precision,
    set_seed,
    to_device,
)
from .vocab import Vocabulary


@dataclass
class PretrainConfig(CommonConfig):
    """Flags of ``ELMO.py`` (see ``python ELMO.py --help``)."""

    min_freq: int = option(2, "keep words seen at least this often in training")
    max_vocab: int | None = option(50000, "keep at most this many words (plus 4 specials)")
    embedding_dim: int = option(256, "token embedding width (= --hidden-size)")
    hidden_size: int = option(256, "LSTM state width per direction")
    num_layers: int = option(2, "LSTM layers per direction")
    dropout: float = option(0.2, "dropout in the language models")
    max_tokens: int = option(4096, "token budget per batch (padding included)")
    lr: float = option(2e-3, "Adam learning rate")
    epochs: int = option(4, "maximum epochs per direction")
    init_embeddings: str = option("word2vec", "initial token embeddings of both LMs: word2vec (skip-gram trained "
                                  "on the same training text, scaled to unit std; about 40 s on AG News) or "
                                  "none (random)", choices=("word2vec", "none"))
    token_encoder: str = option("word", "token encoder x_k of both LMs: word (embedding table) or char (the paper's "
                                "character CNN + highway + projection, §3.1: OOV words get their own vectors)",
                                choices=TOKEN_ENCODERS)
    char_filters: tuple[str, ...] = option(tuple(f"{w}:{n}" for w, n in DEFAULT_FILTERS),
                                           "char CNN filters as width:count (the paper: 1:32 2:32 3:64 4:128 5:256 "
                                           "6:512 7:1024)")
    char_dim: int = option(16, "character embedding width (char encoder)")
    num_highway: int = option(1, "highway layers after the char CNN (the paper: 2)")
    max_chars: int = option(20, "characters per token incl. the begin/end-of-word marks (the paper: 50)")
    residual: bool = option(False, "residual connection from the first to the second LSTM layer (§3.1)")
    proj_size: int = option(0, "LSTM projection: --hidden-size cells projected to this width (the paper: 4096 → "
                            "512); then --embedding-dim must equal it. 0 = none")

    def bilm_config(self, vocab_size: int) -> BiLMConfig:
        """The :class:`~elmo.bilm.BiLMConfig` these flags ask for. Raises :class:`ElmoError` on bad sizes."""
        try:
            filters = tuple(tuple(int(v) for v in f.split(":")) for f in self.char_filters)
            if any(len(f) != 2 for f in filters):
                raise ValueError
        except ValueError:
            raise ElmoError(f"--char-filters expects width:count pairs such as 3:64, got {' '.join(self.char_filters)}") from None
        return BiLMConfig(vocab_size=vocab_size, embedding_dim=self.embedding_dim, hidden_size=self.hidden_size,
                          num_layers=self.num_layers, dropout=self.dropout, token_encoder=self.token_encoder,
                          char_dim=self.char_dim, char_filters=filters, num_highway=self.num_highway,
                          max_chars=self.max_chars, residual=self.residual, proj_size=self.proj_size)

    def check(self) -> None:
        super().check()
        self.bilm_config(vocab_size=10)


def encode(corpus, vocab: Vocabulary, max_length: int, max_chars: int | None = None) -> EncodedCorpus:
    """Token ids of a :class:`~elmo.data.Corpus` (labels kept), truncated to ``max_length``; with
    ``max_chars`` (a character biLM, :attr:`BiLMConfig.chars_per_token`) batches also carry ``chars``."""
    encoded = EncodedCorpus((vocab.encode(t) for t in corpus.tokens), corpus.labels, max_length=max_length)
    return encoded.attach_chars(corpus.tokens, max_chars) if max_chars else encoded


def perplexity(lm: LanguageModel, corpus: EncodedCorpus, device: torch.device, max_tokens: int = 8192) -> float:
    """Held-out perplexity exp(mean NLL per predicted word), boundary words included.

    The adaptive softmax defines a normalised distribution over the whole vocabulary, so its loss is
    the exact NLL (equal to :func:`evaluate_words`' full ``log_prob`` figure, tested).
    """
    total, count = 0.0, 0
    lm.eval()
    with torch.no_grad():
        for index in corpus.batches(256, max_tokens):
            batch = to_device(corpus.collate(index), device)
            loss, n = lm(batch["ids"], batch["lengths"], batch.get("chars"))
            total += float(loss) * n
            count += n
    return math.exp(total / count)


def evaluate_words(lm: LanguageModel, corpus: EncodedCorpus, device: torch.device,
                   max_tokens: int = 256) -> tuple[dict, np.ndarray, np.ndarray]:
    """Exact full-softmax evaluation: perplexity and next/previous-word prediction metrics.

    Small batches (``max_tokens`` padded tokens): the ``(n, V)`` log-probabilities of a 2,048-token
    batch pushed ``ELMO.py``'s peak RSS up by 1.4 GB and were slower (AG News test split, V = 24,574:
    39.5 s and +1,360 MB at 2,048 tokens, 17.6 s and +560 MB at 256).

    Returns:
        ``(metrics, targets, top5)``: metrics holds ``perplexity`` and the keys of
        :func:`~elmo.metrics.word_prediction_metrics`; ``targets (n,)`` and ``top5 (n, 5)`` word ids.
    """
    nll, targets, top5 = 0.0, [], []
    lm.eval()
    with torch.no_grad():
        for index in corpus.batches(64, max_tokens):
            batch = to_device(corpus.collate(index), device)
            log_probs, target = lm.log_probs(batch["ids"], batch["lengths"], batch.get("chars"))
            nll -= float(log_probs.gather(1, target.unsqueeze(1)).sum())
            targets.append(target.cpu().numpy())
            top5.append(log_probs.topk(5, dim=1).indices.cpu().numpy())
    targets_np, top5_np = np.concatenate(targets), np.concatenate(top5)
    metrics = {"perplexity": math.exp(nll / len(targets_np)), **word_prediction_metrics(targets_np, top5_np)}
    return metrics, targets_np, top5_np


def init_embeddings(bilm: BiLM, vocab: Vocabulary, sentences, config: PretrainConfig, say=print) -> dict:
    """Apply ``--init-embeddings``: copy Word2Vec vectors into both LMs' input embeddings.

    The vectors (:func:`elmo.static.word2vec_vectors`, width ``embedding_dim``, trained on
    ``sentences``) replace the random rows of every word Word2Vec saw; ``<pad>`` stays zero and
    ``<bos>``/``<eos>``, which never occur in the text, keep their random initialisation. The
    embeddings stay trainable.

    Returns:
        ``{"method": "none"}`` or Word2Vec's settings (see :func:`~elmo.static.word2vec_vectors`).
    """
    if config.init_embeddings == "none":
        return {"method": "none"}
    if bilm.config.token_encoder == "char":
        say("--init-embeddings word2vec does not apply to the character encoder: it starts random")
        return {"method": "none", "reason": "character token encoder"}
    from .static import copy_vectors, word2vec_vectors

    vectors, info = word2vec_vectors(sentences, vocab, dim=config.embedding_dim, seed=config.seed)
    copied = [copy_vectors(lm.embedding, vectors) for lm in (bilm.forward_lm, bilm.backward_lm)][0]
    say(f"initialised the token embeddings from Word2Vec ({copied:,} words, {info['seconds']:.0f} s)")
    return info


def prepare_data(config: PretrainConfig) -> tuple[tuple[Corpus, Corpus, Corpus], Vocabulary, dict[str, EncodedCorpus]]:
    """Read and split AG News, build the vocabulary on the training split and encode every split.

    Returns:
        ``((train, val, test), vocab, {"train", "val", "test": EncodedCorpus})``.

    Raises:
        ElmoError: bad data or flags (see :func:`elmo.data.load_agnews`).
    """
    splits = load_agnews(config.data_dir, config.val_fraction, config.seed, config.max_docs, config.skip_bad_rows)
    vocab = Vocabulary.build(splits[0].tokens, config.min_freq, config.max_vocab)
    chars = config.bilm_config(len(vocab)).chars_per_token
    data = {name: encode(c, vocab, config.max_length, chars) for name, c in zip(("train", "val", "test"), splits)}
    return splits, vocab, data


def pretrain(config: PretrainConfig) -> dict:
    """Run the whole pre-training pipeline; returns the ``lm.json`` content.

    Raises:
        ElmoError: bad data or flags, or an output folder that cannot be written.
    """
    cap_kernel_caches(32)
    set_seed(config.seed)
    threads = configure_threads(config.threads)
    device = resolve_device(config.device)
    amp_dtype = resolve_precision(config.precision, device)
    say = (lambda *a: None) if config.quiet else (lambda *a: print(*a, flush=True))
    models, results, images = Path(config.models_dir), Path(config.results_dir), Path(config.images_dir)

    check_writable(models, results, images)
    (train, val, test), vocab, data = prepare_data(config)
    vocab.save_pickle(models / "word2idx.pkl")
    bilm_config = config.bilm_config(len(vocab))
    oov = {name: vocab.oov_rate(c.tokens) for name, c in (("val", val), ("test", test))}
    say(f"data: {len(train)} train / {len(val)} val / {len(test)} test documents, "
        f"{data['train'].num_tokens:,} training tokens, vocabulary {len(vocab):,} "
        f"(OOV val {oov['val']:.2%}, test {oov['test']:.2%}), device {device}, {threads} threads, "
        f"{precision_name(amp_dtype)} training")

    bilm = BiLM(bilm_config)
    out_init = init_embeddings(bilm, vocab, train.tokens, config, say)
    bilm.to(device)
    train_config = TrainConfig(epochs=config.epochs, lr=config.lr, clip_norm=config.clip_norm, patience=config.patience)
    meta = {**environment_info(config.seed), "config": asdict(config)}
    out = {"precision": precision_name(amp_dtype), "val": {}, "test": {}, "train_tokens": data["train"].num_tokens, "vocab_size": len(vocab),
           "oov_rate": oov, "documents": {k: len(v) for k, v in data.items()}, "directions": {},
           "init_embeddings": out_init}
    started = time.perf_counter()
    for lm in (bilm.forward_lm, bilm.backward_lm):
        torch.manual_seed(config.seed)
        fitted = fit(
            lm,
            batches=lambda epoch: (data["train"].collate(i) for i in data["train"].batches(
                config.batch_size, config.max_tokens, shuffle=True, seed=config.seed + epoch)),
            loss_fn=lambda model, batch: model(batch["ids"], batch["lengths"], batch.get("chars")),
            validate=lambda: {"perplexity": perplexity(lm, data["val"], device)},
            monitor="perplexity", maximize=False, config=train_config, device=device,
            desc=f"{lm.direction} LM", quiet=config.quiet, amp_dtype=amp_dtype,
            checkpoint=checkpointing(config, f"{lm.direction}_lm", vocab=vocab.fingerprint()),
        )
        save_checkpoint(lm_checkpoint(lm, vocab, meta), models / f"{lm.direction}.pt")
        val_metrics, _, _ = evaluate_words(lm, data["val"], device)
        test_metrics, targets, top5 = evaluate_words(lm, data["test"], device)
        key = f"{lm.direction}_perplexity"
        out["val"][key], out["test"][key] = val_metrics["perplexity"], test_metrics["perplexity"]
        out["test"][f"{lm.direction}_words"] = test_metrics
        speeds = [row["units_per_second"] for row in fitted.history]
        out["directions"][lm.direction] = {"best_epoch": fitted.best_epoch, "history": fitted.history,
                                           "tokens_per_second": float(np.median(speeds))}
        top = list(range(4, min(24, len(vocab))))
        plot_confusion(top_words_confusion(targets, top5[:, 0], top), vocab.decode(top), vocab.decode(top) + ["other"],
                       images / f"lm_confusion_{lm.direction}.png",
                       f"{lm.direction} LM on test: 20 most frequent words")
        say(f"{lm.direction} LM: val perplexity {val_metrics['perplexity']:.2f}, test perplexity "
            f"{test_metrics['perplexity']:.2f}, test top-1 {test_metrics['top1_accuracy']:.3f}, "
            f"top-5 {test_metrics['top5_accuracy']:.3f}")
    out["tokens_per_second"] = {d: out["directions"][d]["tokens_per_second"] for d in out["directions"]}
    out["seconds"] = time.perf_counter() - started
    out["config"], out["meta"] = asdict(config), environment_info(config.seed)
    out["bilm_config"] = asdict(bilm_config)
    save_bilm(bilm, vocab, models / "bilstm.pt", meta)
    write_json(results / "lm.json", out)
    plot_curves({f"{d} {k}": [row[col] for row in out["directions"][d]["history"]]
                 for d in out["directions"] for k, col in (("train", "train_loss"),)}
                | {f"{d} val": [math.log(row["val_perplexity"]) for row in out["directions"][d]["history"]]
                   for d in out["directions"]},
                images / "lm_loss.png", "biLM loss per epoch", "NLL (nats per word)")
    remove_checkpoints(config, ["forward_lm", "backward_lm"])
    say("\n" + format_lm_table(out))
    return out


def format_lm_table(out: dict) -> str:
    """A small text table of perplexities and word-prediction accuracy."""
    lines = ["direction   val ppl   test ppl   test top-1   test top-5   tokens/s"]
    for d in ("forward", "backward"):
        if f"{d}_perplexity" in out["val"]:
            w = out["test"][f"{d}_words"]
            lines.append(f"{d:<10}{out['val'][f'{d}_perplexity']:>8.2f}{out['test'][f'{d}_perplexity']:>11.2f}"
                         f"{w['top1_accuracy']:>13.3f}{w['top5_accuracy']:>13.3f}{out['tokens_per_second'][d]:>11,.0f}")
    return "\n".join(lines)
