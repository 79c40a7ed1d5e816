"""Seed 001: hierarchical classification, the second BERT pass reuses the first pass's inputs, modified in place.

``context[:, -3:] = extra`` overwrites token ids the first pass's embedding saved for backward.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TinyBert(nn.Module):
    def __init__(self, vocab=30, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layer = nn.TransformerEncoderLayer(hidden, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, ids, attention_mask):
        h = self.layer(self.embed(ids) * attention_mask.unsqueeze(-1))  # gg: saved
        return h, h[:, 0]


class Hierarchical(nn.Module):
    def __init__(self, n_a=5, n_b=7, hidden=16):
        super().__init__()
        self.bert = TinyBert(hidden=hidden)
        self.fc1 = nn.Linear(hidden, n_a)
        self.fc2 = nn.Linear(hidden, n_b)

    def forward(self, x, label_a_emb):
        context = x[0]
        mask = x[2]
        d1 = self.bert(context, attention_mask=mask)
        logit1 = self.fc1(d1[1])
        idx = torch.max(logit1.data, 1)[1]
        extra = label_a_emb[idx]
        context[:, -3:] = extra
        mask[:, -3:] = 1  # gg: culprit
        d2 = self.bert(context, attention_mask=mask)
        logit2 = self.fc2(d2[1])
        return logit1, logit2


model = Hierarchical()
ids = torch.randint(0, 30, (4, 10))
mask = torch.ones(4, 10)
mask[:, -2:] = 0
label_a_emb = torch.randint(0, 30, (5, 3))
logit1, logit2 = model((ids, None, mask), label_a_emb)
loss = logit1.sum() + logit2.sum()
loss.backward()
