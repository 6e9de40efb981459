"""Which rows of a learned table training reached, from the optimizer state a checkpoint keeps.

fairseq keeps the optimizer's per-parameter state (``last_optimizer_state``) indexed by the
parameters' order; ``optimizer_states`` lines it up with the state dict's keys, and
``trained_positions`` reads a table's rows that got a gradient (a nonzero second moment).
"""

import torch


def _state_shape(entry):
    """The shape of the parameter an optimizer state entry belongs to (its first tensor with
    dimensions), or None."""
    if not isinstance(entry, dict):
        return None
    for value in entry.values():
        if torch.is_tensor(value) and value.dim() > 0:
            return tuple(value.shape)
    return None


def optimizer_states(ckpt: dict):
    """``{state-dict key: optimizer state}`` for the model's parameters, or ``(None, why)``.

    fairseq keeps the optimizer's per-parameter state (``last_optimizer_state``) indexed by the
    parameters' order, which is the state dict's order without its buffers; a buffer is told
    apart by a shape that does not fit the next parameter's state."""
    opt = ckpt.get("last_optimizer_state")
    if not isinstance(opt, dict) or not isinstance(opt.get("state"), dict):
        return None, "the checkpoint keeps no optimizer state"
    order = [i for group in opt.get("param_groups") or [] for i in group.get("params", [])]
    state, model = opt["state"], ckpt["model"]
    keys = list(model)
    spare = len(keys) - len(order)  # buffers in the state dict
    if spare < 0 or not order:
        return None, "the optimizer state does not match the model's parameters"
    mapping, ki, skipped = {}, 0, 0
    for idx in order:
        shape = _state_shape(state.get(idx))
        while ki < len(keys):
            key = keys[ki]
            ki += 1
            if shape is None or tuple(model[key].shape) == shape:
                mapping[key] = state.get(idx)
                break
            skipped += 1
        else:
            return None, "the optimizer state does not line up with the model's parameters (flattened, e.g. --fp16?)"
    if skipped > spare:
        return None, "the optimizer state does not line up with the model's parameters"
    return mapping, ""


def trained_positions(ckpt: dict, key: str, padding_idx: int):
    """``(L, note)``: positions 0..L-1 of the table under ``key`` got a gradient in training
    (a nonzero second moment, or whatever same-shaped state the optimizer keeps); ``(None, why)``
    when the checkpoint cannot tell."""
    states, why = optimizer_states(ckpt)
    if states is None:
        return None, why
    entry = states.get(key) or {}
    shape = tuple(ckpt["model"][key].shape)
    moment = entry.get("exp_avg_sq")
    if not torch.is_tensor(moment) or tuple(moment.shape) != shape:
        moment = next((v for v in entry.values() if torch.is_tensor(v) and tuple(v.shape) == shape), None)
    if moment is None:
        return None, f"no per-row optimizer state for {key}"
    active = (moment.detach().to(torch.float64) != 0).any(dim=1)
    if padding_idx < active.numel() and active[padding_idx]:
        return None, f"the optimizer state of {key} has a nonzero padding row: not trusted"
    rows = torch.nonzero(active[padding_idx + 1 :]).flatten()
    if rows.numel() == 0:
        return 0, f"no position row of {key} was ever updated"
    length = int(rows[-1]) + 1
    gaps = length - rows.numel()
    note = f"training updated positions 0..{length - 1} (nonzero optimizer state)"
    if gaps:
        note += f", {gaps} of them never"
    return length, note
