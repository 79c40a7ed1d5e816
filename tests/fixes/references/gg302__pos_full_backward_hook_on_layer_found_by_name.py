# torch: clean (reference for tests/fixtures/gg302/pos_full_backward_hook_on_layer_found_by_name.py, fixed by hand)
# The ReLU after the hooked convolution is out of place: nothing writes into BackwardHookFunction's views.
# A class-activation-map extractor finds its target layer by name in `dict(model.named_modules())` and registers
# a full backward hook on it. The hooked convolution's output comes back through BackwardHookFunction (a view
# made inside a custom Function), and the next layer, ReLU(inplace=True), writes into it.
import torch
from torch import nn

torch.manual_seed(0)


class LayerCam:
    def __init__(self, model, target_layer):
        self.model = model
        self.activations, self.gradients = None, None
        layer = dict(model.named_modules())[target_layer]
        self.handles = [layer.register_forward_hook(self._keep_activation),
                        layer.register_full_backward_hook(self._keep_gradient)]

    def _keep_activation(self, module, inputs, output):
        self.activations = output.detach()

    def _keep_gradient(self, module, grad_input, grad_output):
        self.gradients = grad_output[0].detach()

    def __call__(self, class_idx, scores):
        self.model.zero_grad()
        scores[:, class_idx].sum().backward()
        weights = self.gradients.mean(dim=(2, 3), keepdim=True)
        return torch.relu((weights * self.activations).sum(1))


net = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1),
    nn.ReLU(),
    nn.Conv2d(8, 8, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(8, 5),
)
cam = LayerCam(net, "2")
scores = net(torch.rand(1, 3, 16, 16))
heatmap = cam(scores.argmax().item(), scores)
print(heatmap.shape)
