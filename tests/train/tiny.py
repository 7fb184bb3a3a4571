"""A tiny deterministic language-model setup shared by the training tests and the DDP worker."""

import torch

from common.data.documents import Document
from common.data.tokenizer import token_stream, train_tokenizer
from common.models import build_model


def tiny_setup():
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "seven", "bold", "geese",
             "sing", "loudly"]
    g = torch.Generator().manual_seed(0)
    docs = [Document(str(i), " ".join(words[int(j)] for j in torch.randint(0, len(words), (120,), generator=g)))
            for i in range(30)]
    tokenizer = train_tokenizer((d.text for d in docs), 320)
    tokens = token_stream(tokenizer, docs)
    return tokenizer, tokens, build_model("smoke", tokenizer, seed=0)
