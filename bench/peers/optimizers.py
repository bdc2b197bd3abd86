"""optimizers.py: each seed network's SGD settings (lr, momentum, weight_decay, clip_norm), as
plugins/networks_paper/plugin.cpp sets them and `dlhost networks` lists them; shared by the peers
so that every tool trains with the same optimizer."""
OPTIMIZERS = {
    "fcn5": (0.01, 0, 0, 0), "fcn8": (0.01, 0, 0, 0), "fcnr": (0.05, 0.9, 0, 0),
    "alexnet": (0.01, 0, 0, 0), "resnet50": (0.01, 0, 0, 0),
    "lstm32": (1.0, 0, 0, 5.0), "lstm64": (1.0, 0, 0, 5.0), "lstm_ptb": (1.0, 0, 0, 5.0),
    "alexnet_r": (0.01, 0.9, 0, 0), "resnet56": (0.01, 0.9, 1e-4, 0),
    "lenet": (0.01, 0.9, 5e-4, 0), "autoencoder": (0.01, 0.9, 5e-4, 0),
}
