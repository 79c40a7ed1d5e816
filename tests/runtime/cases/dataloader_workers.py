"""Multi-process DataLoader workers under the doctor: must still run (and the result must not change)."""
import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        x = torch.full((4,), float(i))
        x.mul_(x)  # an in-place op inside a worker process
        return x, torch.tensor(float(i))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = DataLoader(Squares(), batch_size=8, num_workers=2, shuffle=False)
    total = 0.0
    for x, y in loader:
        loss = (model(x).squeeze(1) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
    print(f"total {total.hex()}")
