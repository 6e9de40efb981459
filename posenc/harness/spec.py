"""What a cell is: a model family, a placement and a kind, checked before any work starts."""

from dataclasses import dataclass

PLACEMENTS = ("both", "source", "target", "none")
PE_KINDS = ("learned", "sinusoidal", "rope")
FAMILY_KINDS = {"fconv": ("learned", "sinusoidal"), "transformer": ("learned", "sinusoidal", "rope")}


class ConfigError(ValueError):
    """A configuration the harness refuses; the message is one line naming the value and what is allowed."""


@dataclass(frozen=True)
class CellSpec:
    family: str
    arch: str
    placement: str
    pe: str

    @property
    def encoder_pos(self) -> str:
        return self.pe if self.placement in ("both", "source") else "none"

    @property
    def decoder_pos(self) -> str:
        return self.pe if self.placement in ("both", "target") else "none"


def check_values(cfg) -> None:
    """Each of ``model.family``, ``placement`` and ``pe`` on its own; raise ConfigError."""
    if cfg.model.family not in FAMILY_KINDS:
        raise ConfigError(f"model.family={cfg.model.family!r} is not allowed; allowed: {', '.join(FAMILY_KINDS)}")
    if cfg.placement not in PLACEMENTS:
        raise ConfigError(f"placement={cfg.placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    if cfg.pe not in PE_KINDS:
        raise ConfigError(f"pe={cfg.pe!r} is not allowed; allowed: {', '.join(PE_KINDS)}")


def cell_spec(cfg) -> CellSpec:
    """Check ``placement``, ``pe`` and the model, alone and against each other; raise ConfigError."""
    check_values(cfg)
    family = cfg.model.family
    spec = CellSpec(family, cfg.model.arch, cfg.placement, cfg.pe)
    if spec.placement != "none" and cfg.pe not in FAMILY_KINDS[family]:
        raise ConfigError(f"pe={cfg.pe!r} is not possible for model={cfg.model.name} ({family}); "
                          f"allowed: {', '.join(FAMILY_KINDS[family])}")
    return spec


def grid_skip_reason(family: str, pe: str, placement: str):
    """Why a grid sweep leaves a cell out, or None: a kind the family cannot do, or a repeat of
    the kind-free ``none`` placement (run once, under ``pe=learned``)."""
    if pe not in FAMILY_KINDS.get(family, ()):
        return f"{family} cannot do pe={pe}"
    if placement == "none" and pe != "learned":
        return "placement=none has no kind; it runs once, as pe=learned"
    return None
