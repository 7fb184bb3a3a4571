"""GPU benchmark (a lent CUDA machine): fake-quant kernels, fake-quant evaluation, W8A8 QAT, side by side in one run.

Parts (CUDA events around each call, warm-ups first, the median of ``--repeats`` calls counts, the minimum is printed
beside it; peak extra memory is the growth of ``torch.cuda.max_memory_allocated`` over the input):

1. quantize-dequantize of an 8192 x 8192 bfloat16 tensor: our MXFP4, NVFP4, NVFP4 4/6, HiF8 per tensor (FP32 scale;
   and the W8A8 kernel ``scaled_qdq``) and brute force (E2M1, UE4M3, blocks of 16), against ``torch.clone`` of the
   same tensor (the memory-bandwidth floor) and torchao's quantize + dequantize on the GPU (``to_mx``/``to_dtype``,
   ``NVFP4Tensor`` eager, and its MSLK triton NVFP4 kernel where installed; "n/a" where torchao lacks one).
2. evaluation of a ~1B-shape Llama (transformers ``LlamaConfig``: hidden 2048, 16 layers, MLP 8192, vocabulary 32000,
   32 heads, 8 KV heads; random weights, bfloat16; ``--batch`` x ``--seq`` tokens): the plain forward vs the forward
   with NVFP4 fake quantization of weights (once, untimed) and of every block Linear's input (each call)
   (``common.quantization.quantize_``).
3. a training step of the same model (forward, backward, AdamW): bfloat16 vs W8A8 HiF8 QAT
   (``common.quantization.prepare(model, "HIF8_W8A8")``: delayed scaling of input, weight and output gradient of every
   block Linear, telemetry on; the bf16 step is the same model with the quantizers switched off).

Targets: MXFP4 and NVFP4 <= 1.0x the fastest torchao kernel; NVFP4 W+A fake-quant forward <= 1.3x the bf16 forward;
W8A8 HiF8 QAT step <= 1.5x the bf16 step. Sized to finish within ~3 minutes on an H200 (not measured yet). Without
CUDA it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import transformers
from _report import finish, target

from common.quantization import prepare, quantize_
from common.quantizers import quantize_tensor, scaled_qdq
from common.recipes import SPECS, get_recipe
from common.scaling import quantize_blocks
from common.train import causal_lm_loss

SHAPE = (8192, 8192)
LLAMA = {"hidden_size": 2048, "num_hidden_layers": 16, "intermediate_size": 8192, "vocab_size": 32000,
         "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 4096}
KERNEL_TARGET, EVAL_TARGET, QAT_TARGET = 1.0, 1.3, 1.5
SLOW_CASES = ("brute_force",)  # a few calls are enough (seconds each)


def _torchao_mx(x: torch.Tensor) -> torch.Tensor:
    from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

    scale, data = to_mx(x, torch.float4_e2m1fn_x2, 32)
    return to_dtype(data, scale, torch.float4_e2m1fn_x2, 32, x.dtype)


def _torchao_nvfp4(x: torch.Tensor, triton: bool = False) -> torch.Tensor:
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    tensor = NVFP4Tensor.to_nvfp4(x, per_tensor_scale=per_tensor_amax_to_scale(x.abs().amax()),
                                  is_swizzled_scales=triton, use_triton_kernel=triton)
    return tensor.dequantize(x.dtype)


def _hif8_scaled(x: torch.Tensor) -> torch.Tensor:
    return scaled_qdq(x, 0.5, "hif8")  # the W8A8 kernel; its scale comes from the host-side observer


KERNELS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "clone": torch.clone,
    "MXFP4": partial(quantize_tensor, spec=SPECS["MXFP4"]),
    "NVFP4": partial(quantize_tensor, spec=SPECS["NVFP4"]),
    "NVFP4_4over6": partial(quantize_tensor, spec=SPECS["NVFP4_4over6"]),
    "hif8_per_tensor": lambda x: quantize_blocks(x, "hif8", "fp32", None),
    "hif8_scaled_qdq": _hif8_scaled,
    "brute_force": lambda x: quantize_blocks(x, "e2m1", "ue4m3", 16, "brute_force"),
    "torchao_MX": _torchao_mx,
    "torchao_NVFP4": _torchao_nvfp4,
    "torchao_NVFP4_triton": lambda x: _torchao_nvfp4(x, triton=True),
}
TORCHAO = {"MXFP4": ("torchao_MX",), "NVFP4": ("torchao_NVFP4", "torchao_NVFP4_triton")}


def cuda_times(fn: Callable[[], object], warmup: int, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` calls, from CUDA events on the current stream
    (host stalls inside a call count: the stream waits for them)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def summary(times: list[float], **extra: Any) -> dict[str, Any]:
    return {"seconds": statistics.median(times), "min_seconds": min(times), "calls": len(times), **extra}


def peak_extra_bytes(fn: Callable[[], object]) -> int:
    """Growth of the CUDA allocator's peak over what is allocated before one call of ``fn``."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def bench_kernels(repeats: int) -> tuple[dict[str, Any], dict[str, str]]:
    """Part 1: ``{case: summary}`` of every kernel that runs, ``{case: reason}`` of those that do not."""
    x = torch.randn(*SHAPE, device="cuda", generator=torch.Generator("cuda").manual_seed(0)).to(torch.bfloat16)
    input_bytes = x.numel() * x.element_size()
    results: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    for name, fn in KERNELS.items():
        try:
            extra = peak_extra_bytes(lambda fn=fn: fn(x))
        except Exception as error:
            if not name.startswith("torchao"):
                raise
            # torchao without this kernel (or without its dependency, MSLK for the triton NVFP4) on this machine
            unavailable[name] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            print(f"{name:24s}      n/a  ({unavailable[name]})", flush=True)
            continue
        slow = name in SLOW_CASES
        times = cuda_times(lambda fn=fn: fn(x), warmup=1 if slow else 3, repeats=3 if slow else repeats)
        entry = results[name] = summary(times, peak_extra_over_input=extra / input_bytes)
        entry["vs_clone"] = entry["seconds"] / results["clone"]["seconds"]  # clone is the first case
        print(f"{name:24s} {entry['seconds'] * 1e3:9.2f} ms (min {entry['min_seconds'] * 1e3:9.2f})  "
              f"{entry['vs_clone']:7.1f}x clone   peak extra {entry['peak_extra_over_input']:5.2f}x input", flush=True)
    return results, unavailable


def build_llama() -> torch.nn.Module:
    """The ~1B-shape Llama of :data:`LLAMA` with seeded random weights, bfloat16, on the GPU."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA))
    return model.to(torch.bfloat16)


def bench_eval(model: torch.nn.Module, tokens: torch.Tensor, repeats: int) -> dict[str, Any]:
    """Part 2: plain vs NVFP4 W+A fake-quant forward, two rounds each (the weights quantized again per round)."""
    model.eval()
    recipe = get_recipe("NVFP4", activations=True)

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=tokens)

    times: dict[str, list[float]] = {"eval_bf16": [], "eval_nvfp4_wa": []}
    for _ in range(2):
        times["eval_bf16"] += cuda_times(forward, warmup=2, repeats=repeats)
        with quantize_(model, recipe):
            times["eval_nvfp4_wa"] += cuda_times(forward, warmup=2, repeats=repeats)
    return {name: summary(t) for name, t in times.items()}


def bench_qat(model: torch.nn.Module, tokens: torch.Tensor, repeats: int) -> dict[str, Any]:
    """Part 3: a forward + backward + AdamW step, quantizers off (bf16) and on (W8A8 HiF8), in alternating rounds."""
    model.train()
    handle = prepare(model, "HIF8_W8A8")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    step = 0

    def train_step() -> None:
        nonlocal step
        handle.step(step)
        step += 1
        causal_lm_loss(model, tokens).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    times: dict[str, list[float]] = {"train_bf16": [], "train_hif8_w8a8": []}
    for round_ in range(2):
        for name in list(times) if round_ == 0 else list(reversed(times)):
            if name == "train_bf16":
                handle.disable()
            else:
                handle.enable(reset=False)
            times[name] += cuda_times(train_step, warmup=2, repeats=repeats)
    results = {name: summary(t) for name, t in times.items()}
    results["train_hif8_w8a8"]["telemetry_rows"] = len(handle.telemetry_rows())
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--json", type=Path, default=Path("bench/out/gpu.json"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/gpu.py needs a CUDA GPU (torch.cuda.is_available() is False): nothing measured")
        return 0
    warnings.filterwarnings("ignore")
    print(f"== kernels: qdq of a {SHAPE[0]} x {SHAPE[1]} bfloat16 tensor", flush=True)
    kernels, unavailable = bench_kernels(args.repeats)
    torch.cuda.empty_cache()  # the input and the kernels' cached blocks: room for the model

    model = build_llama()
    parameters = sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, LLAMA["vocab_size"], (args.batch, args.seq + 1), device="cuda",
                           generator=torch.Generator("cuda").manual_seed(1))
    print(f"== ~1B Llama ({parameters / 1e9:.2f}B parameters, bf16), {args.batch} x {args.seq} tokens", flush=True)
    models = {**bench_eval(model, tokens[:, :-1], args.repeats), **bench_qat(model, tokens, args.repeats)}
    for name, entry in models.items():
        print(f"{name:24s} {entry['seconds'] * 1e3:9.2f} ms (min {entry['min_seconds'] * 1e3:9.2f})", flush=True)

    targets = []
    for ours, theirs in TORCHAO.items():
        available = [name for name in theirs if name in kernels]
        if not available:
            print(f"{ours} / torchao: n/a (no torchao kernel ran: {', '.join(theirs)})")
            continue
        best = min(available, key=lambda name: kernels[name]["seconds"])
        targets.append(target(f"{ours} / {best}", kernels[ours]["seconds"] / kernels[best]["seconds"],
                              KERNEL_TARGET))
    targets.append(target("eval NVFP4 W+A fake quant / bf16",
                          models["eval_nvfp4_wa"]["seconds"] / models["eval_bf16"]["seconds"], EVAL_TARGET))
    targets.append(target("train HiF8 W8A8 QAT / bf16",
                          models["train_hif8_w8a8"]["seconds"] / models["train_bf16"]["seconds"], QAT_TARGET))
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": list(SHAPE),
              "dtype": "bfloat16", "repeats": args.repeats, "kernels": kernels, "unavailable": unavailable,
              "llama": {**LLAMA, "parameters": parameters, "batch": args.batch, "seq_len": args.seq},
              "models": models, "targets": targets}
    finish(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
