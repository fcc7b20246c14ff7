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
