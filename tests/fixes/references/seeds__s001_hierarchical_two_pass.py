# torch: clean (reference for tests/fixtures/seeds/s001_hierarchical_two_pass.py, fixed by hand: the second pass
# edits copies of the ids and the mask; the run under allow_mutation_on_saved_tensors() gives the embedding another
# gradient than this program, so it cannot be the reference)
import torch
import torch.nn as nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pool = nn.Linear(dim, dim)

    def forward(self, ids, attention_mask):
        h = self.emb(ids) * attention_mask.unsqueeze(-1)
        return torch.tanh(self.pool(h.mean(1)))


class Hierarchical(nn.Module):
    def __init__(self, vocab=30, dim=8, n_a=4, n_b=5):
        super().__init__()
        self.bert = Encoder(vocab, dim)
        self.fc1 = nn.Linear(dim, n_a)
        self.fc2 = nn.Linear(dim, n_b)

    def forward(self, x, label_a_ids):
        context = x[0]
        mask = x[2]
        d1 = self.bert(context, attention_mask=mask)
        logit1 = self.fc1(d1)
        idx = torch.max(logit1.data, 1)[1]
        extra = label_a_ids[idx]
        context = context.clone()
        context[:, -3:] = extra
        mask = mask.clone()
        mask[:, -3:] = 1
        d2 = self.bert(context, attention_mask=mask)
        logit2 = self.fc2(d2)
        return logit1, logit2


model = Hierarchical()
ids = torch.randint(0, 30, (2, 7))
seg = torch.zeros(2, 7, dtype=torch.long)
mask = torch.ones(2, 7)
mask[:, -3:] = 0
label_a_ids = torch.randint(0, 30, (4, 3))
logit1, logit2 = model((ids, seg, mask), label_a_ids)
(logit1.logsumexp(1) + logit2.logsumexp(1)).mean().backward()
