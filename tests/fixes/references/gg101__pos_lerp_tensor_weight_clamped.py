# torch: clean (reference for tests/fixtures/gg101/pos_lerp_tensor_weight_clamped.py, fixed by hand)
# The clamp makes a new tensor; lerp's saved weight keeps its values.
# lerp with a tensor weight saves the weight (the gradients of start and end are scaled by it); clamping the
# weight in place afterwards changes what backward would read.
import torch

torch.manual_seed(0)
start = torch.randn(5, requires_grad=True)
end = torch.randn(5, requires_grad=True)
raw = torch.rand(5, requires_grad=True)
blend = raw * 1.0
mixed = torch.lerp(start, end, blend)
blend = blend.clamp(0.1, 0.9)
loss = mixed.sum() + blend.sum()
loss.backward()
print(raw.grad)
