"""Fine-tuning a published (or exported) bilm-tf biLM as a language model on a domain's text (``python -m elmo
finetune``): the loaded :class:`~elmo.model.bilm.BiLM` gets a training softmax
(:meth:`~elmo.model.bilm.BiLM.add_head`) over the domain vocabulary (the published files carry none), initialised by
one of :data:`SOFTMAX_INITS` (docs/fine_tuning.md, "Initialisation"): ``token-layer``
(:func:`init_softmax_from_token_layer`: word ``w``'s row ``alpha · x_w``, ``x_w`` its token-layer vector, its bias
``beta · log p(w)``, the add-one smoothed unigram model, the scales fitted on a sample) or ``random`` (the softmax's own:
bilm-tf's ``W ~ N(0, 1/P)``, ``b = 0``).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from ..data.corpus import EncodedCorpus
from ..data.vocab import BOS_ID, EOS_ID, SPECIALS, Vocabulary
from ..errors import ElmoError
from .bilm import BiLM
from .sampled_softmax import SampledSoftmax

#: ``--softmax-init``'s choices (module docstring)
SOFTMAX_INITS = ("token-layer", "random")
#: training positions per direction the scales ``alpha``, ``beta`` of ``token-layer`` are fitted on
SCALE_FIT_POSITIONS = 256


def language_model_of(bilm: BiLM, seed: int = 0, **head: Any) -> BiLM:
    """``bilm`` (its weights, the biases as read from bilm-tf's file and the files it came from kept; e.g.
    :func:`elmo.model.published_io.load_published_bilm`'s) with the ``random`` training softmax of ``seed``
    (:meth:`~elmo.model.bilm.BiLM.add_head`; ``head``: its fields, ``vocab_size`` the domain
    vocabulary's), its weights made dense for fused Adam (the loader's may be views of transposed arrays)."""
    with torch.no_grad():
        for p in bilm.parameters():
            p.data = p.data.contiguous()
    return bilm.add_head(seed, **head)


def target_counts(documents: Iterable[Sequence[str]], vocab: Vocabulary) -> np.ndarray:
    """How often each vocabulary id is a target of the two directions together over ``documents`` (token lists):
    each word twice (forward and backward; OOV words as ``<unk>``), ``<eos>`` once per document (forward),
    ``<bos>`` once (backward); ``(V,)`` int64."""
    counts = np.zeros(len(vocab), dtype=np.int64)
    docs = 0
    for doc in documents:
        np.add.at(counts, np.asarray(vocab.encode(doc), dtype=np.int64), 2)
        docs += 1
    counts[[BOS_ID, EOS_ID]] += docs
    return counts


def unigram_log_probabilities(counts: np.ndarray) -> torch.Tensor:
    """``log((count + 1) / (total + V))``, float32 ``(V,)``: the add-one smoothed unigram model of the targets."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    return (torch.log1p(counts) - math.log(float(counts.sum()) + len(counts))).float()


@torch.no_grad()
def vocabulary_token_vectors(bilm: BiLM, vocab: Vocabulary) -> torch.Tensor:
    """The token-layer vector ``x_w`` of every vocabulary id, ``(V, P)`` float32 on the biLM's device: the words'
    from their characters (:meth:`~elmo.model.bilm.BiLM.token_vectors`, eval mode), ``<bos>``/``<eos>``
    from bilm-tf's ``<S>``/``</S>`` characters, zero for ``<pad>`` and ``<unk>``."""
    was_training = bilm.training
    bilm.eval()
    words = vocab.itos[len(SPECIALS):]
    vectors = torch.zeros(len(vocab), bilm.config.output_size, device=bilm.boundary_chars.device)
    if words:
        vectors[len(SPECIALS):] = bilm.word_vectors(words).float()
    bounds = bilm.token_vectors(bilm.boundary_chars).float()
    vectors[BOS_ID], vectors[EOS_ID] = bounds[0], bounds[1]
    bilm.train(was_training)
    return vectors


def fit_scales(scores: torch.Tensor, log_prior: torch.Tensor, targets: torch.Tensor) -> tuple[float, float, float, float]:
    """``alpha, beta`` minimising the mean NLL of ``targets (n,)`` under ``softmax(alpha · scores + beta · log_prior)``,
    ``scores (n, V)`` float32 dot products ``h · x_w``, ``log_prior (V,)`` log unigram probabilities. Returns ``(alpha,
    beta, nll, unigram_nll)``: the scales, their mean NLL (nats per word) and that of the start ``alpha = 0, beta = 1``
    (the unigram model), returned instead when the fit is no better.
    """
    scales = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    scores64, prior64 = scores.double(), log_prior.double()

    def nll() -> torch.Tensor:
        logits = scales[0] * scores64 + scales[1] * prior64
        return torch.nn.functional.cross_entropy(logits, targets)

    with torch.no_grad():
        unigram = float(nll())
    optimizer = torch.optim.LBFGS([scales], lr=1.0, max_iter=50, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nll()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        fitted = float(nll())
    if not math.isfinite(fitted) or fitted > unigram:  # never worse than where it started
        return 0.0, 1.0, unigram, unigram
    alpha, beta = (float(v) for v in scales.detach())
    return alpha, beta, fitted, unigram


@torch.no_grad()
def init_softmax_from_token_layer(model: BiLM, vocab: Vocabulary, counts: np.ndarray,
                                  sample: EncodedCorpus) -> dict:
    """The ``token-layer`` initialisation (module docstring) of ``model.softmax``, a
    :class:`~elmo.model.sampled_softmax.SampledSoftmax` (``softmax/W (V, P)``, ``softmax/b (V,)``) over ``vocab``, in
    place, from ``counts (V,)`` (:func:`target_counts`) and ``sample``, a few training documents encoded with bilm-tf
    characters on which ``alpha`` and ``beta`` are fitted. Returns ``{"method", "alpha", "beta", "sample_positions",
    "sample_perplexity", "unigram_sample_perplexity"}``: the scales and the sample's exact perplexity under them and
    under the unigram model. Raises ElmoError when the softmax is not the sampled one (the adaptive softmax has no
    per-word bias) or ``counts`` does not fit the vocabulary."""
    if not isinstance(model.softmax, SampledSoftmax):
        raise ElmoError("FinetuneArgs.softmax_init 'token-layer' sets a full softmax's rows and biases: use "
                        "FinetuneArgs.softmax 'sampled' (the adaptive softmax has no per-word bias), or "
                        "FinetuneArgs.softmax_init 'random'", field="FinetuneArgs.softmax_init")
    if len(counts) != len(vocab):
        raise ElmoError(f"target counts have {len(counts)} entries, the vocabulary {len(vocab)}")
    vectors = vocabulary_token_vectors(model, vocab)
    log_prior = unigram_log_probabilities(counts).to(vectors.device)
    was_training, tops, targets = model.training, [], []
    model.eval()  # no dropout: BiLM.predicted_tops of up to SCALE_FIT_POSITIONS predicted words per direction
    for direction in (0, 1):
        kept = 0
        for _, batch in sample.eval_batches(64, 4096):
            [(top, target)] = model.predicted_tops(*(batch[k].to(vectors.device) for k in ("ids", "lengths", "chars")),
                                                   [direction])
            tops.append(top.float()[:SCALE_FIT_POSITIONS - kept])
            targets.append(target[:SCALE_FIT_POSITIONS - kept])
            kept += len(targets[-1])
            if kept >= SCALE_FIT_POSITIONS:
                break
    model.train(was_training)
    targets = torch.cat(targets)
    with torch.enable_grad():
        alpha, beta, nll, unigram = fit_scales(torch.cat(tops) @ vectors.T, log_prior, targets)
    model.softmax.weight.copy_(alpha * vectors)
    model.softmax.bias.copy_(beta * log_prior)
    return {"method": "token-layer", "alpha": alpha, "beta": beta, "sample_positions": len(targets),
            "sample_perplexity": math.exp(nll), "unigram_sample_perplexity": math.exp(unigram)}
