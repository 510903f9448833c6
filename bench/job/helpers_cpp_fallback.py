"""Pure-Python stand-in for Megatron-LM's compiled dataset helpers.

Megatron-LM compiles megatron/core/datasets/helpers.cpp with make and
pybind11 when training starts. bench/job/run.sh installs this file as
megatron/core/datasets/helpers_cpp.py only when that compilation fails on the
GPU machine (no Python headers, say). It implements build_sample_idx, the one
function GPTDataset (and MockGPTDataset) calls, as helpers.cpp does
(Megatron-LM commit d98e8a6); the other helpers are not needed for GPT mock
data and raise.
"""

import math

import numpy


def _build_sample_idx(dtype, sizes, document_idx, seq_length, num_epochs, tokens_per_epoch,
                      drop_last_partial_sequence=True, add_extra_token_to_sequence=1):
    assert seq_length > 1 and num_epochs > 0 and tokens_per_epoch > 1
    total = num_epochs * tokens_per_epoch - add_extra_token_to_sequence
    if drop_last_partial_sequence:
        num_samples = total // seq_length
    else:
        num_samples = math.ceil(total / seq_length)
    sample_idx = numpy.zeros((num_samples + 1, 2), dtype=dtype)
    doc_i = 0
    offset = 0
    n = 1
    while n <= num_samples:
        remaining = seq_length + add_extra_token_to_sequence
        while remaining != 0:
            length = int(sizes[document_idx[doc_i]]) - offset
            remaining -= length
            if remaining <= 0:
                offset += remaining + length - add_extra_token_to_sequence
                remaining = 0
            else:
                if doc_i == len(document_idx) - 1:
                    assert n == num_samples
                    offset = int(sizes[document_idx[doc_i]]) - add_extra_token_to_sequence
                    break
                doc_i += 1
                offset = 0
        sample_idx[n, 0] = doc_i
        sample_idx[n, 1] = offset
        n += 1
    return sample_idx


def build_sample_idx_int32(*args):
    return _build_sample_idx(numpy.int32, *args)


def build_sample_idx_int64(*args):
    return _build_sample_idx(numpy.int64, *args)


def _missing(*_args, **_kwargs):
    raise NotImplementedError("not in cgtune's pure-Python helpers_cpp stand-in (bench/job)")


build_mapping = build_blocks_mapping = build_blending_indices = build_exhaustive_blending_indices = _missing
