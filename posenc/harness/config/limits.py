"""Time limits that agree with each other.

``budget.max_time_min`` is the training time the user asks for (fairseq's ``--stop-time-hours``,
counted over every run of a resumed cell, after which fairseq validates, saves and stops
normally). ``budget.step_timeout_min`` is a hard safety limit on any one fairseq step, for a step
that hangs. The training step's hard limit is never shorter than the training time asked for plus
room for fairseq's start-up and its last validation and save.
"""

from dataclasses import dataclass

from posenc.harness.errors import ConfigError

MIN_GRACE_MIN = 5.0     # start-up, the last validation and checkpoint save
GRACE_FRACTION = 0.1    # ... or a tenth of the training time, if more


@dataclass(frozen=True)
class StepLimits:
    train_s: float      # hard limit of fairseq-train (0 = none)
    other_s: float      # hard limit of each fairseq-generate
    note: str = ""      # said once when the training limit was raised above budget.step_timeout_min


def step_limits(budget) -> StepLimits:
    step = _minutes(budget, "step_timeout_min")
    asked = _minutes(budget, "max_time_min")
    if step == 0:
        return StepLimits(0.0, 0.0)
    if asked == 0:
        return StepLimits(step * 60, step * 60)
    needed = asked + max(MIN_GRACE_MIN, GRACE_FRACTION * asked)
    if step >= needed:
        return StepLimits(step * 60, step * 60)
    return StepLimits(needed * 60, step * 60,
                      f"training may take budget.max_time_min={asked:g} min, "
                      f"more than budget.step_timeout_min={step:g} "
                      f"allows: its hard limit is {needed:g} min (the training time plus {needed - asked:g} min for "
                      f"start-up and the last validation and save)")


def _minutes(budget, key) -> float:
    value = budget.get(key, 0)
    try:
        minutes = float(value or 0)
    except (TypeError, ValueError):
        minutes = -1.0
    if minutes < 0:
        raise ConfigError(f"budget.{key}={value!r} is not allowed; allowed: minutes >= 0 (0 = no limit)")
    return minutes


@dataclass(frozen=True)
class RunLength:
    max_epoch: int   # fairseq's --max-epoch (0 = no cap)
    max_update: int  # fairseq's --max-update (0 = no cap)


def run_length(cfg) -> RunLength:
    """Where training stops: the budget's caps, and the schedule's own length (``optim.max_update``,
    e.g. Vaswani et al.'s 100k updates), whichever comes first. A run that nothing ends is refused:
    fairseq would train until it is killed, and every rerun would resume it."""
    budget, optim = cfg.budget, cfg.optim
    max_epoch = _count(budget, "budget", "max_epoch")
    caps = [n for n in (_count(budget, "budget", "max_update"), _count(optim, "optim", "max_update")) if n]
    max_update = min(caps) if caps else 0
    stops_itself = float((optim.get("args") or {}).get("stop_min_lr", -1) or -1) > 0
    if not (max_epoch or max_update or _minutes(budget, "max_time_min") or stops_itself):
        raise ConfigError(f"nothing ends this run: budget={budget.get('name')} caps no epochs, updates or time, and "
                          f"optim={optim.get('name')} has no length (optim.max_update) or lr floor "
                          f"(optim.args.stop_min_lr); "
                          f"set budget.max_epoch, budget.max_update or budget.max_time_min")
    return RunLength(max_epoch, max_update)


def _count(node, group: str, key: str) -> int:
    value = node.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{group}.{key}={value!r} is not allowed; allowed: a whole number >= 0 (0 = no cap)")
    return value
