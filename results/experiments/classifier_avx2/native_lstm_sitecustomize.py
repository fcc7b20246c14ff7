"""With this file on PYTHONPATH as ``sitecustomize.py`` and ``NATIVE=1``, every fp32 CPU training pass of
``nn.LSTM`` (autograd on, no autocast) runs PyTorch's own kernel instead of oneDNN's; inference is unchanged. It
reaches every process of a run, the side-by-side children included:

    mkdir -p /tmp/site && cp results/experiments/classifier_avx2/native_lstm_sitecustomize.py /tmp/site/sitecustomize.py
    NATIVE=1 PYTHONPATH=/tmp/site python classification.py ...
"""

import os

if os.environ.get("NATIVE") == "1":
    import torch
    from torch import nn

    original = nn.LSTM.forward

    def forward(self, x, *args, **kwargs):
        if torch.is_grad_enabled() and x.is_cpu and x.dtype == torch.float32 and not torch.is_autocast_enabled("cpu"):
            with torch.backends.mkldnn.flags(enabled=False):
                return original(self, x, *args, **kwargs)
        return original(self, x, *args, **kwargs)

    nn.LSTM.forward = forward
