"""Named constants shared across bayes_grpo (no magic numbers elsewhere)."""

#: Default probability mass of highest-density intervals in summaries, bands and reports.
HDI_PROB: float = 0.9

#: Dimension names of the data contract (DESIGN.md section 5).
RUN_DIM: str = "run"
STEP_DIM: str = "step"

#: Momentum conventions (DESIGN.md section 1).
HEAVY_BALL: str = "heavy_ball"  # v <- mu v + g; theta <- theta - eta v
EMA: str = "ema"  # m <- b1 m + (1 - b1) g (Adam's beta1): same recursion, step eta (1 - b1)
MOMENTUM_CONVENTIONS: tuple[str, ...] = (HEAVY_BALL, EMA)
