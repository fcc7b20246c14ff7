"""bilm-tf's training softmax: a sampled softmax over a log-uniform (Zipfian) candidate sampler, exact at evaluation.

Jean et al. (2015), §3, as bilm-tf's TensorFlow ``tf.nn.sampled_softmax_loss`` (``bilm/training.py``,
``remove_accidental_hits=True``, ``log_uniform_candidate_sampler(unique=True)``, :data:`BILM_TF_SAMPLES` candidates).
Per batch and direction, as in bilm-tf, with torch's global generator:

1. **Candidates.** ``S`` distinct word ids drawn with replacement from ``P(k) = (log(k + 2) - log(k + 1)) / log(V + 1)``
   (:func:`log_uniform_probabilities`; ids in descending frequency order, as :class:`elmo.data.vocab.Vocabulary`
   gives them) until ``S`` distinct ids have come up; ``tries`` counts the draws.
2. **Expected counts.** ``1 - (1 - P(k))^tries`` (TensorFlow's ``RangeSampler``; ``P(k) · tries`` if no draw repeated).
3. **Logits.** For every predicted position, the true word's and the ``S`` candidates' ``h · W_k + b_k``, each minus
   the log of its expected count; a candidate equal to the true word (an *accidental hit*) gets the lowest float.
4. **Loss.** Cross-entropy with the true word at index 0 of ``[true; candidates]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ElmoError

#: bilm-tf's ``n_negative_samples_batch`` (its ``train_elmo.py``): candidates per batch and direction
BILM_TF_SAMPLES = 8192


def log_uniform_probabilities(vocab_size: int, device: torch.device | None = None) -> torch.Tensor:
    """Step 1's ``P(k)`` (TensorFlow's ``LogUniformSampler``) for ``k`` in ``[0, V)``, float64 ``(V,)`` summing to 1."""
    k = torch.arange(vocab_size, dtype=torch.float64, device=device)
    return (torch.log1p(1.0 / (k + 1.0))) / math.log(vocab_size + 1.0)


def log_uniform_candidates(vocab_size: int, samples: int, device: torch.device | None = None,
                           generator: torch.Generator | None = None) -> tuple[torch.Tensor, int]:
    """``samples`` (S) distinct ids of ``[0, vocab_size)`` drawn log-uniformly (step 1 of the module docstring) with
    ``generator`` (``None``: torch's global one): ``(candidates (S,) int64 in first-drawn order, tries)``, ``tries``
    the draws it took (>= S). Raises ElmoError unless ``1 <= samples <= vocab_size``.
    """
    if not 1 <= samples <= vocab_size:
        raise ElmoError(f"sampled softmax: samples must be in [1, vocabulary size {vocab_size}], got {samples}",
                        field="softmax_samples")
    log_range = math.log(vocab_size + 1.0)
    drawn = torch.empty(0, dtype=torch.int64, device=device)
    size = 2 * samples
    while True:
        u = torch.rand(size, dtype=torch.float64, device=device, generator=generator)
        more = (torch.exp(u * log_range).long() - 1).clamp_(0, vocab_size - 1)  # TensorFlow's inverse CDF
        drawn = torch.cat([drawn, more])
        unique, inverse = torch.unique(drawn, return_inverse=True)
        if len(unique) >= samples:
            break
        size *= 2
    positions = torch.arange(len(drawn), device=drawn.device)
    first = torch.full((len(unique),), len(drawn), dtype=torch.int64, device=drawn.device)
    first = first.scatter_reduce(0, inverse, positions, reduce="amin").sort().values[:samples]
    return drawn[first], int(first[-1]) + 1


def expected_counts(probabilities: torch.Tensor, tries: int, samples: int) -> torch.Tensor:
    """Expected number of times each id comes up in ``tries`` draws (step 2): ``P · tries`` when no draw repeated
    (``tries == samples``), else ``1 - (1 - P)^tries``; float64, shaped like ``probabilities``."""
    if tries == samples:
        return probabilities * tries
    return -torch.expm1(tries * torch.log1p(-probabilities))


class SampledSoftmax(nn.Module):
    """bilm-tf's softmax layer ``softmax/W (V, D)``, ``softmax/b (V,)`` (``input_dim`` D: the LSTM output width,
    ``projection_dim``; ``vocab_size`` V), initialised as bilm-tf's (``W ~ N(0, 1/D)``, ``b = 0``) and trained by
    sampling (module docstring) ``samples`` S candidates per call (bilm-tf's :data:`BILM_TF_SAMPLES`), clipped to V;
    ElmoError when below 1."""

    def __init__(self, input_dim: int, vocab_size: int, samples: int = BILM_TF_SAMPLES):
        super().__init__()
        if samples < 1:
            raise ElmoError(f"sampled softmax: samples must be >= 1, got {samples}", field="softmax_samples")
        self.vocab_size, self.samples = vocab_size, min(samples, vocab_size)
        self.weight = nn.Parameter(torch.randn(vocab_size, input_dim) / math.sqrt(input_dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.register_buffer("probabilities", log_uniform_probabilities(vocab_size), persistent=False)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits ``(n, V)`` float32 of ``hidden (n, D)``."""
        return F.linear(hidden, self.weight, self.bias).float()

    def log_prob(self, hidden: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities ``(n, V)`` float32 over the whole vocabulary."""
        return torch.log_softmax(self.logits(hidden), dim=-1)

    def sampled_logits(self, hidden: torch.Tensor, targets: torch.Tensor,
                       generator: torch.Generator | None = None) -> torch.Tensor:
        """The corrected logits ``(n, 1 + S)`` float32 of step 3: column 0 the true word's, then the candidates'
        (accidental hits at the lowest float)."""
        candidates, tries = log_uniform_candidates(self.vocab_size, self.samples, hidden.device, generator)
        counts = expected_counts(self.probabilities.to(hidden.device), tries, self.samples)
        log_q = torch.log(counts).float()
        # index_select, not indexing: the repeated targets' gradients add up in a fixed order with any threads
        rows, bias = self.weight.index_select(0, targets), self.bias.index_select(0, targets)
        true = (hidden.float() * rows.float()).sum(-1) + bias.float() - log_q[targets]
        sampled = F.linear(hidden, self.weight[candidates], self.bias[candidates]).float() - log_q[candidates]
        sampled = sampled.masked_fill(targets.unsqueeze(1) == candidates.unsqueeze(0), torch.finfo(sampled.dtype).min)
        return torch.cat([true.unsqueeze(1), sampled], dim=1)

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean loss over the ``n`` positions of ``hidden (n, D)`` with ``targets (n,)`` int64 word ids in ``[0, V)``,
        nats: the sampled softmax's in training mode, the exact full-vocabulary negative log-likelihood in eval mode."""
        if not self.training:
            return F.cross_entropy(self.logits(hidden), targets)
        logits = self.sampled_logits(hidden, targets)
        return F.cross_entropy(logits, logits.new_zeros(len(targets), dtype=torch.int64))
