"""A stand-in tokenizer for benchmarks that build a model without training a tokenizer."""


class SyntheticVocab:
    """The three tokenizer facts ``common.models.build_model`` needs: its length and the BOS/EOS ids."""

    bos_token_id = eos_token_id = 0

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size
