"""The vision track: CIFAR-style image classification with residual and plain ResNets."""
