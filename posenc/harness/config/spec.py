"""What a cell is: a model family, a placement and a kind, checked before any work starts."""

from dataclasses import dataclass

from posenc.harness.errors import ConfigError
from posenc.kinds import FAMILIES, PLACEMENTS, family_pe_kinds, pe_kinds, side_kinds
from posenc.kinds.file import KindsFile, KindsFileError, load_kinds_file


@dataclass(frozen=True)
class CellSpec:
    family: str
    arch: str
    placement: str
    pe: str

    @property
    def encoder_pos(self) -> str:
        return side_kinds(self.placement, self.pe)[0]

    @property
    def decoder_pos(self) -> str:
        return side_kinds(self.placement, self.pe)[1]


def user_kinds(cfg) -> KindsFile | None:
    """The user's kinds file (``kinds_module=``), loaded once per process, or None; ConfigError
    (one line) for a missing file, one that fails, registers nothing or clashes with a kind."""
    value = cfg.get("kinds_module")
    if value is None:
        return None
    try:
        return load_kinds_file(value)
    except KindsFileError as err:
        raise ConfigError(str(err)) from None


def check_values(cfg) -> None:
    """Each of ``model.family``, ``placement`` and ``pe`` on its own (``pe`` among the kinds
    registered now, a user's file's included once ``cell_spec`` loaded it); raise ConfigError."""
    if cfg.model.family not in FAMILIES:
        raise ConfigError(f"model.family={cfg.model.family!r} is not allowed; allowed: {', '.join(FAMILIES)}")
    if cfg.placement not in PLACEMENTS:
        raise ConfigError(f"placement={cfg.placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    if cfg.pe not in pe_kinds():  # the registry as it is now: kinds registered from outside count
        raise ConfigError(f"pe={cfg.pe!r} is not allowed; allowed: {', '.join(pe_kinds())}")


def cell_spec(cfg) -> tuple:
    """``(CellSpec, KindsFile or None)``: the user's kinds file loaded (read and hashed) once, then
    each value checked on its own; raise ConfigError. Whether the values go together is
    ``check_possible``'s: a grid that skips impossible cells decides its skip from the spec first."""
    kinds = user_kinds(cfg)
    check_values(cfg)
    return CellSpec(cfg.model.family, cfg.model.arch, cfg.placement, cfg.pe), kinds


def check_possible(spec: CellSpec, model: str) -> None:
    """The kind against the model's family (``model``: its name, for the message); raise ConfigError."""
    allowed = family_pe_kinds(spec.family)
    if spec.placement != "none" and spec.pe not in allowed:
        raise ConfigError(f"pe={spec.pe!r} is not possible for model={model} ({spec.family}); "
                          f"allowed: {', '.join(allowed)}")
